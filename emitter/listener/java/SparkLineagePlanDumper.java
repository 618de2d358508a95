// What a batch action reads, in one round trip: describe(plan) returns one JSON line listing every
// leaf of the plan and its subqueries (class, key, schema, and what SparkLineageRelations tells of
// the relation; for a file source also the files Spark's index listed), then the plan's JSON on
// the next line, then one line per plan a cached DataFrame holds (an InMemoryRelation leaf's
// "cached" is its index among those lines; their leaves follow in the same list).
// A leaf the helper fails on is listed with its "error" instead (never a quiet gap).
// The plan's JSON is SparkLineageCompactPlan's (toJSON() without what the lineage engine never
// reads), or Spark's own toJSON() after setCompact(false) or when the compact writer fails.
public class SparkLineagePlanDumper {
  static final String[] V2_RELATIONS = { "DataSourceV2Relation", "DataSourceV2ScanRelation" };

  boolean compact = true;
  String[] namingKeys = new String[0];

  public void setCompact(boolean compact) { this.compact = compact; }

  // the data source option keys that name a dataset, comma separated (emitter.naming.NAMING_OPTIONS)
  public void setNamingKeys(String keys) { this.namingKeys = keys.length() == 0 ? new String[0] : keys.split(","); }

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
    return SparkLineageResult.of(describeText(plan));
  }

  // describe()'s text itself (never a file reference)
  String describeText(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan) throws Exception {
    StringBuilder b = new StringBuilder("[");
    java.util.List pending = new java.util.ArrayList();  // the plan, then each cached plan
    java.util.Map cachedIndex = new java.util.HashMap();  // InMemoryRelation key -> index in pending - 1
    Described described = new Described();  // what leaves over the same table share, written once
    pending.add(plan);
    boolean first = true;
    for (int next = 0; next < pending.size(); next++) {
      org.apache.spark.sql.catalyst.plans.logical.LogicalPlan current = (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) pending.get(next);
      java.util.List plans = new java.util.ArrayList();
      plans.add(current);
      scala.collection.Iterator subqueries = current.subqueriesAll().iterator();
      while (subqueries.hasNext()) { plans.add(subqueries.next()); }
      commandQueries(current, plans);
      for (int p = 0; p < plans.size(); p++) {
        scala.collection.Iterator leaves = ((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plans.get(p)).collectLeaves().iterator();
        while (leaves.hasNext()) {
          if (!first) b.append(',');
          first = false;
          guardedLeaf(b, (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) leaves.next(), pending, cachedIndex, described);
        }
      }
    }
    b.append("]\n").append(planJson(plan));
    for (int i = 1; i < pending.size(); i++) {
      b.append('\n').append(planJson((org.apache.spark.sql.catalyst.trees.TreeNode) pending.get(i)));
    }
    return b.toString();
  }

  // A query reads a table as often as it names it: each LogicalRelation is a copy of the catalog's
  // cached one (new attributes, the same relation and file index). Within one describe(), a
  // schema's JSON is written once per distinct schema, and a relation's description (and the
  // files its index lists) once per relation object.
  static class Described {
    java.util.Map schemas = new java.util.HashMap();  // StructType -> its JSON
    java.util.Map relations = new java.util.IdentityHashMap();  // relation -> {catalog table or null, fields}

    String schema(org.apache.spark.sql.types.StructType schema) {
      String json = (String) schemas.get(schema);
      if (json == null) {
        json = schema.json();
        schemas.put(schema, json);
      }
      return json;
    }
  }

  void guardedLeaf(StringBuilder b, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan leaf, java.util.List pending, java.util.Map cachedIndex,
      Described described) {
    int mark = b.length();
    try {
      leaf(b, leaf, pending, cachedIndex, described);
    } catch (Throwable error) {
      b.setLength(mark);
      b.append("{\"class\":");
      SparkLineageResult.jsonString(b, leaf.getClass().getSimpleName());
      Long key = key(leaf);
      if (key != null) b.append(",\"key\":").append(key.longValue());
      b.append(",\"error\":");
      SparkLineageResult.jsonString(b, String.valueOf(error));
      b.append('}');
    }
  }

  // the query SaveIntoDataSourceCommand holds outside its children (a `format(...).save()` through
  // a data source such as Delta), whose leaves it reads, and the target and source plans of Delta's
  // row-level commands (MERGE INTO, UPDATE, DELETE), held in their fields. Not every leaf command's:
  // a wrapper command's query (a Hive CTAS's) is read by the nested write it runs, which is the run
  static void commandQueries(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, java.util.List plans) {
    if (SparkLineageWrites.isDeltaCommand(plan)) {
      String[] fields = { "target", "source" };
      for (int i = 0; i < fields.length; i++) {
        try {
          if (!SparkLineageRelations.hasMethod(plan, fields[i])) continue;
          Object child = SparkLineageRelations.call(plan, fields[i]);
          if (child instanceof org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plans.add(child);
        } catch (Exception unreadable) {
          // a Delta release without the field: the command's run names its target only
        }
      }
      return;
    }
    if (!plan.getClass().getSimpleName().equals("SaveIntoDataSourceCommand") || !plan.children().isEmpty()) return;
    scala.collection.Iterator inner = plan.innerChildren().iterator();
    while (inner.hasNext()) {
      Object child = inner.next();
      if (child instanceof org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plans.add(child);
    }
  }

  static Long key(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan leaf) {
    if (leaf.output().isEmpty()) return null;
    org.apache.spark.sql.catalyst.expressions.Attribute first = (org.apache.spark.sql.catalyst.expressions.Attribute) leaf.output().head();
    return Long.valueOf(first.exprId().id());
  }

  void leaf(StringBuilder b, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan leaf, java.util.List pending, java.util.Map cachedIndex,
      Described described) throws Exception {
    String leafClass = leaf.getClass().getSimpleName();
    b.append("{\"class\":");
    SparkLineageResult.jsonString(b, leafClass);
    Long key = key(leaf);
    if (key != null) b.append(",\"key\":").append(key.longValue());
    b.append(",\"schema\":").append(described.schema(leaf.schema()));
    if (leaf instanceof org.apache.spark.sql.execution.datasources.LogicalRelation) {
      org.apache.spark.sql.execution.datasources.LogicalRelation logical = (org.apache.spark.sql.execution.datasources.LogicalRelation) leaf;
      Object relation = logical.relation();
      Object table = logical.catalogTable().isDefined() ? logical.catalogTable().get() : null;
      Object[] seen = (Object[]) described.relations.get(relation);
      if (seen != null && seen[0] == table) {
        b.append((String) seen[1]);
      } else {
        StringBuilder fields = new StringBuilder();
        SparkLineageRelations.logicalRelation(fields, logical, namingKeys);
        if (relation instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation) {
          files(fields, ((org.apache.spark.sql.execution.datasources.HadoopFsRelation) relation).location());
        }
        described.relations.put(relation, new Object[] {table, fields.toString()});
        b.append(fields);
      }
    } else if (leafClass.equals("HiveTableRelation")) {
      SparkLineageRelations.catalogTable(b, SparkLineageRelations.call(leaf, "tableMeta"));
    } else if (isV2(leafClass)) {
      SparkLineageRelations.v2Relation(b, leaf);
    } else if (leafClass.equals("InMemoryRelation") && key != null) {
      // shares expr ids with the plan it caches: that plan's JSON is a line of its own
      Object index = cachedIndex.get(key);
      if (index == null) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan cached = SparkLineageRelations.cachedPlan(leaf);
        if (cached != null) {
          index = Integer.valueOf(pending.size() - 1);
          pending.add(cached);
          cachedIndex.put(key, index);
        }
      }
      if (index != null) b.append(",\"cached\":").append(index);
    }
    b.append('}');
  }

  static boolean isV2(String leafClass) {
    for (int i = 0; i < V2_RELATIONS.length; i++) if (V2_RELATIONS[i].equals(leafClass)) return true;
    return false;
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
}
