// The batch listener as Spark's listener manager holds it: a JVM object that passes each callback
// on to the listener in Python, registered and removed again by this object. py4j hands the JVM a
// new proxy each time a Python object crosses, and the manager removes a listener by identity:
// `unregister` with the Python object finds no match. Comparing to a proxy would also call Python
// for `equals`, which a Python listener does not answer. This object is the one Spark holds.
public class SparkLineageListenerRegistration implements org.apache.spark.sql.util.QueryExecutionListener {
  private org.apache.spark.sql.util.ExecutionListenerManager manager;
  private org.apache.spark.sql.util.QueryExecutionListener delegate;

  public void register(
      org.apache.spark.sql.util.ExecutionListenerManager manager,
      org.apache.spark.sql.util.QueryExecutionListener delegate) {
    this.manager = manager;
    this.delegate = delegate;
    manager.register(this);
  }

  public void unregister() {
    if (manager != null) manager.unregister(this);
    manager = null;
  }

  public void onSuccess(String funcName, org.apache.spark.sql.execution.QueryExecution qe, long durationNs) {
    delegate.onSuccess(funcName, qe, durationNs);
  }

  public void onFailure(String funcName, org.apache.spark.sql.execution.QueryExecution qe, Exception exception) {
    delegate.onFailure(funcName, qe, exception);
  }

  public String toString() {
    return delegate == null ? "SparkLineageListenerRegistration" : delegate.toString();
  }
}
