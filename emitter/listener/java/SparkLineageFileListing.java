// Listings for snapshot ids, as "path\tsize\tmtime-ms\n" lines: the files a Spark file index
// already listed for a read, and the data files under a location after a write.
public class SparkLineageFileListing {
  static void line(StringBuilder out, org.apache.hadoop.fs.FileStatus status) {
    out.append(status.getPath().toString()).append('\t')
       .append(status.getLen()).append('\t')
       .append(status.getModificationTime()).append('\n');
  }

  /** Appends the files a file index holds; false for an index kind we do not know. */
  static boolean appendIndexFiles(Object index, StringBuilder out) {
    Object listable = index;
    if (index instanceof org.apache.spark.sql.execution.datasources.CatalogFileIndex) {
      listable = ((org.apache.spark.sql.execution.datasources.CatalogFileIndex) index)
          .filterPartitions(scala.collection.immutable.Nil$.MODULE$);
    }
    if (!(listable instanceof org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex)) return false;
    scala.collection.Iterator files =
        ((org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex) listable).allFiles().iterator();
    while (files.hasNext()) line(out, (org.apache.hadoop.fs.FileStatus) files.next());
    return true;
  }

  /** The files a file index holds; null when the index is of a kind we do not know. */
  public String indexFiles(Object index) throws Exception {
    StringBuilder out = new StringBuilder();
    return appendIndexFiles(index, out) ? SparkLineageResult.of(out.toString()) : null;
  }

  static boolean hidden(String name) {
    return name.startsWith(".") || name.endsWith("._COPYING_") || (name.startsWith("_") && name.indexOf('=') < 0);
  }

  /** Lists at most `budget` files; returns what is left of it (negative: stopped early). */
  static long walk(org.apache.hadoop.fs.FileSystem fs, org.apache.hadoop.fs.Path directory, StringBuilder out, long budget)
      throws Exception {
    org.apache.hadoop.fs.FileStatus[] statuses = fs.listStatus(directory);
    for (int i = 0; i < statuses.length && budget >= 0; i++) {
      org.apache.hadoop.fs.FileStatus status = statuses[i];
      if (hidden(status.getPath().getName())) continue;
      if (status.isDirectory()) budget = walk(fs, status.getPath(), out, budget);
      else if (--budget >= 0) line(out, status);
    }
    return budget;
  }

  /** Every data file under root, not descending into hidden directories (listStatus per
   *  directory: listFiles(recursive) asks for block locations of every file, 50x slower);
   *  "!" past maxFiles. */
  public String tree(String root, org.apache.hadoop.conf.Configuration conf, int maxFiles) throws Exception {
    org.apache.hadoop.fs.Path path = new org.apache.hadoop.fs.Path(root);
    org.apache.hadoop.fs.FileSystem fs = path.getFileSystem(conf);
    StringBuilder out = new StringBuilder();
    if (!fs.exists(path)) return "";
    if (walk(fs, path, out, maxFiles) < 0) return "!";
    return SparkLineageResult.of(out.toString());
  }
}
