// The write an action ran, in one round trip instead of a dozen py4j calls: describe(queryExecution)
// returns one JSON object with the root command's class, its target (output path, format, catalog
// table and its location and provider), save mode, output column names, the query's schema JSON, and
// the rows, bytes and files the executed plan counted. Only the file and catalog-table commands are
// described here; for anything else (or any failure) it returns null and the listener reads the
// command through py4j. Methods are called by name, by reflection: they differ between Spark versions.
public class SparkLineageWrites {
  static final String[] METRICS = { "numOutputRows", "numOutputBytes", "numFiles" };

  public String describe(Object queryExecution) {
    try {
      Object root = call(queryExecution, "optimizedPlan");
      String command = root.getClass().getSimpleName();
      StringBuilder b = new StringBuilder("{\"command\":");
      SparkLineageResult.jsonString(b, command);
      if (command.equals("InsertIntoHadoopFsRelationCommand")) {
        b.append(",\"path\":");
        SparkLineageResult.jsonString(b, call(root, "outputPath").toString());
        b.append(",\"format\":");
        SparkLineageResult.jsonString(b, format(call(root, "fileFormat")));
        Object table = option(call(root, "catalogTable"));
        if (table != null) { b.append(",\"table\":"); identifier(b, call(table, "identifier")); }
        b.append(",\"mode\":");
        SparkLineageResult.jsonString(b, call(root, "mode").toString());
        columns(b, root);
      } else if (command.equals("CreateDataSourceTableAsSelectCommand") || command.equals("InsertIntoHiveTable")) {
        catalogTable(b, root, call(root, "table"));
      } else if (command.equals("SaveAsV1TableCommand") || command.equals("CreateHiveTableAsSelectCommand")
          || command.equals("OptimizedCreateHiveTableAsSelectCommand")) {
        catalogTable(b, root, call(root, "tableDesc"));
      } else {
        return null;
      }
      b.append(",\"schema\":").append(call(call(call(root, "query"), "schema"), "json"));
      b.append(",\"metrics\":{");
      metrics(b, physicalRoot(call(queryExecution, "executedPlan")));
      b.append("}}");
      return SparkLineageResult.of(b.toString());
    } catch (Exception error) {
      return null;
    }
  }

  static void catalogTable(StringBuilder b, Object root, Object table) throws Exception {
    b.append(",\"table\":");
    identifier(b, call(table, "identifier"));
    Object location = option(call(call(table, "storage"), "locationUri"));
    if (location != null) { b.append(",\"location\":"); SparkLineageResult.jsonString(b, location.toString()); }
    Object provider = option(call(table, "provider"));
    if (provider != null) { b.append(",\"format\":"); SparkLineageResult.jsonString(b, provider.toString()); }
    try {
      Object mode = call(root, "mode");
      b.append(",\"mode\":");
      SparkLineageResult.jsonString(b, mode.toString());
    } catch (Exception noMode) {
      // a command without a save mode
    }
    columns(b, root);
  }

  static void columns(StringBuilder b, Object root) {
    try {
      scala.collection.Iterator names = ((scala.collection.Iterable) call(root, "outputColumnNames")).iterator();
      b.append(",\"columns\":[");
      boolean first = true;
      while (names.hasNext()) {
        if (!first) b.append(',');
        first = false;
        SparkLineageResult.jsonString(b, names.next().toString());
      }
      b.append(']');
    } catch (Exception noColumns) {
      // the command names no output columns: the query's schema does
    }
  }

  static void identifier(StringBuilder b, Object identifier) throws Exception {
    b.append("{\"name\":");
    SparkLineageResult.jsonString(b, call(identifier, "table").toString());
    String[] parts = { "database", "catalog" };
    for (int i = 0; i < parts.length; i++) {
      try {
        Object value = option(call(identifier, parts[i]));
        if (value != null) {
          b.append(",\"").append(parts[i]).append("\":");
          SparkLineageResult.jsonString(b, value.toString());
        }
      } catch (Exception absent) {
        // older identifiers have no catalog
      }
    }
    b.append('}');
  }

  static String format(Object fileFormat) {
    try {
      return call(fileFormat, "shortName").toString();
    } catch (Exception noShortName) {
      return fileFormat.toString().toLowerCase();
    }
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
    if (value instanceof scala.Option) {
      scala.Option option = (scala.Option) value;
      return option.isDefined() ? option.get() : null;
    }
    return value;
  }

  static Object call(Object target, String method) throws Exception {
    return target.getClass().getMethod(method, new Class[0]).invoke(target, new Object[0]);
  }
}
