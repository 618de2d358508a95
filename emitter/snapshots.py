"""Snapshot ids for data lineage: which committed state of a dataset a run consumed or produced.

Pure functions over plain listings and offsets (the listener layer does the I/O, see
`emitter.listener.files`). The `snapshot` and `microBatch` facets carrying them are classes in
`emitter.facets`; `docs/facets.md` documents them.

Content snapshots (`kind="content"`) hash the sorted (relative path, size) of the committed data
files under a dataset's location. Hidden files and directories (`.`/`_` prefixed) are left out,
except `key=value` partition directories, so the id is the same whether it is computed from
Spark's file index when a job reads the table or from a listing after another job wrote it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import attrs

SNAPSHOT_KINDS = ("content", "delta", "iceberg", "stream-offsets", "sink-batch")
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Spark's own name for a file still being copied in; never committed data.
COPYING_SUFFIX = "._COPYING_"
SNAPSHOT_ID_HEX_CHARS = 40
_SCHEME_AND_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?")


@attrs.frozen
class DataFile:
    """One committed data file: its path relative to the dataset root ('/'-separated), size in
    bytes, and modification time in epoch ms (used only to tell which partitions a write touched,
    never in the snapshot id: a reader and a writer must agree on the id)."""

    relative_path: str
    size: int
    modified_ms: int = 0


@attrs.frozen
class Snapshot:
    snapshot_id: str
    kind: str
    batch_id: int | None = None
    partitions: tuple[Mapping[str, str | None], ...] | None = None
    start_offset: Any = None
    end_offset: Any = None
    has_offsets: bool = False


def is_hidden_name(name: str) -> bool:
    """Spark's rule for names a file index skips (HadoopFSUtils.shouldFilterOutPathName), plus
    `_metadata`/`_common_metadata` summary files, which are not data either."""
    if name.endswith(COPYING_SUFFIX):
        return True
    if name.startswith("."):
        return True
    return name.startswith("_") and "=" not in name


def path_of(uri_or_path: str) -> str:
    """The filesystem path of a URI (`file:/a/b`, `file:///a/b`, `hdfs://nn/a`) or plain path,
    unescaped, without a trailing slash."""
    path = _SCHEME_AND_AUTHORITY.sub("", uri_or_path, count=1)
    if "%" in path:
        path = unquote(path)
    return path.rstrip("/") or "/"


def relative_to(root: str, file_path: str) -> str | None:
    """`file_path` relative to `root` (both URIs or paths), or None when it is not under root."""
    root_path, path = path_of(root), path_of(file_path)
    prefix = root_path if root_path.endswith("/") else root_path + "/"
    if not path.startswith(prefix):
        return None
    return path[len(prefix) :]


def is_data_file(relative_path: str) -> bool:
    return not any(is_hidden_name(part) for part in relative_path.split("/"))


def data_files(root: str, listing: Iterable[tuple[str, int] | tuple[str, int, int]]) -> tuple[DataFile, ...]:
    """Data files among `listing` ((path, size[, modified_ms]) with absolute paths or URIs),
    relative to `root`, hidden ones and ones outside root dropped, sorted by path."""
    root_path = path_of(root)
    prefix = root_path if root_path.endswith("/") else root_path + "/"
    visible_dirs: dict[str, bool] = {}
    files: list[DataFile] = []
    for entry in listing:
        path = path_of(entry[0])
        if not path.startswith(prefix):
            continue
        relative = path[len(prefix) :]
        directory, _, name = relative.rpartition("/")
        if not name or is_hidden_name(name):
            continue
        if directory not in visible_dirs:
            visible_dirs[directory] = is_data_file(directory) if directory else True
        if not visible_dirs[directory]:
            continue
        files.append(DataFile(relative, int(entry[1]), int(entry[2]) if len(entry) > 2 else 0))
    files.sort(key=lambda data_file: data_file.relative_path)
    return tuple(files)


def content_snapshot_id(files: Iterable[DataFile]) -> str:
    """Hash over the sorted (relative path, size) pairs; order of `files` does not matter."""
    digest = hashlib.sha256()
    for relative_path, size in sorted((f.relative_path, f.size) for f in files):
        digest.update(f"{relative_path}\t{size}\n".encode())
    return digest.hexdigest()[:SNAPSHOT_ID_HEX_CHARS]


def partition_of(relative_path: str) -> dict[str, str | None]:
    """The partition values a file's directories name (`dt=2024/x.parquet` → {"dt": "2024"})."""
    values: dict[str, str | None] = {}
    for part in relative_path.split("/")[:-1]:
        key, sep, value = part.partition("=")
        if not sep:
            continue
        unescaped = unquote(value)
        values[unquote(key)] = None if unescaped == HIVE_DEFAULT_PARTITION else unescaped
    return values


def partitions_written(files: Iterable[DataFile], since_ms: int | None = None) -> tuple[dict[str, str | None], ...]:
    """Distinct partitions of the files modified at or after `since_ms` (all files when None),
    sorted; empty for an unpartitioned dataset."""
    directories = {
        data_file.relative_path.rpartition("/")[0] for data_file in files if since_ms is None or data_file.modified_ms >= since_ms
    }
    return distinct_partitions(partition_of(directory + "/") for directory in directories)


def partitions_read(root: str | None, directories: Iterable[str], columns: Sequence[str]) -> tuple[dict[str, str | None], ...]:
    """The partitions a scan read, from its partition directories (URIs or paths): the `k=v`
    segments below the dataset root (of the whole path when it is not under the root), only
    those naming a partition column (any case), distinct and sorted as `partitions_written`."""
    wanted = {column.lower() for column in columns}
    prefix = path_of(root) + "/" if root is not None else None
    found = []
    for directory in directories:
        # a Hadoop path names a directory as on disk (`hour=a%2Fb`): partition_of unescapes it, once
        path = _SCHEME_AND_AUTHORITY.sub("", directory, count=1).rstrip("/")
        relative = path[len(prefix) :] if prefix is not None and path.startswith(prefix) else path
        values = partition_of(relative + "/")
        found.append({key: value for key, value in values.items() if key.lower() in wanted})
    return distinct_partitions(found)


def distinct_partitions(partitions: Iterable[Mapping[str, str | None]]) -> tuple[dict[str, str | None], ...]:
    """Each partition once (empty ones left out), sorted by their (column, value) pairs."""
    seen: dict[tuple[tuple[str, str | None], ...], dict[str, str | None]] = {}
    for values in partitions:
        if values:
            seen[tuple(sorted(values.items(), key=lambda item: (item[0], item[1] or "")))] = dict(values)
    return tuple(seen[key] for key in sorted(seen, key=lambda key: [(k, v or "") for k, v in key]))


def content_snapshot(
    files: Sequence[DataFile],
    written_since_ms: int | None = None,
    with_partitions: bool = False,
    batch_id: int | None = None,
) -> Snapshot:
    """The content snapshot of a listing; for outputs (`with_partitions`) also the partitions
    written since `written_since_ms`."""
    partitions = partitions_written(files, written_since_ms) if with_partitions else None
    return Snapshot(content_snapshot_id(files), "content", batch_id=batch_id, partitions=partitions)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def parse_offset(offset: Any) -> Any:
    """Offsets as Spark reports them in a progress: usually a JSON string; kept as parsed JSON
    when it parses, else as the raw string."""
    if not isinstance(offset, str):
        return offset
    try:
        return json.loads(offset)
    except ValueError:
        return offset


def stream_offsets_snapshot(source: str, start_offset: Any, end_offset: Any, batch_id: int | None) -> Snapshot:
    """What one micro-batch (or a batch read of a stream, `batch_id` None) consumed from one source:
    its id hashes the source and both offsets, so replaying the same range (same checkpoint) gives
    the same id."""
    start, end = parse_offset(start_offset), parse_offset(end_offset)
    material = _canonical_json({"source": source, "start": start, "end": end})
    snapshot_id = hashlib.sha256(material.encode()).hexdigest()[:SNAPSHOT_ID_HEX_CHARS]
    return Snapshot(snapshot_id, "stream-offsets", batch_id=batch_id, start_offset=start, end_offset=end, has_offsets=True)


def sink_batch_snapshot(query_id: str, batch_id: int) -> Snapshot:
    """A streaming sink whose content we cannot see (foreachBatch, console, memory, Kafka)."""
    return Snapshot(f"{query_id}:{batch_id}", "sink-batch", batch_id=batch_id)


def table_version_snapshot(kind: str, version: int | str) -> Snapshot:
    """A table format's own version (Delta version, Iceberg snapshot id)."""
    if kind not in ("delta", "iceberg"):
        raise ValueError(f"not a versioned table format: {kind!r}")
    return Snapshot(str(version), kind)


# what Iceberg's SparkTable publishes among a V2 table's properties (no Iceberg classes needed)
ICEBERG_PROVIDER = "iceberg"
ICEBERG_CURRENT_SNAPSHOT = "current-snapshot-id"


def is_iceberg(properties: Mapping[str, str]) -> bool:
    return properties.get("provider", "").lower() == ICEBERG_PROVIDER


def v2_table_version(properties: Mapping[str, str], pinned_snapshot_id: str | None = None) -> tuple[str, str] | None:
    """An Iceberg table's snapshot id from its V2 properties: the snapshot a time-travel read is
    pinned to, else the table's current snapshot; None for other tables and for an Iceberg table
    without snapshots yet (`current-snapshot-id` is "none")."""
    if not is_iceberg(properties):
        return None
    snapshot_id = pinned_snapshot_id or properties.get(ICEBERG_CURRENT_SNAPSHOT)
    if not snapshot_id or snapshot_id == "none":
        return None
    return (ICEBERG_PROVIDER, str(snapshot_id))


def delta_table_version(version: int | None) -> tuple[str, str] | None:
    """A Delta table's version as a relation's `table_version`: the one its file index reads."""
    return None if version is None else ("delta", str(version))


def latest_delta_version(log_names: Iterable[str]) -> int | None:
    """The table version a Delta log directory's file names show: its highest commit
    (`00000000000000000007.json`, or a checkpoint `...7.checkpoint.parquet` when older commits
    were cleaned up)."""
    versions = [
        int(name.split(".", 1)[0])
        for name in log_names
        if name.split(".", 1)[0].isdigit() and (name.endswith(".json") or ".checkpoint" in name)
    ]
    return max(versions) if versions else None


@attrs.frozen
class DeltaCommit:
    """One commit of a Delta log (`_delta_log/<version>.json`): its version, its `commitInfo`
    timestamp (epoch ms, None when absent) and the partitions its `add`/`remove` actions of
    data changes touched."""

    version: int
    timestamp_ms: int | None
    partitions: tuple[dict[str, str | None], ...]


def parse_delta_commit(version: int, text: str) -> DeltaCommit:
    """A Delta commit file's JSON lines, by the Delta protocol (no Delta classes)."""
    timestamp_ms: int | None = None
    touched: list[Mapping[str, str | None]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            timestamp_ms = action["commitInfo"].get("timestamp")
        for kind in ("add", "remove"):
            change = action.get(kind)
            if change is not None and change.get("dataChange", True):
                touched.append(change.get("partitionValues") or {})
    return DeltaCommit(version, timestamp_ms, distinct_partitions(touched))


def delta_commit_snapshot(commits: Iterable[DeltaCommit], since_ms: int) -> Snapshot | None:
    """The version a write that began at `since_ms` committed, with the partitions it touched: the
    first commit at or after it (a later one is a later action's), else the newest commit."""
    ordered = sorted(commits, key=lambda commit: commit.version)
    if not ordered:
        return None
    after = [commit for commit in ordered if commit.timestamp_ms is not None and commit.timestamp_ms >= since_ms]
    committed = after[0] if after else ordered[-1]
    return Snapshot(str(committed.version), "delta", partitions=committed.partitions)


def file_sink_log_files(log_entries: Sequence[tuple[int, str]], upto_batch: int) -> list[tuple[str, int]]:
    """Committed files of a streaming file sink after batch `upto_batch`, from its
    `_spark_metadata` log: (batch id, file text) pairs. Spark compacts every N batches into a
    `N.compact` file holding all files so far; later batches each add their own. Lines are
    'v1' then one JSON entry per file (`path`, `size`, `action`)."""
    relevant = sorted((batch, text) for batch, text in log_entries if batch <= upto_batch)
    files: dict[str, int] = {}
    for _batch, text in relevant:
        for line in text.splitlines()[1:]:
            if not line.strip():
                continue
            entry = json.loads(line)
            if entry.get("isDir"):
                continue
            if entry.get("action", "add") == "delete":
                files.pop(entry["path"], None)
            else:
                files[entry["path"]] = int(entry["size"])
    return sorted(files.items())


def file_sink_batch_snapshot(location: str, log_entries: Sequence[tuple[int, str]], batch_id: int) -> Snapshot:
    """The content snapshot of a streaming file sink after `batch_id`, with the partitions that
    batch itself wrote; the id equals what a later batch read of the sink's directory computes
    (Spark reads such a directory through the same log)."""
    committed = data_files(location, file_sink_log_files(log_entries, batch_id))
    before = set(data_files(location, file_sink_log_files(log_entries, batch_id - 1))) if batch_id > 0 else set()
    own_files = [data_file for data_file in committed if data_file not in before]
    return Snapshot(content_snapshot_id(committed), "content", batch_id=batch_id, partitions=partitions_written(own_files))


@attrs.frozen
class MicroBatch:
    batch_id: int
    query_id: str
    run_id: str
    num_input_rows: int
    checkpoint_location: str | None = None
    duration_ms: int | None = None
