// The one protocol for results of the lineage helpers: py4j stalls (~44 ms) on strings of 8 KB
// or more, so a longer result is written to a temp file and "@" + its path is returned instead;
// the Python side reads and deletes the file (emitter.listener.janino.read_result).
public class SparkLineageResult {
  // characters, not bytes: a UTF-8 encoded result stays under 8 KB even with 2-byte characters
  static final int INLINE_LIMIT = 3000;

  public static String of(String text) throws Exception {
    if (text == null || text.length() < INLINE_LIMIT) return text;
    java.io.File shm = new java.io.File("/dev/shm");
    java.io.File directory = shm.isDirectory() && shm.canWrite() ? shm : null;
    java.io.File file = java.io.File.createTempFile("spark-lineage-", ".txt", directory);
    java.nio.file.Files.write(file.toPath(), text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    return "@" + file.getAbsolutePath();
  }

  static void jsonString(StringBuilder b, String s) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') { b.append('\\').append(c); }
      else if (c < 0x20) { b.append(String.format("\\u%04x", new Object[] { Integer.valueOf((int) c) })); }
      else { b.append(c); }
    }
    b.append('"');
  }
}
