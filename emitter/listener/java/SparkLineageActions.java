// Everything the batch listener copies out of one QueryExecutionListener callback, in ONE round
// trip (each py4j call is a round trip between two processes, several times dearer when the
// machine is busy): describe(queryExecution, dumper) returns a JSON header line
//   {"root": the optimized plan's class, "id": the QueryExecution's id,
//    "tags": SparkLineageMicroBatchTags.tagsOf (absent without a tagger),
//    "tableEvents": SparkLineageIceberg.take, what Iceberg recorded of the action's scans and
//      commits (absent when Iceberg is not on the classpath),
//    "write": SparkLineageWrites' description, or null when the action writes nothing}
// and, when the listener will need them, SparkLineagePlanDumper's description of the plan on the
// lines after it (its leaves, its JSON, the plans cached DataFrames hold): for a write that is
// not a wrapper command (setWrappers; a wrapper's nested write already carries them, and the
// listener asks for a wrapper's plan itself when it has no nested write to merge it into), and
// for an action that writes nothing when reads are emitted (setEmitReads).
//
// A DELETE a V2 table (Iceberg) runs on metadata alone is described from its analyzed plan: the
// optimizer replaced the row-level rewrite (ReplaceData, WriteDelta) by DeleteFromTableWithFilters,
// which holds the table outside its children and the WHERE as connector predicates that do not
// serialize; the rewrite holds both as any row-level command does (its write, its plan).
public class SparkLineageActions {
  static final String METADATA_ONLY_DELETE = "DeleteFromTableWithFilters";
  static final String[] ROW_LEVEL_WRITES = { "ReplaceData", "WriteDelta" };

  SparkLineageWrites writes;
  Object tagger;  // a SparkLineageMicroBatchTags, or null
  java.util.Set wrappers = new java.util.HashSet();
  boolean emitReads = false;
  boolean tableEvents = false;

  public void setHelpers(Object writes, Object tagger) {
    this.writes = (SparkLineageWrites) writes;
    this.tagger = tagger;
  }

  // the wrapper commands' class names, comma separated (emitter.dedupe.WRAPPER_COMMANDS)
  public void setWrappers(String commands) {
    wrappers = new java.util.HashSet(java.util.Arrays.asList(commands.split(",")));
  }

  public void setEmitReads(boolean emitReads) { this.emitReads = emitReads; }

  // whether SparkLineageIceberg records the table events of actions (it is installed)
  public void setTableEvents(boolean tableEvents) { this.tableEvents = tableEvents; }

  // the analyzed row-level rewrite of a metadata-only DELETE, else `optimized`
  static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan rowLevelRewrite(Object queryExecution,
      org.apache.spark.sql.catalyst.plans.logical.LogicalPlan optimized) {
    try {
      Object analyzed = SparkLineageRelations.call(queryExecution, "analyzed");
      if (SparkLineageWrites.among(analyzed.getClass().getSimpleName(), ROW_LEVEL_WRITES)) {
        return (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) analyzed;
      }
    } catch (Exception unreadable) {
      // described as it is: a command the emitter does not know writes nothing
    }
    return optimized;
  }

  public String describe(Object queryExecution, Object dumper) throws Exception {
    return describe(queryExecution, dumper, false);
  }

  // describe(), or null when the action writes nothing and reads are not emitted: the listener
  // captures nothing of such an action (SparkLineageListenerRegistration does not call it)
  public String describeCaptured(Object queryExecution, Object dumper) throws Exception {
    return describe(queryExecution, dumper, true);
  }

  String describe(Object queryExecution, Object dumper, boolean capturedOnly) throws Exception {
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan =
        (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) SparkLineageRelations.call(queryExecution, "optimizedPlan");
    String root = plan.getClass().getSimpleName();
    if (root.equals(METADATA_ONLY_DELETE)) plan = rowLevelRewrite(queryExecution, plan);
    StringBuilder b = new StringBuilder("{\"root\":");
    SparkLineageResult.jsonString(b, root);
    b.append(",\"id\":").append(SparkLineageRelations.call(queryExecution, "id"));
    if (tagger != null) {
      String tags = "";
      try { tags = ((SparkLineageMicroBatchTags) tagger).tagsOf(queryExecution); } catch (Exception untagged) { }
      b.append(",\"tags\":");
      SparkLineageResult.jsonString(b, tags);
    }
    String write = writes.describe(queryExecution, plan);
    if (write == null && capturedOnly && !emitReads) return null;
    if (tableEvents) b.append(",\"tableEvents\":").append(SparkLineageIceberg.take(queryExecution, plan));
    b.append(",\"write\":").append(write == null ? "null" : write).append('}');
    boolean withPlan = write == null ? emitReads : !wrappers.contains(root);
    if (withPlan) b.append('\n').append(((SparkLineagePlanDumper) dumper).describeText(plan));
    return SparkLineageResult.of(b.toString());
  }
}
