"""Pure parts of the emitter: naming, redaction, configuration, and the pipeline's run building
(dedupe of nested commands, START/COMPLETE/FAIL, parents) over hand-made captures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from attrs import evolve
from openlineage.client.serde import Serde

from emitter.capture import Capture, RelationInfo, SchemaField, SessionInfo, TableRef, WriteInfo
from emitter.config import is_disabled, load_config
from emitter.dedupe import wraps
from emitter.naming import dataset_name, job_name, table_namespace
from emitter.redaction import redact
from tests.emitter.test_pipeline import Stages
from tests.support.spec import assert_valid_event


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:/tmp/out/", ("file", "/tmp/out")),
        ("/tmp/out", ("file", "/tmp/out")),
        ("hdfs://namenode:8020/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
        ("s3a://bucket/key/part", ("s3://bucket", "key/part")),
        ("s3a://AKIA:secret@bucket/key", ("s3://bucket", "key")),
        ("gs://bucket/x", ("gs://bucket", "x")),
        ("abfss://container@account.dfs.core.windows.net/p", ("abfss://container@account.dfs.core.windows.net", "p")),
        ("jdbc:postgresql://user:pw@db:5432/shop/public.orders", ("postgres://db:5432", "shop.public.orders")),
    ],
)
def test_dataset_names_follow_the_naming_spec(uri, expected):
    assert dataset_name(uri) == expected


def test_job_names_are_normalized_and_stable():
    assert job_name("Daily ETL", "InsertIntoHadoopFsRelationCommand", "/data/Out-1/") == (
        "daily_etl.insert_into_hadoop_fs_relation_command.data_out_1"
    )
    assert job_name("x", "CreateDataSourceTableAsSelectCommand", "default.t") == (
        "x.create_data_source_table_as_select_command.default_t"
    )


def test_table_namespace_is_metastore_or_warehouse():
    assert table_namespace("file:/tmp/wh/", None) == "file:/tmp/wh"
    assert table_namespace("hdfs://nn:8020/wh", "thrift://meta:9083,thrift://other:9083") == "hive://meta:9083"


def test_redact_masks_secret_keys_and_url_credentials_at_any_depth():
    options = {
        "path": "s3a://AKIA:topsecret@bucket/x",
        "password": "hunter2",
        "fs.s3a.secret.key": "abc",
        "nested": {"apiToken": "t0k", "keep": "visible"},
        "url": "jdbc:postgresql://db/shop?user=me&password=hunter2",
        "list": ["token=xyz", "plain"],
    }
    redacted = redact(options)
    assert redacted == {
        "path": "s3a://AKIA:***@bucket/x",
        "password": "***",
        "fs.s3a.secret.key": "***",
        "nested": {"apiToken": "***", "keep": "visible"},
        "url": "jdbc:postgresql://db/shop?user=me&password=***",
        "list": ["token=***", "plain"],
    }
    assert options["password"] == "hunter2", "the input is not mutated"


def test_config_precedence_env_then_spark_conf_then_explicit():
    spark_conf = {"spark.openlineage.namespace": "from_conf", "spark.openlineage.emitReads": "true"}
    env = {"OPENLINEAGE_NAMESPACE": "from_env"}
    assert load_config({}, None, env).namespace == "from_env"
    merged = load_config(spark_conf, None, env)
    assert (merged.namespace, merged.emit_reads) == ("from_conf", True)
    assert load_config(spark_conf, {"namespace": "explicit"}, env).namespace == "explicit"
    assert load_config({}, {"transport": {"type": "console"}}, {}).client_config == {"transport": {"type": "console"}}


def test_disabled_by_env_or_spark_conf():
    assert is_disabled({}, {"OPENLINEAGE_DISABLED": "true"})
    assert is_disabled({"spark.openlineage.disabled": "TRUE"}, {})
    assert not is_disabled({}, {})


class CollectingClient:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Any) -> None:
        self.events.append(Serde.to_dict(event))

    def close(self, timeout: float = -1) -> bool:
        return True


SESSION = SessionInfo(app_name="Unit App", app_id="local-1", spark_version="4.3.0", warehouse_dir="file:/wh")
END = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def _capture(
    func_name: str,
    qe_id: int,
    command: str,
    *,
    table: TableRef | None,
    path: str | None,
    succeeded: bool = True,
    metrics: dict[str, int] | None = None,
) -> Capture:
    target = RelationInfo(
        node_class=command,
        paths=(path,) if path else (),
        table=table,
        schema=(SchemaField("id", "long"),),
    )
    source = RelationInfo(node_class="LogicalRelation", paths=("file:/src",), schema=(SchemaField("id", "long"),))
    return Capture(
        func_name=func_name,
        query_execution_id=qe_id,
        end_time=END,
        duration_ns=2_000_000_000,
        plan_json="[]",
        succeeded=succeeded,
        error_message=None if succeeded else "boom password=hunter2",
        root_class=command,
        leaves={1: source},
        write=WriteInfo(command=command, target=target, metrics=metrics or {}),
    )


def _pipeline(**config: Any) -> tuple[Stages, CollectingClient]:
    client = CollectingClient()
    return Stages(client, SESSION, **{"namespace": "default", **config}), client


def test_nested_save_as_table_callbacks_make_one_run_with_table_and_metrics():
    pipeline, client = _pipeline()
    table = TableRef("t", "default", "spark_catalog")
    nested = _capture(
        "file source write", 6, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/wh/t", metrics={"numOutputRows": 5}
    )
    ctas = _capture("command", 5, "CreateDataSourceTableAsSelectCommand", table=table, path=None)
    save_as = _capture("command", 3, "SaveAsV1TableCommand", table=TableRef("t"), path=None)
    assert pipeline.handle(nested) == [], "held until its wrapper arrives"
    pipeline.handle(ctas)
    pipeline.handle(save_as)
    pipeline.complete_application()
    runs = {e["run"]["runId"] for e in client.events if e["job"]["name"] != "unit_app"}
    assert len(runs) == 1
    complete = [e for e in client.events if e["eventType"] == "COMPLETE" and e["outputs"]][0]
    assert complete["job"]["name"] == "unit_app.create_data_source_table_as_select_command.default_t"
    [output] = complete["outputs"]
    assert (output["namespace"], output["name"]) == ("file", "/wh/t")
    assert output["facets"]["symlinks"]["identifiers"][0]["name"] == "default.t"
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 5
    for event in client.events:
        assert_valid_event(event)


def test_spark35_nested_write_is_known_by_the_command_it_ran_in():
    """Spark 3.5 names a CTAS's data write "command" like any write: the listener tags it with
    the command it ran nested in; a wrapper nested in another wrapper is no data write."""
    pipeline, client = _pipeline()
    nested = evolve(
        _capture("command", 7, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/wh/t"),
        wrapped_by="CreateDataSourceTableAsSelectCommand",
    )
    inner_wrapper = evolve(
        _capture("command", 5, "CreateDataSourceTableAsSelectCommand", table=TableRef("t", "default"), path=None),
        wrapped_by="SaveAsV1TableCommand",
    )
    plain = _capture("command", 8, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/other")
    assert pipeline.handle(nested) == [], "held until its wrapper arrives"
    assert len(pipeline.handle(plain)) == 2, "a write run by no wrapper is a run at once"
    [start, complete] = pipeline.handle(inner_wrapper)
    assert complete.job.name == "unit_app.create_data_source_table_as_select_command.default_t"
    assert (complete.outputs[0].namespace, complete.outputs[0].name) == ("file", "/wh/t")
    pipeline.complete_application()
    assert len({e["run"]["runId"] for e in client.events}) == 3, "application, plain write, CTAS"


def test_a_nested_write_without_wrapper_is_emitted_at_the_end():
    pipeline, client = _pipeline()
    pipeline.handle(_capture("file source write", 9, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/o"))
    assert client.events == []
    pipeline.complete_application()
    assert [e["eventType"] for e in client.events] == ["START", "COMPLETE", "COMPLETE"]
    assert client.events[-1]["job"]["name"] == "unit_app", "the application completes last"


def test_failed_action_gives_fail_with_redacted_error_and_start_time_from_duration():
    pipeline, client = _pipeline(namespace="team")
    pipeline.handle(_capture("command", 4, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/o", succeeded=False))
    start, fail = client.events
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert start["job"]["namespace"] == "team"
    assert datetime.fromisoformat(fail["eventTime"]) - datetime.fromisoformat(start["eventTime"]) == timedelta(seconds=2)
    assert fail["run"]["facets"]["errorMessage"]["message"] == "boom password=***"
    assert fail["run"]["facets"]["parent"]["run"]["runId"] == pipeline.app_run_id
    for event in client.events:
        assert_valid_event(event)


def test_reads_emit_nothing_unless_configured():
    read = Capture(
        func_name="count",
        query_execution_id=2,
        end_time=END,
        duration_ns=1,
        plan_json="[]",
        root_class="Aggregate",
        leaves={1: RelationInfo("LogicalRelation", paths=("file:/src",))},
    )
    quiet, quiet_client = _pipeline()
    quiet.handle(read)
    assert quiet_client.events == []
    chatty, chatty_client = _pipeline(emit_reads=True)
    chatty.handle(read)
    assert [e["job"]["name"] for e in chatty_client.events] == ["unit_app.count.src"] * 2
    assert chatty_client.events[0]["inputs"][0]["name"] == "/src"


def test_job_name_override_replaces_the_app_part():
    pipeline, client = _pipeline(job_name="nightly")
    pipeline.handle(_capture("command", 4, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/o"))
    assert client.events[0]["job"]["name"] == "nightly.insert_into_hadoop_fs_relation_command.o"


def test_full_job_name_conf_replaces_the_whole_name():
    config = load_config({"spark.openlineage.fullJobName": "nightly_load", "spark.openlineage.jobName": "x"}, None, {})
    pipeline, client = _pipeline(full_job_name=config.full_job_name, job_name=config.job_name)
    pipeline.handle(_capture("command", 4, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/o"))
    assert [e["job"]["name"] for e in client.events] == ["nightly_load", "nightly_load"]


def test_interleaved_save_as_table_of_two_threads_merge_each_write_with_its_own_table():
    """Thread A's and thread B's saveAsTable report nested write A, nested write B, then the
    wrappers: each wrapper takes the write into its own table, not the one reported just before it."""
    pipeline, client = _pipeline()
    nested_a = _capture(
        "file source write",
        6,
        "InsertIntoHadoopFsRelationCommand",
        table=None,
        path="file:/wh/sales",
        metrics={"numOutputRows": 5},
    )
    nested_b = _capture(
        "file source write",
        8,
        "InsertIntoHadoopFsRelationCommand",
        table=None,
        path="file:/wh/orders",
        metrics={"numOutputRows": 7},
    )
    wrapper_a = _capture("command", 5, "CreateDataSourceTableAsSelectCommand", table=TableRef("sales", "default"), path=None)
    wrapper_b = _capture("command", 7, "CreateDataSourceTableAsSelectCommand", table=TableRef("orders", "default"), path=None)
    for capture in (nested_a, nested_b, wrapper_a, wrapper_b):
        pipeline.handle(capture)
    completes = [e for e in client.events if e["eventType"] == "COMPLETE" and e["outputs"]]
    written = {
        e["outputs"][0]["facets"]["symlinks"]["identifiers"][0]["name"]: (
            e["outputs"][0]["name"],
            e["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"],
        )
        for e in completes
    }
    assert written == {"default.sales": ("/wh/sales", 5), "default.orders": ("/wh/orders", 7)}
    assert len(completes) == 2


def test_a_wrapper_knowing_its_location_wraps_only_the_write_to_that_location():
    nested = _capture("file source write", 6, "InsertIntoHadoopFsRelationCommand", table=None, path="file:/lake/t")
    assert wraps(5, RelationInfo(node_class="c", table=TableRef("t"), table_location="file:///lake/t/"), nested)
    assert not wraps(5, RelationInfo(node_class="c", table=TableRef("t"), table_location="file:/elsewhere/t"), nested)
    assert not wraps(7, RelationInfo(node_class="c", table=TableRef("t")), nested), "a wrapper runs before its nested write"
    assert wraps(5, RelationInfo(node_class="c", table=TableRef("T")), nested)
    assert not wraps(5, RelationInfo(node_class="c", table=TableRef("other")), nested)


def test_a_listener_call_carries_the_jvm_description_and_its_time_or_the_name_alone():
    from emitter.described import ListenerCall, parse_listener_call

    header = '{"root":"InsertIntoHadoopFsRelationCommand","id":7}\n[]\n{"plan":1}'
    assert parse_listener_call(f"command\x001500000\x00{header}") == ListenerCall("command", header, 1.5)
    assert parse_listener_call("command\x0042\x00@/tmp/spark-lineage-1.txt") == ListenerCall(
        "command", "@/tmp/spark-lineage-1.txt", 0.000042
    )
    assert parse_listener_call("file source write") == ListenerCall("file source write")
