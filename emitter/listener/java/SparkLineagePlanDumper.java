// What a batch action reads and writes, in one round trip: describe(plan) returns every leaf of
// the plan and its subqueries (class, key, schema, paths, format, partition columns, table, the
// files Spark's index listed) as one JSON line, then the plan's JSON.
// The plan's JSON is SparkLineageCompactPlan's (toJSON() without what the lineage engine never
// reads), or Spark's own toJSON() after setCompact(false) or when the compact writer fails.
public class SparkLineagePlanDumper {
  boolean compact = true;

  public void setCompact(boolean compact) { this.compact = compact; }

  String planJson(org.apache.spark.sql.catalyst.trees.TreeNode plan) {
    if (compact) {
      try { return SparkLineageCompactPlan.json(plan); } catch (Exception error) { }
    }
    return plan.toJSON();
  }

  public String dump(org.apache.spark.sql.catalyst.trees.TreeNode plan) throws Exception {
    return SparkLineageResult.of(planJson(plan));
  }

  public String describe(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan) throws Exception {
    StringBuilder b = new StringBuilder("[");
    java.util.List plans = new java.util.ArrayList();
    plans.add(plan);
    scala.collection.Iterator subqueries = plan.subqueriesAll().iterator();
    while (subqueries.hasNext()) { plans.add(subqueries.next()); }
    boolean first = true;
    for (int p = 0; p < plans.size(); p++) {
      scala.collection.Iterator leaves = ((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plans.get(p)).collectLeaves().iterator();
      while (leaves.hasNext()) {
        if (!first) b.append(',');
        first = false;
        leaf(b, (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) leaves.next());
      }
    }
    b.append("]\n").append(planJson(plan));
    return SparkLineageResult.of(b.toString());
  }

  static void opt(StringBuilder b, String key, scala.Option value) {
    if (value.isDefined()) { b.append(",\"").append(key).append("\":"); SparkLineageResult.jsonString(b, String.valueOf(value.get())); }
  }

  // the files Spark's index already listed for the read (for the input snapshot id), as listing
  // lines; null for an index kind we do not know; absent on failure
  static void files(StringBuilder b, Object index) {
    int mark = b.length();
    try {
      StringBuilder listing = new StringBuilder();
      b.append(",\"files\":");
      if (SparkLineageFileListing.appendIndexFiles(index, listing)) { SparkLineageResult.jsonString(b, listing.toString()); }
      else { b.append("null"); }
    } catch (Throwable error) {
      b.setLength(mark);
    }
  }

  static void leaf(StringBuilder b, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan leaf) {
    b.append("{\"class\":");
    SparkLineageResult.jsonString(b, leaf.getClass().getSimpleName());
    if (!leaf.output().isEmpty()) {
      org.apache.spark.sql.catalyst.expressions.Attribute first = (org.apache.spark.sql.catalyst.expressions.Attribute) leaf.output().head();
      b.append(",\"key\":").append(first.exprId().id());
    }
    b.append(",\"schema\":").append(leaf.schema().json());
    if (leaf instanceof org.apache.spark.sql.execution.datasources.LogicalRelation) {
      org.apache.spark.sql.execution.datasources.LogicalRelation logical = (org.apache.spark.sql.execution.datasources.LogicalRelation) leaf;
      Object relation = logical.relation();
      b.append(",\"relation\":");
      SparkLineageResult.jsonString(b, relation.getClass().getSimpleName());
      if (relation instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation) {
        org.apache.spark.sql.execution.datasources.HadoopFsRelation fs = (org.apache.spark.sql.execution.datasources.HadoopFsRelation) relation;
        b.append(",\"paths\":[");
        scala.collection.Iterator paths = fs.location().rootPaths().iterator();
        boolean firstPath = true;
        while (paths.hasNext()) { if (!firstPath) b.append(','); firstPath = false; SparkLineageResult.jsonString(b, String.valueOf(paths.next())); }
        b.append(']');
        Object format = fs.fileFormat();
        b.append(",\"format\":");
        if (format instanceof org.apache.spark.sql.sources.DataSourceRegister) {
          SparkLineageResult.jsonString(b, ((org.apache.spark.sql.sources.DataSourceRegister) format).shortName());
        } else { SparkLineageResult.jsonString(b, String.valueOf(format).toLowerCase()); }
        files(b, fs.location());
        b.append(",\"partitionColumns\":[");
        String[] partitionColumns = fs.partitionSchema().fieldNames();
        for (int i = 0; i < partitionColumns.length; i++) {
          if (i > 0) b.append(',');
          SparkLineageResult.jsonString(b, partitionColumns[i]);
        }
        b.append(']');
      }
      scala.Option catalogTable = logical.catalogTable();
      if (catalogTable.isDefined()) {
        org.apache.spark.sql.catalyst.catalog.CatalogTable table = (org.apache.spark.sql.catalyst.catalog.CatalogTable) catalogTable.get();
        b.append(",\"table\":{\"name\":");
        SparkLineageResult.jsonString(b, table.identifier().table());
        opt(b, "database", table.identifier().database());
        opt(b, "catalog", table.identifier().catalog());
        b.append('}');
        opt(b, "location", table.storage().locationUri());
        opt(b, "provider", table.provider());
      }
    }
    b.append('}');
  }
}
