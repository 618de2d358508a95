"""Marquez-shaped reads, one module per resource: `catalog` (namespaces, tags, jobs, runs, datasets,
versions, events), `search` (v1 and v2beta), `stats`, `graphs` (`/lineage`, `/column-lineage`); built from
`loaders` (batched row loads) and `shapes` (Marquez's JSON shapes). Every function returns plain dicts in
Marquez's JSON shapes and raises `NotFound` / `BadParameter` (consumer.query.errors)."""

from __future__ import annotations

from consumer.query.marquez.catalog import (
    get_dataset,
    get_job,
    get_namespace,
    get_run,
    lineage_events,
    list_dataset_versions,
    list_datasets,
    list_jobs,
    list_namespaces,
    list_runs,
    list_tags,
    run_facets,
)
from consumer.query.marquez.graphs import column_lineage_graph, lineage_graph
from consumer.query.marquez.search import search, search_hits
from consumer.query.marquez.stats import entity_stats, lineage_event_stats

__all__ = [
    "column_lineage_graph",
    "entity_stats",
    "get_dataset",
    "get_job",
    "get_namespace",
    "get_run",
    "lineage_event_stats",
    "lineage_events",
    "lineage_graph",
    "list_dataset_versions",
    "list_datasets",
    "list_jobs",
    "list_namespaces",
    "list_runs",
    "list_tags",
    "run_facets",
    "search",
    "search_hits",
]
