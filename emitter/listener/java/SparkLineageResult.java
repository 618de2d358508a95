// The one protocol for results of the lineage helpers: py4j stalls (~44 ms) on strings of 8 KB
// or more, so a longer result is written to a temp file and "@" + its path is returned instead;
// the Python side reads and deletes the file (emitter.listener.janino.read_result).
public class SparkLineageResult {
  // characters, not bytes: a UTF-8 encoded result stays under 8 KB even with 2-byte characters
  static final int INLINE_LIMIT = 3000;

  public static String of(String text) throws Exception {
    if (text == null || text.length() < INLINE_LIMIT) return text;
    java.io.File shm = new java.io.File("/dev/shm");
    java.io.File directory = shm.isDirectory() && shm.canWrite() ? shm : new java.io.File(System.getProperty("java.io.tmpdir"));
    java.nio.file.Path file = privateTempFile(directory.toPath());
    java.nio.file.Files.write(file, text.getBytes(java.nio.charset.StandardCharsets.UTF_8), new java.nio.file.OpenOption[0]);
    return "@" + file.toAbsolutePath().toString();
  }

  // Created readable by its owner only (0600): a plan may hold literal values from the queries.
  static java.nio.file.Path privateTempFile(java.nio.file.Path directory) throws Exception {
    try {
      java.nio.file.attribute.FileAttribute[] ownerOnly = new java.nio.file.attribute.FileAttribute[] {
        java.nio.file.attribute.PosixFilePermissions.asFileAttribute(java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"))
      };
      return java.nio.file.Files.createTempFile(directory, "spark-lineage-", ".txt", ownerOnly);
    } catch (UnsupportedOperationException notPosix) {
      java.io.File file = java.io.File.createTempFile("spark-lineage-", ".txt", directory.toFile());
      file.setReadable(false, false);
      file.setReadable(true, true);
      return file.toPath();
    }
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
