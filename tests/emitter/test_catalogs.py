"""The catalogs a session's conf configures, and the `storage` and `catalog` facets of the Iceberg
and Delta tables named through them."""

from __future__ import annotations

from emitter.capture import RelationInfo, TableRef
from emitter.catalogs import CatalogInfo, configured_catalogs
from emitter.facets import table_format_facets
from emitter.snapshots import Snapshot

CONF = {
    "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    "spark.sql.catalog.lake.type": "hadoop",
    "spark.sql.catalog.lake.warehouse": "/data/warehouse",
    "spark.sql.catalog.custom": "org.apache.iceberg.spark.SparkCatalog",
    "spark.sql.catalog.custom.catalog-impl": "com.example.MyCatalog",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def test_each_configured_catalog_by_its_type_or_implementation() -> None:
    catalogs = configured_catalogs(CONF, "file:/spark-warehouse", "hive")
    assert catalogs == (
        CatalogInfo("spark_catalog", "hive", "file:/spark-warehouse"),
        CatalogInfo("custom", "MyCatalog", None),
        CatalogInfo("lake", "hadoop", "/data/warehouse"),
    )


def test_an_iceberg_table_says_its_storage_layer_and_catalog() -> None:
    relation = RelationInfo("DataSourceV2Relation", table=TableRef("orders", "db", "lake"), format="iceberg")
    built = table_format_facets(relation, None, configured_catalogs(CONF))
    assert built["storage"].storageLayer == "iceberg"
    catalog = built["catalog"]
    assert (catalog.framework, catalog.type, catalog.name, catalog.warehouseUri) == (
        "iceberg",
        "hadoop",
        "lake",
        "/data/warehouse",
    )
    [identifier] = built["symlinks"].identifiers  # in the catalog's warehouse, not the session's
    assert (identifier.namespace, identifier.name, identifier.type) == ("file:/data/warehouse", "db.orders", "TABLE")


def test_a_session_catalog_table_keeps_the_sessions_symlink() -> None:
    relation = RelationInfo("LogicalRelation", table=TableRef("events", "default", "spark_catalog"), format="delta")
    assert "symlinks" not in table_format_facets(relation, None, configured_catalogs(CONF, "file:/spark-warehouse"))


def test_a_delta_path_table_known_by_its_snapshot_has_storage_but_no_catalog() -> None:
    relation = RelationInfo("LogicalRelation", paths=("file:/lake/events",), format="parquet")
    built = table_format_facets(relation, Snapshot("3", "delta"), ())
    assert built["storage"].storageLayer == "delta"
    assert "catalog" not in built


def test_a_catalog_table_of_an_unconfigured_catalog_has_an_unknown_type() -> None:
    relation = RelationInfo("LogicalRelation", table=TableRef("events", "default"), format="delta")
    catalog = table_format_facets(relation, None, ())["catalog"]
    assert (catalog.framework, catalog.type, catalog.name) == ("delta", "unknown", "spark_catalog")


def test_other_formats_get_neither_facet() -> None:
    relation = RelationInfo("LogicalRelation", paths=("file:/lake/raw",), format="parquet")
    assert table_format_facets(relation, Snapshot("abc", "content"), ()) == {}
