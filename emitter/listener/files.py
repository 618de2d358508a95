"""Listings for snapshot ids, read out of the JVM / filesystem (the only I/O behind `emitter.snapshots`).

Inputs reuse Spark's own file index (what the read plans to scan, already listed by Spark);
outputs are listed after the write: `file:` locations with `os.scandir`, other schemes with
Hadoop's `FileSystem.listFiles(recursive)`. Both JVM paths go through one small Java helper
compiled once with Janino (on Spark's classpath), which serialises a listing as
`path\\tsize\\tmtime` lines in ONE py4j call; big listings go through a temp file because py4j
stalls (~44 ms) on returned strings of 8 KB or more.

Table formats with their own versions (Delta, Iceberg) are read through their classes when those
are on the classpath; the jars are not available on this machine, so that path is guarded and
untested here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from emitter.snapshots import (
    DataFile,
    Snapshot,
    content_snapshot,
    data_files,
    file_sink_batch_snapshot,
    is_hidden_name,
    path_of,
    table_version_snapshot,
)

log = logging.getLogger(__name__)

LOCAL_SCHEMES = frozenset({"", "file"})
# Above this many characters the helper writes the listing to a temp file (py4j string stall).
INLINE_RESULT_LIMIT = 7000
# A listing longer than this is not worth a snapshot id (bounds the cost on huge tables).
MAX_LISTED_FILES = 1_000_000

_HELPER_CLASS = "SparkLineageFileListing"
_HELPER_SOURCE = """
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

public class SparkLineageFileListing {
    private static final int INLINE_LIMIT = %d;

    private static void line(StringBuilder out, FileStatus status) {
        out.append(status.getPath().toString()).append('\\t')
           .append(status.getLen()).append('\\t')
           .append(status.getModificationTime()).append('\\n');
    }

    private String result(StringBuilder out) throws Exception {
        if (out.length() <= INLINE_LIMIT) return out.toString();
        File file = File.createTempFile("spark-lineage-listing", ".tsv");
        Files.write(file.toPath(), out.toString().getBytes(StandardCharsets.UTF_8));
        return "@" + file.getAbsolutePath();
    }

    /** Files a file index holds; null when the index is of a kind we do not know. */
    public String indexFiles(Object index) throws Exception {
        Object listable = index;
        if (index instanceof org.apache.spark.sql.execution.datasources.CatalogFileIndex) {
            listable = ((org.apache.spark.sql.execution.datasources.CatalogFileIndex) index)
                .filterPartitions(scala.collection.immutable.Nil$.MODULE$);
        }
        if (!(listable instanceof org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex)) return null;
        scala.collection.Iterator files =
            ((org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex) listable).allFiles().iterator();
        StringBuilder out = new StringBuilder();
        while (files.hasNext()) line(out, (FileStatus) files.next());
        return result(out);
    }

    /** Every file under root (recursively), hidden ones included: the caller filters. */
    public String tree(String root, Configuration conf) throws Exception {
        Path path = new Path(root);
        FileSystem fs = path.getFileSystem(conf);
        StringBuilder out = new StringBuilder();
        if (!fs.exists(path)) return "";
        RemoteIterator files = fs.listFiles(path, true);
        while (files.hasNext()) line(out, (LocatedFileStatus) files.next());
        return result(out);
    }
}
"""

_HELPER_SOURCE = _HELPER_SOURCE.replace("%d", str(INLINE_RESULT_LIMIT))

_helpers: dict[int, Any] = {}
_helpers_lock = threading.Lock()


def _helper(jvm: Any) -> Any:
    """The compiled helper for this JVM (compiled once per gateway, ~100 ms the first time)."""
    key = id(jvm)
    with _helpers_lock:
        if key not in _helpers:
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.setParentClassLoader(jvm.java.lang.Thread.currentThread().getContextClassLoader())
            compiler.cook(_HELPER_SOURCE)
            helper_class = compiler.getClassLoader().loadClass(_HELPER_CLASS)
            _helpers[key] = helper_class.newInstance()
        return _helpers[key]


def _read_result(result: str | None) -> str | None:
    if result is None or not result.startswith("@"):
        return result
    path = result[1:]
    try:
        with open(path, encoding="utf-8") as listing_file:
            return listing_file.read()
    finally:
        os.unlink(path)


def _parse_listing(text: str) -> Iterator[tuple[str, int, int]]:
    for line in text.splitlines():
        path, size, modified = line.rsplit("\t", 2)
        yield path, int(size), int(modified)


def index_listing(jvm: Any, file_index: Any) -> list[tuple[str, int, int]] | None:
    """(path URI, size, mtime ms) of every file a Spark `FileIndex` holds, in one py4j call;
    None when the index kind is unknown."""
    text = _read_result(_helper(jvm).indexFiles(file_index))
    return None if text is None else list(_parse_listing(text))


def local_listing(root: str) -> list[tuple[str, int, int]]:
    """(path, size, mtime ms) under a local directory, not descending into hidden directories."""
    listing: list[tuple[str, int, int]] = []
    pending = [path_of(root)]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if is_hidden_name(entry.name):
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                listing.append((entry.path, stat.st_size, stat.st_mtime_ns // 1_000_000))
    return listing


def tree_listing(jvm: Any, hadoop_conf: Any, root: str) -> list[tuple[str, int, int]]:
    """(path, size, mtime ms) of every file under `root`: os.scandir for local paths, Hadoop's
    FileSystem otherwise."""
    if urlsplit(root).scheme.lower() in LOCAL_SCHEMES:
        return local_listing(root)
    text = _read_result(_helper(jvm).tree(root, hadoop_conf)) or ""
    return list(_parse_listing(text))


def input_snapshot(jvm: Any, file_index: Any) -> Snapshot | None:
    """Content snapshot of what a read's file index holds (its root paths are the dataset root:
    a read of one table has exactly one; more roots are a multi-path read, left unversioned)."""
    roots = [str(root) for root in _scala_seq(file_index.rootPaths())]
    if len(roots) != 1:
        return None
    listing = index_listing(jvm, file_index)
    if listing is None or len(listing) > MAX_LISTED_FILES:
        return None
    return content_snapshot(_under_root(roots[0], listing))


def _under_root(root: str, listing: list[tuple[str, int, int]]) -> tuple[DataFile, ...]:
    return data_files(root, listing)


def output_snapshot(jvm: Any, hadoop_conf: Any, location: str, written_since_ms: int | None) -> Snapshot | None:
    """Content snapshot of a write's target after the write, with the partitions it wrote
    (partitions holding files modified since `written_since_ms`)."""
    listing = tree_listing(jvm, hadoop_conf, location)
    if len(listing) > MAX_LISTED_FILES:
        return None
    return content_snapshot(data_files(location, listing), written_since_ms=written_since_ms, with_partitions=True)


def _scala_seq(seq: Any) -> list[Any]:
    items: list[Any] = []
    iterator = seq.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def class_available(jvm: Any, class_name: str) -> bool:
    try:
        jvm.java.lang.Class.forName(class_name, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception:  # py4j wraps ClassNotFoundException
        return False
    return True


DELTA_LOG_CLASS = "org.apache.spark.sql.delta.DeltaLog"


def delta_snapshot(jvm: Any, spark_session: Any, location: str) -> Snapshot | None:
    """Delta table version at `location`, when Delta is on the classpath and it is a Delta table
    (untested here: the Delta jars cannot be downloaded on this machine)."""
    if not class_available(jvm, DELTA_LOG_CLASS):
        return None
    try:
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark_session, location)
        if not delta_log.tableExists():
            return None
        return table_version_snapshot("delta", delta_log.update(False, jvm.scala.Option.empty()).version())
    except Exception as error:  # noqa: BLE001 - never break the job for a version
        log.debug("no Delta version for %s: %s", location, error)
        return None


def iceberg_snapshot(spark_table: Any) -> Snapshot | None:
    """Current snapshot id of an Iceberg `SparkTable` (a DataSourceV2Relation's table), when it is
    one (untested here, like Delta)."""
    try:
        if "iceberg" not in spark_table.getClass().getName().lower():
            return None
        current = spark_table.table().currentSnapshot()
        return None if current is None else table_version_snapshot("iceberg", current.snapshotId())
    except Exception as error:  # noqa: BLE001
        log.debug("no Iceberg snapshot: %s", error)
        return None


def read_file_sink_log(location: str) -> list[tuple[int, str]]:
    """(batch id, text) of every file in a local streaming file sink's `_spark_metadata` log."""
    log_dir = os.path.join(path_of(location), "_spark_metadata")
    entries: list[tuple[int, str]] = []
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        return entries
    for name in names:
        stem = name.removesuffix(".compact")
        if not stem.isdigit():
            continue
        with open(os.path.join(log_dir, name), encoding="utf-8") as log_file:
            entries.append((int(stem), log_file.read()))
    return entries


def file_sink_snapshot(location: str, batch_id: int) -> Snapshot | None:
    """What a streaming file sink held after `batch_id` committed, from its metadata log (exact
    even when the listener runs after later batches); None for a non-local sink or no log."""
    if urlsplit(location).scheme.lower() not in LOCAL_SCHEMES:
        return None
    log_entries = read_file_sink_log(location)
    return file_sink_batch_snapshot(location, log_entries, batch_id) if log_entries else None
