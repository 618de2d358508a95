// How the helpers describe a relation, as JSON fields appended to an open object, parsed by
// emitter/described.py. One method per relation kind the emitter names datasets of:
//   - LogicalRelation: the relation's class, and per relation: HadoopFsRelation (root paths,
//     format, partition columns, the version a Delta table's file index reads), JDBCRelation and
//     KafkaRelation (the options that name a dataset); its catalog
//     table (identifier, location, provider) when it has one;
//   - HiveTableRelation: its catalog table;
//   - DataSourceV2Relation, DataSourceV2ScanRelation: the table's
//     identifier and catalog (else its name), the location and provider properties, and an
//     Iceberg table's current snapshot, the snapshot a time-travel read is pinned to and its
//     partition fields, and the filters an Iceberg scan evaluates itself; a table a CTAS or
//     RTAS creates by its identifier alone (a Delta table also by its properties, loaded).
// Of data source options only the keys the caller names are copied (naming keys, never secrets).
// Methods that differ between Spark versions or live outside spark-sql are called by name.
public class SparkLineageRelations {
  static final String DELTA_PACKAGE = "org.apache.spark.sql.delta.";
  static final String[] V2_PROPERTIES = { "location", "provider", "current-snapshot-id" };

  static void logicalRelation(StringBuilder b, org.apache.spark.sql.execution.datasources.LogicalRelation logical, String[] namingKeys)
      throws Exception {
    Object relation = logical.relation();
    // Delta's relation of a catalog table is an anonymous subclass of HadoopFsRelation (no simple name)
    String relationClass = relation instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation
        ? "HadoopFsRelation" : relation.getClass().getSimpleName();
    b.append(",\"relation\":");
    SparkLineageResult.jsonString(b, relationClass);
    if (relation instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation) {
      org.apache.spark.sql.execution.datasources.HadoopFsRelation fs = (org.apache.spark.sql.execution.datasources.HadoopFsRelation) relation;
      b.append(",\"paths\":[");
      scala.collection.Iterator paths = fs.location().rootPaths().iterator();
      boolean firstPath = true;
      while (paths.hasNext()) { if (!firstPath) b.append(','); firstPath = false; SparkLineageResult.jsonString(b, String.valueOf(paths.next())); }
      b.append(']');
      b.append(",\"format\":");
      SparkLineageResult.jsonString(b, fileFormat(fs.fileFormat()));
      b.append(",\"partitionColumns\":[");
      String[] partitionColumns = fs.partitionSchema().fieldNames();
      for (int i = 0; i < partitionColumns.length; i++) {
        if (i > 0) b.append(',');
        SparkLineageResult.jsonString(b, partitionColumns[i]);
      }
      b.append(']');
      deltaVersion(b, fs.location());
    } else if (relationClass.equals("JDBCRelation")) {
      options(b, call(call(relation, "jdbcOptions"), "parameters"), namingKeys);
    } else if (relationClass.equals("KafkaRelation")) {
      // a batch read of Kafka topics: its options (bootstrap servers, subscribe/assign/pattern), a private field
      options(b, field(relation, "sourceOptions"), namingKeys);
    }
    scala.Option catalogTable = logical.catalogTable();
    if (catalogTable.isDefined()) catalogTable(b, catalogTable.get());
  }

  // "deltaVersion": the table version a Delta file index reads, called by name (no Delta classes
  // here): a scan's prepared index, its snapshot's; an index not yet prepared (a write's query as
  // the command holds it), the snapshot it was analyzed on (a time-travel read's pinned one), never
  // its `version()`, which is the table's latest by the time the listener asks
  static void deltaVersion(StringBuilder b, Object index) {
    if (!index.getClass().getName().startsWith(DELTA_PACKAGE)) return;
    try {
      Object snapshot = hasMethod(index, "snapshotAtAnalysis") ? call(index, "snapshotAtAnalysis") : index;
      long version = ((Number) call(snapshot, "version")).longValue();
      b.append(",\"deltaVersion\":").append(version);
    } catch (Exception noVersion) {
      // another Delta index (or release) without it: the version is then read off the log
    }
  }

  // "table" (identifier), "location" and "provider" of a CatalogTable
  static void catalogTable(StringBuilder b, Object table) throws Exception {
    b.append(",\"table\":");
    identifier(b, call(table, "identifier"));
    Object location = option(call(call(table, "storage"), "locationUri"));
    if (location != null) { b.append(",\"location\":"); SparkLineageResult.jsonString(b, location.toString()); }
    Object provider = option(call(table, "provider"));
    if (provider != null) { b.append(",\"provider\":"); SparkLineageResult.jsonString(b, provider.toString()); }
  }

  // a TableIdentifier as {"name", "database", "catalog"}
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
      } catch (NoSuchMethodException absent) {
        // Spark 3.5's identifiers of some commands have no catalog
      }
    }
    b.append('}');
  }

  // "v2": a DataSourceV2Relation (or a scan or streaming relation over one)
  static void v2Relation(StringBuilder b, Object relation) throws Exception {
    Object inner = relation;
    if (!hasMethod(inner, "identifier") && hasMethod(inner, "relation")) inner = call(inner, "relation");
    b.append(",\"v2\":{");
    v2Table(b, operationTable(call(inner, "table")));
    Object identifier = option(call(inner, "identifier"));
    if (identifier != null) v2Identifier(b, identifier, option(call(inner, "catalog")));
    if (inner != relation && hasMethod(relation, "scan")) icebergPushedFilters(b, call(relation, "scan"), operationTable(call(inner, "table")));
    b.append('}');
  }

  // ,"pushedFilters": the filters an Iceberg scan evaluates itself, each one's text and the
  // columns it reads. Spark drops from its plan those Iceberg evaluates completely (the ones
  // that select whole partitions): without them a read's FILTER lineage would be lost.
  static void icebergPushedFilters(StringBuilder b, Object scan, Object table) {
    if (!scan.getClass().getName().startsWith("org.apache.iceberg.")) return;
    int mark = b.length();
    try {
      java.util.List filters = (java.util.List) declared(scan, "filterExpressions");
      ClassLoader loader = scan.getClass().getClassLoader();
      Class expression = Class.forName("org.apache.iceberg.expressions.Expression", true, loader);
      Class struct = Class.forName("org.apache.iceberg.types.Types$StructType", true, loader);
      java.lang.reflect.Method describe = Class.forName("org.apache.iceberg.spark.Spark3Util", true, loader)
          .getMethod("describe", new Class[] { expression });
      java.lang.reflect.Method references = Class.forName("org.apache.iceberg.expressions.Binder", true, loader)
          .getMethod("boundReferences", new Class[] { struct, expression, Boolean.TYPE });
      Object schema = call(call(table, "table"), "schema");
      java.lang.reflect.Method columnName = Class.forName("org.apache.iceberg.Schema", true, loader)
          .getMethod("findColumnName", new Class[] { Integer.TYPE });
      Object fields = call(schema, "asStruct");
      b.append(",\"pushedFilters\":[");
      for (int i = 0; i < filters.size(); i++) {
        if (i > 0) b.append(',');
        b.append("{\"description\":");
        SparkLineageResult.jsonString(b, String.valueOf(describe.invoke(null, new Object[] { filters.get(i) })));
        b.append(",\"columns\":[");
        java.util.Iterator ids = new java.util.TreeSet((java.util.Set) references.invoke(null, new Object[] { fields, filters.get(i), Boolean.FALSE })).iterator();
        boolean first = true;
        while (ids.hasNext()) {
          if (!first) b.append(',');
          first = false;
          SparkLineageResult.jsonString(b, String.valueOf(columnName.invoke(schema, new Object[] { ids.next() })));
        }
        b.append("]}");
      }
      b.append(']');
    } catch (Throwable unreadable) {
      b.setLength(mark);
    }
  }

  // The table a row-level command (MERGE, UPDATE, DELETE) reads and writes: Spark wraps it in a
  // RowLevelOperationTable, which has neither its name's catalog properties nor its snapshot
  static Object operationTable(Object table) throws Exception {
    if (table != null && table.getClass().getSimpleName().equals("RowLevelOperationTable") && hasMethod(table, "table")) {
      return call(table, "table");
    }
    return table;
  }

  // a field of `target`'s class or a superclass, whatever its visibility
  static Object field(Object target, String name) throws Exception {
    for (Class type = target.getClass(); type != null; type = type.getSuperclass()) {
      try {
        java.lang.reflect.Field found = type.getDeclaredField(name);
        found.setAccessible(true);
        return found.get(target);
      } catch (NoSuchFieldException notHere) {
        // its superclass, then
      }
    }
    throw new NoSuchFieldException(name);
  }

  // a method of `target`'s class or a superclass, whatever its visibility
  static Object declared(Object target, String method) throws Exception {
    for (Class type = target.getClass(); type != null; type = type.getSuperclass()) {
      try {
        java.lang.reflect.Method found = type.getDeclaredMethod(method, new Class[0]);
        found.setAccessible(true);
        return found.invoke(target, new Object[0]);
      } catch (NoSuchMethodException notHere) {
        // its superclass, then
      }
    }
    throw new NoSuchMethodException(method);
  }

  // "v2" of a table a command creates (CTAS, RTAS: no table object in the plan): its catalog
  // identifier, from the command's ResolvedIdentifier; a Delta table's name and properties (its
  // location) as its catalog loads it once the command ran
  static void v2Created(StringBuilder b, Object resolvedIdentifier) throws Exception {
    Object identifier = call(resolvedIdentifier, "identifier");
    Object catalog = call(resolvedIdentifier, "catalog");
    Object created = createdDeltaTable(catalog, identifier);
    b.append(",\"v2\":{");
    if (created != null) v2Table(b, created); else b.append("\"properties\":{}");
    v2Identifier(b, identifier, catalog);
    b.append('}');
  }

  // the Delta table a CTAS or RTAS created, else null (another format, or the command failed)
  static Object createdDeltaTable(Object catalog, Object identifier) {
    if (!(catalog instanceof org.apache.spark.sql.connector.catalog.TableCatalog)) return null;
    try {
      Object table = ((org.apache.spark.sql.connector.catalog.TableCatalog) catalog)
          .loadTable((org.apache.spark.sql.connector.catalog.Identifier) identifier);
      return table.getClass().getName().startsWith(DELTA_PACKAGE) ? table : null;
    } catch (Exception notLoaded) {
      return null;
    }
  }

  // ,"identifier":{"name", "namespace"} of a V2 Identifier, and ,"catalog" when known
  static void v2Identifier(StringBuilder b, Object identifier, Object catalog) throws Exception {
    b.append(",\"identifier\":{\"name\":");
    SparkLineageResult.jsonString(b, String.valueOf(call(identifier, "name")));
    b.append(",\"namespace\":[");
    String[] namespace = (String[]) call(identifier, "namespace");
    for (int i = 0; i < namespace.length; i++) { if (i > 0) b.append(','); SparkLineageResult.jsonString(b, namespace[i]); }
    b.append("]}");
    if (catalog != null) { b.append(",\"catalog\":"); SparkLineageResult.jsonString(b, String.valueOf(call(catalog, "name"))); }
  }

  // a V2 Table's name, the properties in V2_PROPERTIES, and an Iceberg table's pinned snapshot
  static void v2Table(StringBuilder b, Object table) throws Exception {
    b.append("\"name\":");
    SparkLineageResult.jsonString(b, String.valueOf(call(table, "name")));
    java.util.Map properties = (java.util.Map) call(table, "properties");
    b.append(",\"properties\":{");
    boolean first = true;
    for (int i = 0; i < V2_PROPERTIES.length; i++) {
      Object value = properties == null ? null : properties.get(V2_PROPERTIES[i]);
      if (value == null) continue;
      if (!first) b.append(',');
      first = false;
      SparkLineageResult.jsonString(b, V2_PROPERTIES[i]);
      b.append(':');
      SparkLineageResult.jsonString(b, value.toString());
    }
    b.append('}');
    Object provider = properties == null ? null : properties.get("provider");
    if (provider != null && provider.toString().equalsIgnoreCase("iceberg") && hasMethod(table, "snapshotId")) {
      // Iceberg's SparkTable: the snapshot a time-travel read is pinned to (null for a current read)
      Object pinned = call(table, "snapshotId");
      if (pinned != null) { b.append(",\"pinnedSnapshot\":"); SparkLineageResult.jsonString(b, pinned.toString()); }
      icebergPartitionFields(b, table);
    }
  }

  // ,"partitionColumns": the names of an Iceberg table's partition fields (its current spec's),
  // which name the partitions its scans read and its commits write; nothing when unreadable
  static void icebergPartitionFields(StringBuilder b, Object table) {
    if (!hasMethod(table, "table")) return;
    int mark = b.length();
    try {
      java.util.List fields = (java.util.List) call(call(call(table, "table"), "spec"), "fields");
      b.append(",\"partitionColumns\":[");
      for (int i = 0; i < fields.size(); i++) {
        if (i > 0) b.append(',');
        SparkLineageResult.jsonString(b, String.valueOf(call(fields.get(i), "name")));
      }
      b.append(']');
    } catch (Throwable unreadable) {
      b.setLength(mark);
    }
  }

  // The "v2" description of a table object alone, as a leaf over it would carry (for tests).
  public static String describeV2Table(Object table) throws Exception {
    StringBuilder b = new StringBuilder("{\"class\":\"DataSourceV2Relation\",\"v2\":{");
    v2Table(b, table);
    return b.append("}}").toString();
  }

  // "options": the entries of a Scala or Java map whose lowercased key is one of `keys`
  static void options(StringBuilder b, Object map, String[] keys) {
    java.util.Map found = new java.util.TreeMap();
    if (map instanceof scala.collection.Map) {
      scala.collection.Iterator entries = ((scala.collection.Map) map).iterator();
      while (entries.hasNext()) {
        scala.Tuple2 entry = (scala.Tuple2) entries.next();
        keep(found, String.valueOf(entry._1()), entry._2(), keys);
      }
    } else if (map instanceof java.util.Map) {
      java.util.Iterator entries = ((java.util.Map) map).entrySet().iterator();
      while (entries.hasNext()) {
        java.util.Map.Entry entry = (java.util.Map.Entry) entries.next();
        keep(found, String.valueOf(entry.getKey()), entry.getValue(), keys);
      }
    }
    b.append(",\"options\":{");
    java.util.Iterator kept = found.entrySet().iterator();
    boolean first = true;
    while (kept.hasNext()) {
      java.util.Map.Entry entry = (java.util.Map.Entry) kept.next();
      if (!first) b.append(',');
      first = false;
      SparkLineageResult.jsonString(b, (String) entry.getKey());
      b.append(':');
      SparkLineageResult.jsonString(b, (String) entry.getValue());
    }
    b.append('}');
  }

  static void keep(java.util.Map found, String key, Object value, String[] keys) {
    String lower = key.toLowerCase(java.util.Locale.ROOT);
    for (int i = 0; i < keys.length; i++) {
      if (keys[i].equals(lower) && value != null) { found.put(lower, value.toString()); return; }
    }
  }

  static String fileFormat(Object format) {
    if (format instanceof org.apache.spark.sql.sources.DataSourceRegister) {
      return ((org.apache.spark.sql.sources.DataSourceRegister) format).shortName();
    }
    return String.valueOf(format).toLowerCase(java.util.Locale.ROOT);
  }

  // The optimized plan a cached DataFrame (InMemoryRelation) holds: Spark 4 keeps it on the
  // cache builder; Spark 3.5 only as the logical link of the cached physical plan: the topmost
  // physical node that has one, if it has the relation's output. null when neither is found.
  static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan cachedPlan(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan inMemory)
      throws Exception {
    Object builder = call(inMemory, "cacheBuilder");
    if (hasMethod(builder, "logicalPlan")) return (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) call(builder, "logicalPlan");
    org.apache.spark.sql.execution.SparkPlan node = (org.apache.spark.sql.execution.SparkPlan) call(builder, "cachedPlan");
    while (node != null) {
      scala.Option link = node.logicalLink();
      if (link.isDefined()) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan = (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) link.get();
        return plan.output().toString().equals(inMemory.output().toString()) ? plan : null;
      }
      scala.collection.Seq children = node.children();
      node = children.size() == 1 ? (org.apache.spark.sql.execution.SparkPlan) children.head() : null;
    }
    return null;
  }

  static boolean hasMethod(Object target, String method) {
    try {
      target.getClass().getMethod(method, new Class[0]);
      return true;
    } catch (NoSuchMethodException absent) {
      return false;
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
    java.lang.reflect.Method found = target.getClass().getMethod(method, new Class[0]);
    found.setAccessible(true);
    return found.invoke(target, new Object[0]);
  }
}
