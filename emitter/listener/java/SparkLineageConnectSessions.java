// Tells the emitter of each Spark Connect session of this server, on the listener bus: when the
// session's first operation starts (the client has applied its builder's settings to the session
// by then) and when the session closes. The first operation's event is posted before any action
// of it runs, and the session's QueryExecutionListener bus sits on the same listener-bus queue
// after this listener: the emitter attaches while this callback runs, so the session's first
// action already finds its listeners. Only these go through to Python (`accept` of a
// java.util.function.Consumer the emitter implements): "started" or "closed", the user id and
// the session id, separated by NUL. The events are read by reflection: Spark Connect's classes
// are not on every classpath the helpers are compiled against (a classic session, Spark 3.5).
public class SparkLineageConnectSessions extends org.apache.spark.scheduler.SparkListener {
  static final String OPERATION_STARTED = "org.apache.spark.sql.connect.service.SparkListenerConnectOperationStarted";
  static final String SESSION_CLOSED = "org.apache.spark.sql.connect.service.SparkListenerConnectSessionClosed";
  private final java.util.Set announced = java.util.concurrent.ConcurrentHashMap.newKeySet();
  private volatile java.util.function.Consumer sink;

  public void setSink(java.util.function.Consumer sink) {
    this.sink = sink;
  }

  public void onOtherEvent(org.apache.spark.scheduler.SparkListenerEvent event) {
    java.util.function.Consumer target = sink;
    if (target == null) return;
    String name = event.getClass().getName();
    boolean started = OPERATION_STARTED.equals(name);
    if (!started && !SESSION_CLOSED.equals(name)) return;
    try {
      Object userId = event.getClass().getMethod("userId", new Class[0]).invoke(event, new Object[0]);
      Object sessionId = event.getClass().getMethod("sessionId", new Class[0]).invoke(event, new Object[0]);
      String session = userId + SparkLineageMicroBatchTags.SEPARATOR + sessionId;
      if (started ? !announced.add(session) : !announced.remove(session)) return;
      target.accept((started ? "started" : "closed") + SparkLineageMicroBatchTags.SEPARATOR + session);
    } catch (Exception error) {
      // a session the emitter does not hear of emits nothing; the server goes on
    }
  }
}
