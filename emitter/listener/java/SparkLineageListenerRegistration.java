// Registers a QueryExecutionListener that lives in Python and can remove it again. py4j hands
// the JVM a new proxy object each time a Python object crosses, and the listener manager removes
// a listener by identity: unregistering with the Python object would find no match and leave it
// called for the rest of the session. This keeps the one proxy registered, to remove that one.
public class SparkLineageListenerRegistration {
  private org.apache.spark.sql.util.ExecutionListenerManager manager;
  private org.apache.spark.sql.util.QueryExecutionListener listener;

  public void register(
      org.apache.spark.sql.util.ExecutionListenerManager manager,
      org.apache.spark.sql.util.QueryExecutionListener listener) {
    manager.register(listener);
    this.manager = manager;
    this.listener = listener;
  }

  public void unregister() {
    if (manager == null) return;
    manager.unregister(listener);
    manager = null;
    listener = null;
  }
}
