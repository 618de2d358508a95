// The batch listener as Spark's listener manager holds it: a JVM object that passes each callback
// on to the listener in Python, registered and removed again by this object. py4j hands the JVM a
// new proxy each time a Python object crosses, and the manager removes a listener by identity:
// `unregister` with the Python object finds no match. Comparing to a proxy would also call Python
// for `equals`, which a Python listener does not answer. This object is the one Spark holds.
//
// The batch listener's registration (registerDescribed) also describes each action here, before
// Python is called (SparkLineageActions.describeCaptured), and hands the description over with the
// callback itself, so a callback is one crossing between the processes instead of two: the listener
// gets funcName + NUL + the nanoseconds the description took + NUL + the description (a
// SparkLineageResult). An action the listener would capture nothing of (it writes nothing and reads
// are not emitted) does not call Python at all. When describing fails, the listener gets the plain
// funcName and describes the action itself (and reports what failed).
public class SparkLineageListenerRegistration implements org.apache.spark.sql.util.QueryExecutionListener {
  private org.apache.spark.sql.util.ExecutionListenerManager manager;
  private org.apache.spark.sql.util.QueryExecutionListener delegate;
  static final char SEPARATOR = (char) 0;
  private SparkLineageActions actions;  // null: the delegate describes its actions itself
  private Object dumper;  // the SparkLineagePlanDumper the descriptions' plans are written by

  public void register(
      org.apache.spark.sql.util.ExecutionListenerManager manager,
      org.apache.spark.sql.util.QueryExecutionListener delegate) {
    this.manager = manager;
    this.delegate = delegate;
    manager.register(this);
  }

  public void registerDescribed(
      org.apache.spark.sql.util.ExecutionListenerManager manager,
      org.apache.spark.sql.util.QueryExecutionListener delegate,
      Object actions,
      Object dumper) {
    this.actions = (SparkLineageActions) actions;
    this.dumper = dumper;
    register(manager, delegate);
  }

  public void unregister() {
    if (manager != null) manager.unregister(this);
    manager = null;
  }

  public void onSuccess(String funcName, org.apache.spark.sql.execution.QueryExecution qe, long durationNs) {
    String call = described(funcName, qe);
    if (call != null) delegate.onSuccess(call, qe, durationNs);
  }

  public void onFailure(String funcName, org.apache.spark.sql.execution.QueryExecution qe, Exception exception) {
    String call = described(funcName, qe);
    if (call != null) delegate.onFailure(call, qe, exception);
  }

  // what the delegate is called with (see above); null when it is not to be called
  String described(String funcName, org.apache.spark.sql.execution.QueryExecution qe) {
    if (actions == null) return funcName;
    long started = System.nanoTime();
    String description;
    try {
      description = actions.describeCaptured(qe, dumper);
    } catch (Throwable error) {
      return funcName;
    }
    if (description == null) return null;
    return funcName + SEPARATOR + (System.nanoTime() - started) + SEPARATOR + description;
  }

  public String toString() {
    return delegate == null ? "SparkLineageListenerRegistration" : delegate.toString();
  }
}
