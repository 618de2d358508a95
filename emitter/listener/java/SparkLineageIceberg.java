// Apache Iceberg's own account of what each SQL execution read and committed, for the snapshot
// facets. Iceberg fires a ScanEvent when a scan plans its files (the snapshot it reads) and a
// CreateSnapshotEvent when a write commits a snapshot, both on the thread running the execution;
// the recorder keeps them by the execution's QueryExecution key
// (SparkLineageMicroBatchTags.queryExecutionKey), and SparkLineageActions takes those of the
// action it describes: take() returns them as a JSON array of
//   {"event": "scan" | "commit", "table": Iceberg's name of the table, "snapshot": its id,
//    "parent": its parent snapshot's id, "partitions": [...]}
// where a commit to the action's own write target carries its parent snapshot (the table's state
// the commit was made on, Snapshot.parentId(); absent for a table's first snapshot) and the
// partitions the snapshot added or removed data files in ({partition field: value as Iceberg
// prints it, null for a null value}).
// partitionsOfTasks() gives the partitions an Iceberg scan read (its planned tasks), for
// SparkLineageScannedPartitions. Iceberg's classes are reached by reflection only: they are on the
// classpath only where the user put Iceberg's runtime, and a helper that does not compile would
// leave every helper of the compilation unit out. Iceberg's listener registry has no removal: the
// recorder is registered once per JVM (install) and stays; records no action takes (reads, when
// reads are not emitted) are dropped past the REMEMBERED_EXECUTIONS most recent executions.
public class SparkLineageIceberg implements java.lang.reflect.InvocationHandler {
  static final int REMEMBERED_EXECUTIONS = 1024;
  static final String EXECUTION_ID = "spark.sql.execution.id";
  static final String[] EVENTS = { "org.apache.iceberg.events.ScanEvent", "org.apache.iceberg.events.CreateSnapshotEvent" };
  static final java.util.concurrent.ConcurrentHashMap records = new java.util.concurrent.ConcurrentHashMap();
  static final java.util.concurrent.ConcurrentLinkedQueue order = new java.util.concurrent.ConcurrentLinkedQueue();
  static boolean installed = false;

  // Registers the recorder with Iceberg's listeners (once per JVM); false without Iceberg.
  public boolean install() {
    synchronized (SparkLineageIceberg.class) {
      if (installed) return true;
      try {
        Class listener = icebergClass("org.apache.iceberg.events.Listener");
        Object proxy = java.lang.reflect.Proxy.newProxyInstance(listener.getClassLoader(), new Class[] { listener }, new SparkLineageIceberg());
        java.lang.reflect.Method register = icebergClass("org.apache.iceberg.events.Listeners").getMethod("register", new Class[] { listener, Class.class });
        for (int i = 0; i < EVENTS.length; i++) register.invoke(null, new Object[] { proxy, icebergClass(EVENTS[i]) });
        installed = true;
      } catch (Throwable noIceberg) {
        return false;
      }
      return true;
    }
  }

  public Object invoke(Object proxy, java.lang.reflect.Method method, Object[] args) {
    String name = method.getName();
    if (name.equals("notify") && args != null && args.length == 1) {
      try { record(args[0]); } catch (Throwable unrecorded) { }  // never disturb Iceberg's commit or scan
      return null;
    }
    if (name.equals("hashCode")) return Integer.valueOf(System.identityHashCode(proxy));
    if (name.equals("equals")) return Boolean.valueOf(args != null && args.length == 1 && proxy == args[0]);
    if (name.equals("toString")) return "OpenLineage Iceberg event recorder";
    return null;
  }

  static void record(Object event) throws Exception {
    String key = currentExecutionKey();
    if (key == null) return;
    boolean scan = event.getClass().getSimpleName().equals("ScanEvent");
    String[] entry = { scan ? "scan" : "commit", String.valueOf(call(event, "tableName")), String.valueOf(call(event, "snapshotId")) };
    java.util.List entries = (java.util.List) records.get(key);
    if (entries == null) {
      java.util.List fresh = java.util.Collections.synchronizedList(new java.util.ArrayList());
      entries = (java.util.List) records.putIfAbsent(key, fresh);
      if (entries == null) {
        entries = fresh;
        order.add(key);
        while (order.size() > REMEMBERED_EXECUTIONS) {
          Object oldest = order.poll();
          if (oldest != null) records.remove(oldest);
        }
      }
    }
    entries.add(entry);
  }

  // The key of the QueryExecution running on this thread (Spark's execution id is a local
  // property of the thread, copied to the threads it hands work to); null outside an execution.
  static String currentExecutionKey() throws Exception {
    Object module = Class.forName("org.apache.spark.SparkContext$").getField("MODULE$").get(null);
    Object context = SparkLineageRelations.option(call(module, "getActive"));
    if (context == null) return null;
    String id = ((org.apache.spark.SparkContext) context).getLocalProperty(EXECUTION_ID);
    if (id == null) return null;
    Object queryExecution = org.apache.spark.sql.execution.SQLExecution.getQueryExecution(Long.parseLong(id));
    return queryExecution == null ? null : SparkLineageMicroBatchTags.queryExecutionKey(queryExecution);
  }

  // What Iceberg recorded for this QueryExecution (removed from the recorder), as a JSON array;
  // `root` is the action's optimized plan, whose V2 write target's commits get their partitions.
  public static String take(Object queryExecution, Object root) {
    StringBuilder b = new StringBuilder("[");
    String key = SparkLineageMicroBatchTags.queryExecutionKey(queryExecution);
    java.util.List entries = key == null ? null : (java.util.List) records.remove(key);
    if (entries == null) return b.append(']').toString();
    Object target = writeTarget(root);
    Object[] all = entries.toArray();
    for (int i = 0; i < all.length; i++) {
      String[] entry = (String[]) all[i];
      if (i > 0) b.append(',');
      b.append("{\"event\":");
      SparkLineageResult.jsonString(b, entry[0]);
      b.append(",\"table\":");
      SparkLineageResult.jsonString(b, entry[1]);
      b.append(",\"snapshot\":");
      SparkLineageResult.jsonString(b, entry[2]);
      if (entry[0].equals("commit") && target != null) {
        int mark = b.length();
        try {
          if (String.valueOf(call(target, "name")).equals(entry[1])) committedPartitions(b, target, Long.parseLong(entry[2]));
        } catch (Throwable unread) {
          b.setLength(mark);
        }
      }
      b.append('}');
    }
    return b.append(']').toString();
  }

  // The Iceberg table a V2 write command writes (its relation's SparkTable's table(); a row-level
  // command's through its RowLevelOperationTable), else null.
  static Object writeTarget(Object root) {
    try {
      Object table = SparkLineageRelations.operationTable(call(call(root, "table"), "table"));
      return table.getClass().getName().startsWith("org.apache.iceberg.") ? call(table, "table") : null;
    } catch (Throwable noTarget) {
      return null;
    }
  }

  // ,"parent": snapshot `id`'s parent, when it has one; ,"partitions":[...]: the partitions it added
  // or removed data files in, or delete files (a merge-on-read MERGE, UPDATE or DELETE) (none for
  // an unpartitioned table)
  static void committedPartitions(StringBuilder b, Object table, long id) throws Exception {
    Object snapshot = icebergClass("org.apache.iceberg.Table").getMethod("snapshot", new Class[] { Long.TYPE }).invoke(table, new Object[] { Long.valueOf(id) });
    if (snapshot == null) return;
    Object parent = call(snapshot, "parentId");
    if (parent != null) { b.append(",\"parent\":"); SparkLineageResult.jsonString(b, parent.toString()); }
    Object io = call(table, "io");
    java.util.Map specs = (java.util.Map) call(table, "specs");
    Class snapshotClass = icebergClass("org.apache.iceberg.Snapshot");
    Class fileIo = icebergClass("org.apache.iceberg.io.FileIO");
    java.util.Set partitions = new java.util.LinkedHashSet();
    String[] changes = { "addedDataFiles", "removedDataFiles", "addedDeleteFiles", "removedDeleteFiles" };
    for (int c = 0; c < changes.length; c++) {
      Iterable files = (Iterable) snapshotClass.getMethod(changes[c], new Class[] { fileIo }).invoke(snapshot, new Object[] { io });
      java.util.Iterator each = files.iterator();
      while (each.hasNext()) {
        Object file = each.next();
        Object spec = specs.get(call(file, "specId"));
        String partition = spec == null ? null : partition(spec, call(file, "partition"));
        if (partition != null) partitions.add(partition);
      }
    }
    appendPartitions(b, partitions);
  }

  // The partitions of an Iceberg scan's planned tasks (a Spark InputPartition of Iceberg's holds a
  // group of them): each distinct partition's JSON object, null when the scan is no Iceberg scan.
  public static java.util.Set partitionsOfTasks(scala.collection.Seq inputPartitions) throws Exception {
    java.util.Set partitions = new java.util.LinkedHashSet();
    scala.collection.Iterator each = inputPartitions.iterator();
    while (each.hasNext()) {
      Object inputPartition = each.next();
      if (!inputPartition.getClass().getName().startsWith("org.apache.iceberg.")) return null;
      java.util.Iterator tasks = ((java.util.Collection) call(call(inputPartition, "taskGroup"), "tasks")).iterator();
      while (tasks.hasNext()) {
        Object task = tasks.next();
        Class partitionTask = icebergClass("org.apache.iceberg.PartitionScanTask");
        if (!partitionTask.isInstance(task)) continue;
        String partition = partition(partitionTask.getMethod("spec", new Class[0]).invoke(task, new Object[0]),
            partitionTask.getMethod("partition", new Class[0]).invoke(task, new Object[0]));
        if (partition != null) partitions.add(partition);
      }
    }
    return partitions;
  }

  static void appendPartitions(StringBuilder b, java.util.Set partitions) {
    b.append(",\"partitions\":[");
    java.util.Iterator each = partitions.iterator();
    boolean first = true;
    while (each.hasNext()) {
      if (!first) b.append(',');
      first = false;
      b.append((String) each.next());
    }
    b.append(']');
  }

  // One partition as a JSON object: each partition field's name and its value as Iceberg prints it
  // in data file paths (Transform.toHumanString: a day as 2024-01-02, a bucket as its number);
  // null for a spec without fields (an unpartitioned table)
  static String partition(Object spec, Object values) throws Exception {
    java.util.List fields = (java.util.List) call(spec, "fields");
    if (fields.isEmpty()) return null;
    Object schema = call(spec, "schema");
    Class type = icebergClass("org.apache.iceberg.types.Type");
    java.lang.reflect.Method findType = icebergClass("org.apache.iceberg.Schema").getMethod("findType", new Class[] { Integer.TYPE });
    java.lang.reflect.Method get = icebergClass("org.apache.iceberg.StructLike").getMethod("get", new Class[] { Integer.TYPE, Class.class });
    java.lang.reflect.Method human = icebergClass("org.apache.iceberg.transforms.Transform").getMethod("toHumanString", new Class[] { type, Object.class });
    StringBuilder b = new StringBuilder("{");
    for (int i = 0; i < fields.size(); i++) {
      Object field = fields.get(i);
      if (i > 0) b.append(',');
      SparkLineageResult.jsonString(b, String.valueOf(call(field, "name")));
      b.append(':');
      Object value = get.invoke(values, new Object[] { Integer.valueOf(i), Object.class });
      if (value == null) {
        b.append("null");
      } else {
        Object sourceType = findType.invoke(schema, new Object[] { call(field, "sourceId") });
        SparkLineageResult.jsonString(b, String.valueOf(human.invoke(call(field, "transform"), new Object[] { sourceType, value })));
      }
    }
    return b.append('}').toString();
  }

  static Class icebergClass(String name) throws Exception {
    return Class.forName(name, true, SparkLineageIceberg.class.getClassLoader());
  }

  static Object call(Object target, String method) throws Exception {
    return SparkLineageRelations.call(target, method);
  }
}
