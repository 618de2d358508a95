"""The node-id grammar Marquez and Marquez Web use:

    dataset:NAMESPACE:NAME[#VERSION]
    job:NAMESPACE:NAME[#VERSION]
    datasetField:NAMESPACE:DATASET:FIELD[#VERSION]
    run:UUID

A namespace may itself be a URI (`postgres://host:5432`, `kafka://b1:9092,b2:9092`); the colons
of its `scheme://authority` part are not separators. The namespace ends at the first `:` after
the authority. The field is what follows the LAST colon of a datasetField id, so dataset names
may hold colons, field names may not.
"""

from __future__ import annotations

import re
import uuid
from typing import Literal

import attrs

from consumer.query.errors import BadParameter

NodeKind = Literal["dataset", "job", "datasetField", "run"]

# scheme://authority — the authority runs to the next "/" or to the ":" that ends the namespace;
# a ":digits" right after the host is a port, not the separator.
_URI_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^:/]*(?::\d+)?(?:,[^:/]*(?::\d+)?)*(?:/[^:]*)?")


@attrs.frozen
class NodeId:
    kind: NodeKind
    namespace: str
    name: str
    field: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.kind == "run":
            return f"run:{self.name}"
        text = f"{self.kind}:{self.namespace}:{self.name}"
        if self.field is not None:
            text += f":{self.field}"
        return text + (f"#{self.version}" if self.version else "")


def dataset_id(namespace: str, name: str) -> str:
    return f"dataset:{namespace}:{name}"


def job_id(namespace: str, name: str) -> str:
    return f"job:{namespace}:{name}"


def field_id(namespace: str, dataset: str, field: str) -> str:
    return f"datasetField:{namespace}:{dataset}:{field}"


def parse_node_id(text: str) -> NodeId:
    """Parse a node id; raises BadParameter naming the id when it does not follow the grammar."""
    kind, sep, rest = text.partition(":")
    if not sep or not rest:
        raise BadParameter(f"malformed nodeId {text!r}: expected KIND:NAMESPACE:NAME")
    if kind == "run":
        return NodeId(kind="run", namespace="", name=_run_uuid(rest, text))
    if kind not in ("dataset", "job", "datasetField"):
        raise BadParameter(f"malformed nodeId {text!r}: unknown node type {kind!r}")
    rest, version = _split_version(rest)
    namespace, name = _split_namespace(rest, text)
    if kind == "dataset":
        return NodeId(kind="dataset", namespace=namespace, name=name, version=version)
    if kind == "job":
        return NodeId(kind="job", namespace=namespace, name=name, version=version)
    dataset, sep, field = name.rpartition(":")
    if not sep or not dataset or not field:
        raise BadParameter(f"malformed nodeId {text!r}: expected datasetField:NAMESPACE:DATASET:FIELD")
    return NodeId(kind="datasetField", namespace=namespace, name=dataset, field=field, version=version)


def _split_version(rest: str) -> tuple[str, str | None]:
    head, sep, tail = rest.rpartition("#")
    if sep and _is_uuid(tail):
        return head, tail
    return rest, None


def _split_namespace(rest: str, text: str) -> tuple[str, str]:
    uri = _URI_NAMESPACE.match(rest)
    if uri and rest[uri.end() : uri.end() + 1] == ":":
        namespace, name = rest[: uri.end()], rest[uri.end() + 1 :]
    else:
        namespace, _, name = rest.partition(":")
    if not namespace or not name:
        raise BadParameter(f"malformed nodeId {text!r}: expected KIND:NAMESPACE:NAME")
    return namespace, name


def _run_uuid(rest: str, text: str) -> str:
    if not _is_uuid(rest):
        raise BadParameter(f"malformed nodeId {text!r}: a run id must be a UUID")
    return rest


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
