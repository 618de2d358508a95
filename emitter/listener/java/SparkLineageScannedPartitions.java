// Which partitions the file scans of an executed plan read after static partition pruning, as
// one JSON array: [{"key": leaf key, "paths": [root paths], "directories": [partition dirs]}],
// and those of Iceberg scans (BatchScanExec over Iceberg's scan) as [{"key", "partitions": [...]}],
// each partition as SparkLineageIceberg writes one: the partitions of the tasks Iceberg planned,
// after its own pruning. Only scans of partitioned file sources and of Iceberg tables are listed
// (an unpartitioned Iceberg table's leaf has no partition columns: the Python side drops it). The
// file partitions are Spark's own `selectedPartitions` of each FileSourceScanExec (computed when
// the scan ran: no new listing), which leave dynamic pruning filters out. Its type differs between Spark versions
// (PartitionDirectory[] on 3.5, a ScanFileListing on 4.x), so it is read by reflection: a helper
// that does not compile would leave every helper of the compilation unit out.
// The key is that of the optimized plan's LogicalRelation the scan was planned from (its logical
// link), so the Python side can tell which input it belongs to. A Delta table a write command's
// query reads has no scan in the command's executed plan: its partitions are the ones Delta's own
// file index lists for the partition filters above it (`deltaReads`). Not the target of Delta's
// row-level commands (MERGE, UPDATE, DELETE): by the time the listener asks, that index lists the
// version the command committed, not the one it read; their inputs are left without partitions.
public class SparkLineageScannedPartitions {
  static final int PARTITIONED_SCANS = 0;
  static final int KAFKA_SCANS = 1;

  public String of(org.apache.spark.sql.execution.QueryExecution queryExecution) throws Exception {
    java.util.List scans = new java.util.ArrayList();
    collect(queryExecution.executedPlan(), PARTITIONED_SCANS, scans, new java.util.IdentityHashMap());
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < scans.size(); i++) {
      int mark = b.length();
      try {
        if (b.length() > 1) b.append(',');
        if (scans.get(i) instanceof org.apache.spark.sql.execution.FileSourceScanExec) {
          scan(b, (org.apache.spark.sql.execution.FileSourceScanExec) scans.get(i));
        } else {
          icebergScan(b, (org.apache.spark.sql.execution.SparkPlan) scans.get(i));
        }
      } catch (Throwable unreadable) {
        b.setLength(mark);
      }
    }
    java.util.Set scannedKeys = new java.util.HashSet();
    for (int i = 0; i < scans.size(); i++) scannedKeys.add(key((org.apache.spark.sql.execution.SparkPlan) scans.get(i)));
    deltaReads(b, queryExecution.optimizedPlan(), null, scannedKeys);
    return SparkLineageResult.of(b.append(']').toString());
  }

  // Delta reads the executed plan has no scan of (a Delta write command plans its query itself):
  // {"key", "paths", "directories"} of the partitions Delta's file index lists for the partition
  // filters right above the relation: a time-travel read's pinned version, else the table's latest
  // (Delta's index lists that one: a partition the same action's write created can be among them)
  static void deltaReads(StringBuilder b, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
      org.apache.spark.sql.catalyst.plans.logical.LogicalPlan parent, java.util.Set scannedKeys) {
    if (SparkLineageWrites.isDeltaCommand(plan)) return;
    if (plan instanceof org.apache.spark.sql.execution.datasources.LogicalRelation) {
      int mark = b.length();
      try {
        deltaRead(b, (org.apache.spark.sql.execution.datasources.LogicalRelation) plan, parent, scannedKeys);
      } catch (Throwable unreadable) {
        b.setLength(mark);
      }
      return;
    }
    scala.collection.Iterator children = plan.children().iterator();
    while (children.hasNext()) deltaReads(b, (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) children.next(), plan, scannedKeys);
    scala.collection.Iterator inner = plan.innerChildren().iterator();  // a command's query (SaveIntoDataSourceCommand)
    while (inner.hasNext()) {
      Object child = inner.next();
      if (child instanceof org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) {
        deltaReads(b, (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) child, plan, scannedKeys);
      }
    }
  }

  static void deltaRead(StringBuilder b, org.apache.spark.sql.execution.datasources.LogicalRelation leaf,
      org.apache.spark.sql.catalyst.plans.logical.LogicalPlan parent, java.util.Set scannedKeys) throws Exception {
    if (!(leaf.relation() instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation)) return;
    org.apache.spark.sql.execution.datasources.HadoopFsRelation fs = (org.apache.spark.sql.execution.datasources.HadoopFsRelation) leaf.relation();
    Object index = fs.location();
    if (!index.getClass().getName().startsWith(SparkLineageRelations.DELTA_PACKAGE) || fs.partitionSchema().isEmpty()) return;
    Long key = SparkLineagePlanDumper.key(leaf);
    if (key == null || scannedKeys.contains(key)) return;
    java.util.List filters = new java.util.ArrayList();
    if (parent instanceof org.apache.spark.sql.catalyst.plans.logical.Filter) {
      partitionConjuncts(((org.apache.spark.sql.catalyst.plans.logical.Filter) parent).condition(), fs.partitionSchema().fieldNames(), filters);
    }
    java.util.Set directories = new java.util.LinkedHashSet();
    Object listing = listFiles(index, scala.collection.JavaConverters.asScalaBuffer(filters).toList());
    directoriesOf(scala.collection.JavaConverters.asJavaIterator(iterator(listing)), directories);
    if (b.length() > 1) b.append(',');
    fileScan(b, key, fs.location(), directories);
  }

  // the conjuncts of `condition` that read partition columns only
  static void partitionConjuncts(org.apache.spark.sql.catalyst.expressions.Expression condition, String[] partitionColumns, java.util.List found) {
    if (condition instanceof org.apache.spark.sql.catalyst.expressions.And) {
      org.apache.spark.sql.catalyst.expressions.And and = (org.apache.spark.sql.catalyst.expressions.And) condition;
      partitionConjuncts(and.left(), partitionColumns, found);
      partitionConjuncts(and.right(), partitionColumns, found);
      return;
    }
    scala.collection.Iterator references = condition.references().iterator();
    if (!references.hasNext()) return;
    while (references.hasNext()) {
      String name = ((org.apache.spark.sql.catalyst.expressions.Attribute) references.next()).name();
      boolean partition = false;
      for (int i = 0; i < partitionColumns.length; i++) partition |= partitionColumns[i].equalsIgnoreCase(name);
      if (!partition) return;
    }
    found.add(condition);
  }

  static Object listFiles(Object index, Object partitionFilters) throws Exception {
    java.lang.reflect.Method[] methods = index.getClass().getMethods();
    for (int i = 0; i < methods.length; i++) {
      if (methods[i].getName().equals("listFiles") && methods[i].getParameterTypes().length == 2) {
        return methods[i].invoke(index, new Object[] { partitionFilters, scala.collection.immutable.Nil$.MODULE$ });
      }
    }
    throw new NoSuchMethodException("listFiles");
  }

  // the scans of the plan `wanted` names (PARTITIONED_SCANS: partitioned FileSourceScanExecs and
  // Iceberg's BatchScanExecs; KAFKA_SCANS: batch reads of Kafka, SparkLineageKafkaReads), through
  // adaptive plans, query stages and subqueries (innerChildren); the plans cached DataFrames hold are
  // not descended into
  static void collect(Object node, int wanted, java.util.List scans, java.util.IdentityHashMap seen) {
    if (node == null || seen.put(node, Boolean.TRUE) != null) return;
    if (node instanceof org.apache.spark.sql.execution.DataSourceScanExec || node.getClass().getSimpleName().equals("BatchScanExec")) {
      if (wanted == KAFKA_SCANS ? SparkLineageKafkaReads.isKafkaScan(node) : isPartitionedScan(node)) scans.add(node);
      return;
    }
    if (node instanceof org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) {
      collect(((org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) node).executedPlan(), wanted, scans, seen);
    }
    if (node instanceof org.apache.spark.sql.execution.adaptive.QueryStageExec) {
      collect(((org.apache.spark.sql.execution.adaptive.QueryStageExec) node).plan(), wanted, scans, seen);
    }
    if (node instanceof org.apache.spark.sql.catalyst.plans.QueryPlan) {
      org.apache.spark.sql.catalyst.plans.QueryPlan plan = (org.apache.spark.sql.catalyst.plans.QueryPlan) node;
      scala.collection.Iterator children = plan.children().iterator();
      while (children.hasNext()) collect(children.next(), wanted, scans, seen);
      scala.collection.Iterator inner = plan.innerChildren().iterator();
      while (inner.hasNext()) collect(inner.next(), wanted, scans, seen);
    }
  }

  static boolean isPartitionedScan(Object node) {
    if (node instanceof org.apache.spark.sql.execution.FileSourceScanExec) {
      return !((org.apache.spark.sql.execution.FileSourceScanExec) node).relation().partitionSchema().isEmpty();
    }
    if (!node.getClass().getSimpleName().equals("BatchScanExec")) return false;
    try {
      return invoke(node, "scan").getClass().getName().startsWith("org.apache.iceberg.");
    } catch (Exception noScan) {
      return false;  // another V2 source
    }
  }

  // {"key", "partitions"} of a BatchScanExec over an Iceberg scan (none for an unpartitioned table,
  // whose leaf has no partition columns: the Python side leaves it out)
  static void icebergScan(StringBuilder b, org.apache.spark.sql.execution.SparkPlan scan) throws Exception {
    java.util.Set partitions = SparkLineageIceberg.partitionsOfTasks((scala.collection.Seq) invoke(scan, "inputPartitions"));
    if (partitions == null) throw new IllegalStateException("not an Iceberg scan");
    Object key = key(scan);
    b.append("{\"key\":").append(key == null ? "null" : key.toString());
    SparkLineageIceberg.appendPartitions(b, partitions);
    b.append('}');
  }

  // the key of the optimized plan's leaf a scan was planned from (its logical link), or null
  static Object key(org.apache.spark.sql.execution.SparkPlan scan) {
    scala.Option link = scan.logicalLink();
    if (!link.isDefined()) return null;
    scala.collection.Seq leaves = ((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) link.get()).collectLeaves();
    if (leaves.size() != 1) return null;
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan leaf = (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) leaves.head();
    if (leaf.output().isEmpty()) return null;
    return Long.valueOf(((org.apache.spark.sql.catalyst.expressions.Attribute) leaf.output().head()).exprId().id());
  }

  static void scan(StringBuilder b, org.apache.spark.sql.execution.FileSourceScanExec scan) throws Exception {
    java.util.Set directories = new java.util.LinkedHashSet();
    partitionDirectories(invoke(scan, "selectedPartitions"), directories);
    fileScan(b, key(scan), scan.relation().location(), directories);
  }

  // {"key", "paths": the index's root paths, "directories"} of one scan of a file source
  static void fileScan(StringBuilder b, Object key, org.apache.spark.sql.execution.datasources.FileIndex index, java.util.Set directories) {
    b.append("{\"key\":").append(key == null ? "null" : key.toString());
    b.append(",\"paths\":[");
    scala.collection.Iterator roots = index.rootPaths().iterator();
    boolean first = true;
    while (roots.hasNext()) {
      if (!first) b.append(',');
      first = false;
      SparkLineageResult.jsonString(b, String.valueOf(roots.next()));
    }
    b.append("],\"directories\":[");
    java.util.Iterator each = directories.iterator();
    first = true;
    while (each.hasNext()) {
      if (!first) b.append(',');
      first = false;
      SparkLineageResult.jsonString(b, (String) each.next());
    }
    b.append("]}");
  }

  // the directory of each selected partition: the parent of its first file (a partition without
  // files was not read)
  static void partitionDirectories(Object selected, java.util.Set directories) throws Exception {
    java.util.Iterator partitions;
    if (selected instanceof Object[]) {
      partitions = java.util.Arrays.asList((Object[]) selected).iterator();
    } else {
      scala.collection.Iterator listing = (scala.collection.Iterator) invoke(selected, "filePartitionIterator");
      java.util.List all = new java.util.ArrayList();
      while (listing.hasNext()) all.add(listing.next());
      partitions = all.iterator();
    }
    directoriesOf(partitions, directories);
  }

  // the parent directory of each partition's first file (a PartitionDirectory's)
  static void directoriesOf(java.util.Iterator partitions, java.util.Set directories) throws Exception {
    while (partitions.hasNext()) {
      scala.collection.Iterator files = iterator(invoke(partitions.next(), "files"));
      if (!files.hasNext()) continue;
      org.apache.hadoop.fs.Path path = (org.apache.hadoop.fs.Path) invoke(files.next(), "getPath");
      if (path.getParent() != null) directories.add(path.getParent().toString());
    }
  }

  static scala.collection.Iterator iterator(Object files) {
    if (files instanceof scala.collection.Iterator) return (scala.collection.Iterator) files;
    return ((scala.collection.Iterable) files).iterator();
  }

  static Object invoke(Object target, String name) throws Exception {
    java.lang.reflect.Method method = target.getClass().getMethod(name, new Class[0]);
    method.setAccessible(true);  // declared by a Scala class that is not public in bytecode
    return method.invoke(target, new Object[0]);
  }
}
