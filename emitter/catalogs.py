"""The table catalogs a Spark session configures, read from its conf: what an Iceberg or Delta
table's `catalog` facet says of the catalog the table lives in.

A catalog `NAME` is configured by `spark.sql.catalog.NAME` (its plugin class) and options under
`spark.sql.catalog.NAME.*`; Iceberg's catalogs say their kind in `type` (hadoop, hive, jdbc, rest,
glue, nessie) or name a custom class in `catalog-impl`. The session catalog, `spark_catalog`, is
Spark's own (a Hive metastore or in memory) unless a plugin such as Delta's `DeltaCatalog` wraps it.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from emitter.redaction import redact

SESSION_CATALOG = "spark_catalog"
CATALOG_PREFIX = "spark.sql.catalog."


@frozen
class CatalogInfo:
    name: str
    type: str  # Iceberg's `type`, else the implementing class's simple name, else the session's metastore kind
    warehouse: str | None = None  # where the catalog keeps its tables, when its conf says


def configured_catalogs(
    conf: Mapping[str, str], warehouse_dir: str = "", catalog_implementation: str = "in-memory"
) -> tuple[CatalogInfo, ...]:
    """The session catalog and every catalog `conf` configures, by name."""
    names = {key[len(CATALOG_PREFIX) :] for key in conf if key.startswith(CATALOG_PREFIX)}
    found = {SESSION_CATALOG: CatalogInfo(SESSION_CATALOG, catalog_implementation or "in-memory", warehouse_dir or None)}
    for name in sorted(name for name in names if name and "." not in name and name != SESSION_CATALOG):
        options = _options(conf, name)
        kind = options.get("type") or _simple_name(options.get("catalog-impl") or conf[CATALOG_PREFIX + name])
        warehouse = options.get("warehouse")
        found[name] = CatalogInfo(name, kind, redact(warehouse) if warehouse else None)
    return tuple(found.values())


def _options(conf: Mapping[str, str], name: str) -> dict[str, str]:
    prefix = f"{CATALOG_PREFIX}{name}."
    return {key[len(prefix) :]: value for key, value in conf.items() if key.startswith(prefix)}


def _simple_name(class_name: str) -> str:
    return class_name.rsplit(".", 1)[-1]
