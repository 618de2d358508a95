// Remembers, per SQL execution, what the batch QueryExecutionListener cannot see from the
// listener bus thread: the streaming micro-batch it ran in (Spark's job description of a
// micro-batch reads "...id = {query}\nrunId = {run}\nbatch = {n}") and the command it ran
// inside (a CTAS or saveAsTable runs its data write as a nested execution).
// On Spark Connect a foreachBatch function runs in a Python worker that sends its writes back
// to the server: they run on threads of their own, without the micro-batch's description, but
// in the streaming query's own session, whose tag ("spark-session-" + its UUID, Spark 4) every
// execution of it carries; such a write is tagged with the micro-batch running in its session.
// Executions are keyed like QueryExecutions: by queryId on Spark 4 (carried by the start
// event), else "qe-" + QueryExecution.id, looked up while the execution is still registered
// (the start event is handled long before a data write ends; an execution already gone is
// simply not tagged).
public class SparkLineageMicroBatchTags extends org.apache.spark.scheduler.SparkListener {
  static final int REMEMBERED_EXECUTIONS = 4096;
  private final java.util.concurrent.ConcurrentHashMap descriptions = new java.util.concurrent.ConcurrentHashMap();
  private final java.util.concurrent.ConcurrentHashMap wrappers = new java.util.concurrent.ConcurrentHashMap();
  private final java.util.concurrent.ConcurrentHashMap commands = new java.util.concurrent.ConcurrentHashMap();
  private final java.util.concurrent.ConcurrentLinkedQueue order = new java.util.concurrent.ConcurrentLinkedQueue();
  private final java.util.concurrent.ConcurrentLinkedQueue commandOrder = new java.util.concurrent.ConcurrentLinkedQueue();
  static final String SESSION_TAG = "spark-session-";
  static final String ROOT_TAG = "-execution-root-id-";
  private final java.util.concurrent.ConcurrentHashMap runningBatches = new java.util.concurrent.ConcurrentHashMap();
  private final java.util.concurrent.ConcurrentHashMap batchSessions = new java.util.concurrent.ConcurrentHashMap();

  public void onOtherEvent(org.apache.spark.scheduler.SparkListenerEvent event) {
    if (event instanceof org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd) {
      Object session = batchSessions.remove(new Long(((org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd) event).executionId()));
      if (session != null) runningBatches.remove(session);
      return;
    }
    if (!(event instanceof org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart)) return;
    org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart start =
        (org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart) event;
    Long executionId = new Long(start.executionId());
    String node = start.sparkPlanInfo() == null ? "" : start.sparkPlanInfo().nodeName();
    remember(commands, commandOrder, executionId, node == null ? "" : node);
    String wrapper = null;
    scala.Option root = start.rootExecutionId();
    if (root != null && root.isDefined() && !executionId.equals(root.get())) {
      wrapper = (String) commands.get(root.get());
    }
    String description = start.description();
    boolean microBatch = description != null && description.indexOf("runId = ") >= 0;
    String session = sessionTagOf(start);
    if (session != null) {
      if (microBatch) {
        runningBatches.put(session, description);
        batchSessions.put(executionId, session);
      } else if (runningBatches.containsKey(session)) {  // a foreachBatch write sent back by a Connect worker
        description = (String) runningBatches.get(session);
        microBatch = description != null;
      }
    }
    if (!microBatch && wrapper == null) return;
    String key = keyOf(start);
    if (key == null) return;
    if (microBatch) remember(descriptions, order, key, description);
    if (wrapper != null) remember(wrappers, order, key, wrapper);
  }

  private static void remember(java.util.Map map, java.util.Queue keys, Object key, Object value) {
    if (map.put(key, value) == null) {
      keys.add(key);
      while (keys.size() > REMEMBERED_EXECUTIONS) {
        Object oldest = keys.poll();
        if (oldest != null) map.remove(oldest);
      }
    }
  }

  // by reflection: the event has no job tags before Spark 4
  static String sessionTagOf(Object start) {
    try {
      Object tags = start.getClass().getMethod("jobTags", new Class[0]).invoke(start, new Object[0]);
      scala.collection.Iterator each = ((scala.collection.Iterable) tags).iterator();
      while (each.hasNext()) {
        String tag = String.valueOf(each.next());
        if (tag.startsWith(SESSION_TAG) && tag.indexOf(ROOT_TAG) < 0) return tag;
      }
    } catch (Exception missing) {
      // Spark 3.5: no session tags (and no Connect server)
    }
    return null;
  }

  // by reflection: the event has no queryId before Spark 4, and one helper that does not
  // compile would leave every helper of the compilation unit out
  static String keyOf(Object start) {
    try {
      scala.Option queryId = (scala.Option) start.getClass().getMethod("queryId", new Class[0]).invoke(start, new Object[0]);
      if (queryId != null && queryId.isDefined()) return queryId.get().toString();
    } catch (Exception missing) {
      // Spark 3.5: by the QueryExecution of the running execution
    }
    long executionId = ((org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart) start).executionId();
    Object queryExecution = org.apache.spark.sql.execution.SQLExecution.getQueryExecution(executionId);
    return queryExecution == null ? null : queryExecutionKey(queryExecution);
  }

  /** The key of a QueryExecution: its queryId where it has one (Spark 4), else its id. */
  public static String queryExecutionKey(Object queryExecution) {
    try {
      return queryExecution.getClass().getMethod("queryId", new Class[0]).invoke(queryExecution, new Object[0]).toString();
    } catch (Exception missing) {
      try {
        return "qe-" + queryExecution.getClass().getMethod("id", new Class[0]).invoke(queryExecution, new Object[0]);
      } catch (Exception none) {
        return null;
      }
    }
  }

  static final String SEPARATOR = String.valueOf((char) 0);

  /** What a QueryExecution ran in, in one call: the plan node name of the command it ran nested
   * in ("Execute CreateDataSourceTableAsSelectCommand"), a NUL character, and the description of
   * the micro-batch it ran under; each part empty when there is none. */
  public String tagsOf(Object queryExecution) {
    String key = queryExecutionKey(queryExecution);
    String wrapper = key == null ? null : (String) wrappers.get(key);
    String description = key == null ? null : (String) descriptions.get(key);
    return (wrapper == null ? "" : wrapper) + SEPARATOR + (description == null ? "" : description);
  }
}
