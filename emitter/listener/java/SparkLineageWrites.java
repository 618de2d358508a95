// The write an action ran: describe(queryExecution, optimizedPlan), called by SparkLineageActions
// within its one round trip, returns one JSON object with the root command's class, its target, save mode, output column names, the schema written and
// the rows, bytes and files the executed plan counted; null when the action writes nothing.
// The target, by command:
//   - InsertIntoHadoopFsRelationCommand: output path, format, the catalog table's identifier;
//   - catalog table commands (CTAS, saveAsTable, Hive inserts and CTAS): the catalog table
//     (identifier, location, provider), as SparkLineageRelations describes one;
//   - V2 writes (AppendData, OverwriteByExpression, OverwritePartitionsDynamic, and the row-level
//     commands' ReplaceData, WriteDelta): the V2 relation written ("v2", the table a row-level
//     operation wraps), its schema and columns, and "staged" when the table is a
//     StagedTable, which only an atomic CTAS or RTAS writes (its nested data write);
//   - V2 CTAS and RTAS (CreateTableAsSelect, ReplaceTableAsSelect; the session catalog's CTAS
//     becomes a V1 command): the catalog identifier of the table they create, the query's schema;
//   - SaveIntoDataSourceCommand (JDBC, Kafka, any V1 source): the source's class and the
//     options that name a dataset;
//   - Delta's row-level commands (MergeIntoCommand, UpdateCommand, DeleteCommand, which Delta runs
//     itself): the Delta table of the command's target plan (its root path, format delta, the
//     catalog table's identifier when it has one), its schema and columns.
// A write it fails on comes back as {"command", "error"}. This is the one list of the write
// commands the emitter knows. Methods are called by name: they differ between Spark versions.
public class SparkLineageWrites {
  static final String[] METRICS = { "numOutputRows", "numOutputBytes", "numFiles" };
  static final String[] TABLE_COMMANDS = { "CreateDataSourceTableAsSelectCommand", "InsertIntoHiveTable" };
  static final String[] TABLE_DESC_COMMANDS = {
    "SaveAsV1TableCommand", "CreateHiveTableAsSelectCommand", "OptimizedCreateHiveTableAsSelectCommand"
  };
  static final String[] V2_COMMANDS = { "AppendData", "OverwriteByExpression", "OverwritePartitionsDynamic", "ReplaceData", "WriteDelta" };
  static final String[] V2_CREATE_COMMANDS = { "CreateTableAsSelect", "ReplaceTableAsSelect" };
  static final String[] DELTA_COMMANDS = { "MergeIntoCommand", "UpdateCommand", "DeleteCommand" };

  String[] namingKeys = new String[0];

  // the data source option keys that name a dataset, comma separated (emitter.naming.NAMING_OPTIONS)
  public void setNamingKeys(String keys) { this.namingKeys = keys.length() == 0 ? new String[0] : keys.split(","); }

  // the description's JSON (never a file reference), null when the action writes nothing
  String describe(Object queryExecution, Object root) throws Exception {
    String command = root.getClass().getSimpleName();
    if (!isWrite(command) && !isDeltaCommand(root)) return null;
    StringBuilder b = new StringBuilder("{\"command\":");
    SparkLineageResult.jsonString(b, command);
    int mark = b.length();
    try {
      target(b, root, command);
      b.append(",\"metrics\":{");
      metrics(b, physicalRoot(call(queryExecution, "executedPlan")));
      b.append('}');
    } catch (Throwable error) {
      b.setLength(mark);
      b.append(",\"error\":");
      SparkLineageResult.jsonString(b, String.valueOf(error));
    }
    return b.append('}').toString();
  }

  static boolean isWrite(String command) {
    return command.equals("InsertIntoHadoopFsRelationCommand") || command.equals("SaveIntoDataSourceCommand")
        || among(command, TABLE_COMMANDS) || among(command, TABLE_DESC_COMMANDS) || among(command, V2_COMMANDS)
        || among(command, V2_CREATE_COMMANDS);
  }

  // one of Delta's row-level commands (by class name and package: no Delta classes compiled in)
  static boolean isDeltaCommand(Object plan) {
    return among(plan.getClass().getSimpleName(), DELTA_COMMANDS) && plan.getClass().getName().startsWith(SparkLineageRelations.DELTA_PACKAGE);
  }

  void target(StringBuilder b, Object root, String command) throws Exception {
    if (isDeltaCommand(root)) {
      deltaTarget(b, root);
    } else if (command.equals("InsertIntoHadoopFsRelationCommand")) {
      b.append(",\"path\":");
      SparkLineageResult.jsonString(b, call(root, "outputPath").toString());
      b.append(",\"format\":");
      SparkLineageResult.jsonString(b, SparkLineageRelations.fileFormat(call(root, "fileFormat")));
      Object table = option(call(root, "catalogTable"));
      if (table != null) { b.append(",\"table\":"); SparkLineageRelations.identifier(b, call(table, "identifier")); }
      mode(b, root);
      columns(b, root);
      querySchema(b, root);
    } else if (among(command, TABLE_COMMANDS) || among(command, TABLE_DESC_COMMANDS)) {
      SparkLineageRelations.catalogTable(b, call(root, among(command, TABLE_COMMANDS) ? "table" : "tableDesc"));
      mode(b, root);
      columns(b, root);
      querySchema(b, root);
    } else if (among(command, V2_COMMANDS)) {
      Object table = call(root, "table");
      SparkLineageRelations.v2Relation(b, table);
      if (SparkLineageRelations.operationTable(call(table, "table")) instanceof org.apache.spark.sql.connector.catalog.StagedTable) b.append(",\"staged\":true");
      b.append(",\"mode\":");
      SparkLineageResult.jsonString(b, command.equals("AppendData") ? "Append" : "Overwrite");
      org.apache.spark.sql.types.StructType schema = (org.apache.spark.sql.types.StructType) call(table, "schema");
      fieldNames(b, schema);
      b.append(",\"schema\":").append(schema.json());
    } else if (among(command, V2_CREATE_COMMANDS)) {
      SparkLineageRelations.v2Created(b, call(root, "name"));
      b.append(",\"mode\":");
      boolean ignoreIfExists = command.equals("CreateTableAsSelect") && ((Boolean) call(root, "ignoreIfExists")).booleanValue();
      SparkLineageResult.jsonString(b, command.equals("ReplaceTableAsSelect") ? "Overwrite" : ignoreIfExists ? "Ignore" : "ErrorIfExists");
      org.apache.spark.sql.types.StructType schema = (org.apache.spark.sql.types.StructType) call(call(root, "query"), "schema");
      fieldNames(b, schema);
      b.append(",\"schema\":").append(schema.json());
    } else {  // SaveIntoDataSourceCommand
      b.append(",\"source\":");
      SparkLineageResult.jsonString(b, call(root, "dataSource").getClass().getSimpleName());
      SparkLineageRelations.options(b, call(root, "options"), namingKeys);
      mode(b, root);
      org.apache.spark.sql.types.StructType schema = (org.apache.spark.sql.types.StructType) call(call(root, "query"), "schema");
      fieldNames(b, schema);
      b.append(",\"schema\":").append(schema.json());
    }
  }

  // the Delta table a row-level command reads and writes: the relation of its target plan
  static void deltaTarget(StringBuilder b, Object root) throws Exception {
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan target = (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) call(root, "target");
    org.apache.spark.sql.execution.datasources.LogicalRelation relation = null;
    scala.collection.Iterator leaves = target.collectLeaves().iterator();
    while (relation == null && leaves.hasNext()) {
      Object leaf = leaves.next();
      if (leaf instanceof org.apache.spark.sql.execution.datasources.LogicalRelation
          && ((org.apache.spark.sql.execution.datasources.LogicalRelation) leaf).relation() instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation) {
        relation = (org.apache.spark.sql.execution.datasources.LogicalRelation) leaf;
      }
    }
    if (relation == null) throw new IllegalStateException("no Delta relation in the command's target");
    org.apache.spark.sql.execution.datasources.HadoopFsRelation fs = (org.apache.spark.sql.execution.datasources.HadoopFsRelation) relation.relation();
    b.append(",\"path\":");
    SparkLineageResult.jsonString(b, String.valueOf(fs.location().rootPaths().head()));
    b.append(",\"format\":\"delta\"");
    Object table = SparkLineageRelations.hasMethod(root, "catalogTable") ? option(call(root, "catalogTable")) : null;
    if (table == null && relation.catalogTable().isDefined()) table = relation.catalogTable().get();
    if (table != null) { b.append(",\"table\":"); SparkLineageRelations.identifier(b, call(table, "identifier")); }
    b.append(",\"mode\":\"Overwrite\"");
    org.apache.spark.sql.types.StructType schema = target.schema();
    fieldNames(b, schema);
    b.append(",\"schema\":").append(schema.json());
  }

  static void querySchema(StringBuilder b, Object root) throws Exception {
    b.append(",\"schema\":").append(call(call(call(root, "query"), "schema"), "json"));
  }

  static void mode(StringBuilder b, Object root) throws Exception {
    if (!SparkLineageRelations.hasMethod(root, "mode")) return;  // Hive inserts have none
    b.append(",\"mode\":");
    SparkLineageResult.jsonString(b, call(root, "mode").toString());
  }

  static void columns(StringBuilder b, Object root) throws Exception {
    if (!SparkLineageRelations.hasMethod(root, "outputColumnNames")) return;  // the query's schema names them
    scala.collection.Iterator names = ((scala.collection.Iterable) call(root, "outputColumnNames")).iterator();
    b.append(",\"columns\":[");
    boolean first = true;
    while (names.hasNext()) {
      if (!first) b.append(',');
      first = false;
      SparkLineageResult.jsonString(b, names.next().toString());
    }
    b.append(']');
  }

  static void fieldNames(StringBuilder b, org.apache.spark.sql.types.StructType schema) {
    String[] names = schema.fieldNames();
    b.append(",\"columns\":[");
    for (int i = 0; i < names.length; i++) { if (i > 0) b.append(','); SparkLineageResult.jsonString(b, names[i]); }
    b.append(']');
  }

  static boolean among(String command, String[] commands) {
    for (int i = 0; i < commands.length; i++) if (commands[i].equals(command)) return true;
    return false;
  }

  // The write node under adaptive execution (AQE wraps whole planned writes when they shuffle).
  static Object physicalRoot(Object plan) throws Exception {
    for (int i = 0; i < 5; i++) {
      String name = plan.getClass().getSimpleName();
      if (name.equals("AdaptiveSparkPlanExec")) plan = call(plan, "executedPlan");
      else if (name.endsWith("QueryStageExec")) plan = call(plan, "plan");
      else if (name.equals("CommandResultExec")) plan = call(plan, "commandPhysicalPlan");
      else break;
    }
    return plan;
  }

  static void metrics(StringBuilder b, Object node) {
    try {
      scala.collection.Map metrics = (scala.collection.Map) call(node, "metrics");
      boolean first = true;
      for (int i = 0; i < METRICS.length; i++) {
        Object metric = option(metrics.get(METRICS[i]));
        if (metric == null) continue;
        if (!first) b.append(',');
        first = false;
        b.append('"').append(METRICS[i]).append("\":").append(call(metric, "value").toString());
      }
    } catch (Exception noMetrics) {
      // an executed plan without write metrics
    }
  }

  static Object option(Object value) {
    return SparkLineageRelations.option(value);
  }

  static Object call(Object target, String method) throws Exception {
    return SparkLineageRelations.call(target, method);
  }
}
