// The offset ranges a batch read of Kafka topics (`spark.read.format("kafka")`) consumed, from the
// executed plan, as one JSON array: [{"key": leaf key, "ranges": [{"topic", "partition", "from",
// "until"}]}]. Spark resolves the read's starting and ending offsets (`earliest`, `latest`, JSON)
// when it plans the scan: the scan's RDD (the connector's KafkaSourceRDD) holds each partition's
// range, `until` exclusive as Kafka's end offsets are (below the RDD that maps its records to rows). The connector's classes are reached by
// reflection only: without its jar nothing is listed. The key is that of the optimized plan's
// LogicalRelation the scan was planned from (SparkLineageScannedPartitions.key).
public class SparkLineageKafkaReads {
  static final String KAFKA_RELATION = "org.apache.spark.sql.kafka010.KafkaRelation";
  static final String KAFKA_SOURCE_RDD = "org.apache.spark.sql.kafka010.KafkaSourceRDD";
  static final int MAX_RDD_DEPTH = 8;

  public String of(org.apache.spark.sql.execution.QueryExecution queryExecution) throws Exception {
    java.util.List scans = new java.util.ArrayList();
    SparkLineageScannedPartitions.collect(
        queryExecution.executedPlan(), SparkLineageScannedPartitions.KAFKA_SCANS, scans, new java.util.IdentityHashMap());
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < scans.size(); i++) {
      int mark = b.length();
      try {
        scan(b, (org.apache.spark.sql.execution.RowDataSourceScanExec) scans.get(i));
      } catch (Throwable unreadable) {
        b.setLength(mark);
      }
    }
    return SparkLineageResult.of(b.append(']').toString());
  }

  static boolean isKafkaScan(Object node) {
    return node instanceof org.apache.spark.sql.execution.RowDataSourceScanExec
        && ((org.apache.spark.sql.execution.RowDataSourceScanExec) node).relation().getClass().getName().equals(KAFKA_RELATION);
  }

  // The connector's KafkaSourceRDD under the scan's RDD (the records mapped to rows above it)
  static Object kafkaRdd(org.apache.spark.rdd.RDD rdd) {
    for (int depth = 0; rdd != null && depth < MAX_RDD_DEPTH; depth++) {
      if (rdd.getClass().getName().equals(KAFKA_SOURCE_RDD)) return rdd;
      scala.collection.Seq parents = rdd.dependencies();
      rdd = parents.size() == 1 ? ((org.apache.spark.Dependency) parents.head()).rdd() : null;
    }
    return null;
  }

  static void scan(StringBuilder b, org.apache.spark.sql.execution.RowDataSourceScanExec scan) throws Exception {
    Object key = SparkLineageScannedPartitions.key(scan);
    if (key == null) return;
    Object source = kafkaRdd(scan.rdd());
    if (source == null) return;
    java.lang.reflect.Field field = source.getClass().getDeclaredField("offsetRanges");
    field.setAccessible(true);
    scala.collection.Iterator ranges = ((scala.collection.Iterable) field.get(source)).iterator();
    StringBuilder entry = new StringBuilder();
    while (ranges.hasNext()) {
      Object range = ranges.next();
      Object partition = SparkLineageScannedPartitions.invoke(range, "topicPartition");  // Kafka's TopicPartition
      if (entry.length() > 0) entry.append(',');
      entry.append("{\"topic\":");
      SparkLineageResult.jsonString(entry, String.valueOf(SparkLineageScannedPartitions.invoke(partition, "topic")));
      entry.append(",\"partition\":").append(SparkLineageScannedPartitions.invoke(partition, "partition"));
      entry.append(",\"from\":").append(SparkLineageScannedPartitions.invoke(range, "fromOffset"));
      entry.append(",\"until\":").append(SparkLineageScannedPartitions.invoke(range, "untilOffset")).append('}');
    }
    if (b.length() > 1) b.append(',');
    b.append("{\"key\":").append(key).append(",\"ranges\":[").append(entry).append("]}");
  }
}
