"""Listings for snapshot ids, read out of the JVM / filesystem (the only I/O behind `emitter.snapshots`).

Inputs reuse Spark's own file index (what the read plans to scan, already listed by Spark);
outputs are listed after the write: `file:` locations with `os.scandir`, other schemes with
Hadoop's `FileSystem.listStatus` per directory. Both JVM paths go through one Java helper
(`java/SparkLineageFileListing.java`, see `emitter.listener.janino`), which serialises a listing
as `path\\tsize\\tmtime` lines in ONE py4j call.

Delta tables are versioned by their own log (`_delta_log/<version>.json`, read as plain files:
no Delta classes needed); Iceberg tables by the snapshot id their V2 properties carry, read by
`java/SparkLineageRelations.java` (docs/facets.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from emitter.capture import RelationInfo
from emitter.described import location_of, parse_initial_offsets, parse_listing
from emitter.listener import janino
from emitter.listener import jvm as jvm_helpers
from emitter.snapshots import (
    DeltaCommit,
    Snapshot,
    content_snapshot,
    data_files,
    delta_commit_snapshot,
    file_sink_batch_snapshot,
    is_hidden_name,
    latest_delta_version,
    parse_delta_commit,
    path_of,
    table_version_snapshot,
)

log = logging.getLogger(__name__)

LOCAL_SCHEMES = frozenset({"", "file"})
# A listing longer than this is not worth a snapshot id (bounds the cost on huge tables).
MAX_LISTED_FILES = 1_000_000
DELTA_LOG_DIR = "_delta_log"
DELTA_COMMITS_READ = 16  # the newest commits a write's own is looked for among
SINK_LOG_DIR = "_spark_metadata"
SOURCES_DIR = "sources"  # a streaming query's checkpoint: sources/<source index>/<batch> (Kafka: its start)

LISTING_CLASS = "SparkLineageFileListing"


def _listing_helper(gateway: Any) -> Any:
    """The JVM listing helper (`java/SparkLineageFileListing.java`), for this call only: the
    compiled class is cached per JVM by `janino`, an instance costs one py4j call."""
    return janino.new_instance(gateway, LISTING_CLASS)


def index_listing(gateway: Any, file_index: Any) -> list[tuple[str, int, int]] | None:
    """(path URI, size, mtime ms) of every file a Spark `FileIndex` holds, in one py4j call;
    None when the index kind is unknown."""
    text = janino.read_result(_listing_helper(gateway).indexFiles(file_index))
    return None if text is None else list(parse_listing(text))


class TooManyFiles(Exception):
    """A listing passed MAX_LISTED_FILES: the dataset gets no content snapshot."""


def local_listing(root: str, max_files: int = MAX_LISTED_FILES) -> list[tuple[str, int, int]]:
    """(path, size, mtime ms) under a local directory, not descending into hidden directories;
    stops with TooManyFiles past `max_files`."""
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
                if len(listing) >= max_files:
                    raise TooManyFiles(root)
                stat = entry.stat(follow_symlinks=False)
                listing.append((entry.path, stat.st_size, stat.st_mtime_ns // 1_000_000))
    return listing


def tree_listing(gateway: Any, hadoop_conf: Any, root: str) -> list[tuple[str, int, int]]:
    """(path, size, mtime ms) of every data file under `root`: os.scandir for local paths, Hadoop's
    FileSystem otherwise; TooManyFiles past MAX_LISTED_FILES (listing stops there)."""
    if urlsplit(root).scheme.lower() in LOCAL_SCHEMES:
        return local_listing(root)
    text = janino.read_result(_listing_helper(gateway).tree(root, hadoop_conf, MAX_LISTED_FILES)) or ""
    if text == "!":
        raise TooManyFiles(root)
    return list(parse_listing(text))


def input_snapshot(gateway: Any, file_index: Any) -> Snapshot | None:
    """Content snapshot of what a read's file index holds (its root paths are the dataset root:
    a read of one table has exactly one; more roots are a multi-path read, left unversioned)."""
    roots = [str(root) for root in jvm_helpers.iterate(file_index.rootPaths())]
    if len(roots) != 1:
        return None
    listing = index_listing(gateway, file_index)
    if listing is None or len(listing) > MAX_LISTED_FILES:
        return None
    return content_snapshot(data_files(roots[0], listing))


def output_snapshot(gateway: Any, hadoop_conf: Any, location: str, written_since_ms: int | None) -> Snapshot | None:
    """Content snapshot of a write's target after the write, with the partitions it wrote
    (partitions holding files modified since `written_since_ms`)."""
    return location_snapshot(gateway, hadoop_conf, location, written_since_ms, with_partitions=True)


def location_snapshot(
    gateway: Any, hadoop_conf: Any, location: str, written_since_ms: int | None, with_partitions: bool
) -> Snapshot | None:
    """Content snapshot of everything under `location`; None past MAX_LISTED_FILES."""
    try:
        listing = tree_listing(gateway, hadoop_conf, location)
    except TooManyFiles:
        log.info("no snapshot for %s: more than %d files", location, MAX_LISTED_FILES)
        return None
    return content_snapshot(data_files(location, listing), written_since_ms=written_since_ms, with_partitions=with_partitions)


def read_file_sink_log(location: str, upto_batch: int) -> list[tuple[int, str]]:
    """(batch id, text) of the log files of a local streaming file sink that tell its content
    after `upto_batch` and after the batch before: the latest compaction before `upto_batch`
    (it holds every file so far) and the batches since."""
    log_dir = os.path.join(path_of(location), SINK_LOG_DIR)
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        return []
    batches = {int(name.removesuffix(".compact")): name for name in names if name.removesuffix(".compact").isdigit()}
    compactions = [batch for batch, name in batches.items() if name.endswith(".compact") and batch < upto_batch]
    first = max(compactions, default=0)
    entries: list[tuple[int, str]] = []
    for batch in sorted(batch for batch in batches if first <= batch <= upto_batch):
        with open(os.path.join(log_dir, batches[batch]), encoding="utf-8") as log_file:
            entries.append((batch, log_file.read()))
    return entries


def initial_source_offsets(checkpoint: str, source_index: int) -> Any | None:
    """The offsets a streaming source started at, as the query's checkpoint keeps them
    (`sources/<index>/0`, written when the query first starts: Kafka's resolved `startingOffsets`);
    None for a non-local checkpoint or a source that keeps none."""
    if urlsplit(checkpoint).scheme.lower() not in LOCAL_SCHEMES:
        return None
    try:
        with open(os.path.join(path_of(checkpoint), SOURCES_DIR, str(source_index), "0"), encoding="utf-8") as kept:
            return parse_initial_offsets(kept.read())
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None


def file_sink_snapshot(location: str, batch_id: int) -> Snapshot | None:
    """What a streaming file sink held after `batch_id` committed, from its metadata log (exact
    even when the listener runs after later batches); None for a non-local sink or no log."""
    if urlsplit(location).scheme.lower() not in LOCAL_SCHEMES:
        return None
    log_entries = read_file_sink_log(location, batch_id)
    return file_sink_batch_snapshot(location, log_entries, batch_id) if log_entries else None


def described_input_snapshot(gateway: Any, hadoop_conf: Any, description: Mapping[str, Any]) -> Snapshot | None:
    """For the batch listener: the content snapshot of a file source read, from the `files` of
    its `jvm.PlanDumper.describe` leaf (the file index Spark already listed for the read, read
    in the same round trip). A catalog table read with pruned metastore partitions has an index
    of those partitions only: then the table location is listed, so the id is the table's, as
    its writer reported it. None when the helper could not read the index or it has several roots."""
    if description.get("relation") != "HadoopFsRelation":
        return None
    roots = [str(root) for root in description.get("paths", ())]
    table_location = description.get("location") if description.get("table") else None
    if table_location is not None and [path_of(root) for root in roots] != [path_of(table_location)]:
        return relation_snapshot(
            gateway, hadoop_conf, RelationInfo(node_class="LogicalRelation", table_location=table_location), None, False
        )
    listing = description.get("files")
    if len(roots) != 1 or listing is None:
        return None
    files = list(parse_listing(listing))
    if len(files) > MAX_LISTED_FILES:
        return None
    return content_snapshot(data_files(roots[0], files))


def relation_snapshot(
    gateway: Any, hadoop_conf: Any, relation: RelationInfo, written_since_ms: int | None, is_output: bool
) -> Snapshot | None:
    """Snapshot of a file-based relation: the Delta version when it is a Delta table, else the
    content version of its location; a version read off the live table (Iceberg) wins."""
    if relation.table_version is not None:
        return table_version_snapshot(*relation.table_version)
    location = location_of(relation)
    if location is None:
        return None
    if (relation.format or "").lower() == "delta" or _is_local_delta(location):
        return delta_log_snapshot(location, written_since_ms if is_output else None)
    return location_snapshot(gateway, hadoop_conf, location, written_since_ms, with_partitions=is_output)


def _is_local_delta(location: str) -> bool:
    return urlsplit(location).scheme.lower() in LOCAL_SCHEMES and os.path.isdir(os.path.join(path_of(location), DELTA_LOG_DIR))


def delta_log_snapshot(location: str, written_since_ms: int | None = None) -> Snapshot | None:
    """A local Delta table's version, read from its log by the Delta protocol (no Delta classes):
    the highest commit number in `_delta_log`; for a write that began at `written_since_ms`, the
    commit it made among the newest DELTA_COMMITS_READ, with the partitions that commit touched."""
    if urlsplit(location).scheme.lower() not in LOCAL_SCHEMES:
        return None
    log_dir = os.path.join(path_of(location), DELTA_LOG_DIR)
    try:
        names = os.listdir(log_dir)
    except FileNotFoundError:
        return None
    version = latest_delta_version(names)
    if version is None:
        return None
    if written_since_ms is None:
        return table_version_snapshot("delta", version)
    return delta_commit_snapshot(_delta_commits(log_dir, version), written_since_ms)


def _delta_commits(log_dir: str, latest: int) -> list[DeltaCommit]:
    """The newest commits up to `latest` whose files are still there (parsed)."""
    commits = []
    for version in range(max(0, latest - DELTA_COMMITS_READ + 1), latest + 1):
        try:
            with open(os.path.join(log_dir, f"{version:020d}.json"), encoding="utf-8") as commit:
                commits.append(parse_delta_commit(version, commit.read()))
        except FileNotFoundError:
            continue
    return commits
