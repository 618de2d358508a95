"""One PySpark program, run both as a Spark Connect client and as a classic script, so that
the tests can compare the lineage the server emits with the classic session's.

    python client_program.py sc://127.0.0.1:PORT DATA_DIR APP NAMESPACE STEP...   (Connect client)
    python -m emitter run client_program.py local DATA_DIR APP NAMESPACE STEP...   (classic)

STEP: `batch` (saveAsTable, CTAS, insertInto, a path write), `analytics` (a join, an aggregate
and a window), `stream` (a file stream through foreachBatch into a table). Table names are
prefixed with APP, so that clients running at once on one server never share a table.
Imports only PySpark: a Connect client needs nothing of this project.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.window import Window


def session(where: str, data_dir: str, app: str, namespace: str) -> SparkSession:
    builder = SparkSession.builder.appName(app).config("spark.openlineage.namespace", namespace)
    if where == "local":
        builder = (
            builder.master("local[2]")
            .config("spark.sql.warehouse.dir", os.path.join(data_dir, "warehouse"))
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
        )
    else:
        builder = builder.remote(where)
    return builder.getOrCreate()


def batch(spark: SparkSession, data_dir: str, app: str) -> None:
    customers = spark.createDataFrame(
        [(1, "ann", "fr", 31), (2, "bob", "de", 45), (3, "cy", "fr", 27)], "id INT, name STRING, country STRING, age INT"
    )
    customers.write.mode("overwrite").saveAsTable(f"{app}_customers")
    spark.sql(
        f"CREATE TABLE {app}_upper USING parquet AS SELECT id, upper(name) AS uname, age + 1 AS next_age FROM {app}_customers"
    )
    spark.table(f"{app}_customers").where("age > 30").select(
        "id", sf.concat_ws("-", "name", "country").alias("uname"), "age"
    ).write.insertInto(f"{app}_upper")
    spark.table(f"{app}_upper").select((sf.col("next_age") * 2).alias("twice")).write.mode("overwrite").parquet(
        os.path.join(data_dir, f"{app}_twice")
    )


def analytics(spark: SparkSession, data_dir: str, app: str) -> None:
    orders = spark.createDataFrame(
        [(10, 1, 5.0), (11, 1, 7.5), (12, 2, 3.0), (13, 3, 9.0)], "order_id INT, customer_id INT, amount DOUBLE"
    )
    orders.write.mode("overwrite").saveAsTable(f"{app}_orders")
    customers = spark.table(f"{app}_customers")
    revenue = (
        spark.table(f"{app}_orders")
        .join(customers, sf.col("customer_id") == sf.col("id"))
        .groupBy("country", "name")
        .agg(sf.sum("amount").alias("revenue"))
    )
    ranked = revenue.withColumn("rank", sf.rank().over(Window.partitionBy("country").orderBy(sf.desc("revenue"))))
    ranked.write.mode("overwrite").saveAsTable(f"{app}_ranked")


def stream(spark: SparkSession, data_dir: str, app: str) -> None:
    source = os.path.join(data_dir, f"{app}_events")
    os.makedirs(source, exist_ok=True)
    for n in range(2):
        with open(os.path.join(source, f"part-{n}.json"), "w") as part:
            part.write(json.dumps({"n": n, "label": f"e{n}"}) + "\n")
    target = f"{app}_stream_sink"

    def write_batch(frame, batch_id):  # type: ignore[no-untyped-def]
        frame.select((sf.col("n") * 10).alias("n10"), sf.upper("label").alias("label")).write.mode("append").saveAsTable(target)

    writer = (
        spark.readStream.schema("n INT, label STRING")
        .option("maxFilesPerTrigger", 1)
        .json(source)
        .writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", os.path.join(data_dir, f"{app}_checkpoint"))
        .trigger(availableNow=True)
    )
    query = start_with_retries(writer)
    query.awaitTermination()
    print("stream rows", spark.table(target).count())


WORKER_STARTS = 3


def start_with_retries(writer):  # type: ignore[no-untyped-def]
    """`writer.start()`; on Spark Connect the server first starts the foreachBatch function's
    Python worker, which Spark gives a fixed 10 s to connect back: on a busy machine that can
    run out, and the start is tried again (nothing of the query has run then)."""
    for attempt in range(WORKER_STARTS):
        try:
            return writer.start()
        except Exception as error:
            if "failed to connect back" not in str(error) or attempt == WORKER_STARTS - 1:
                raise
            print("retrying the start:", str(error).splitlines()[0], file=sys.stderr)
    raise AssertionError("unreachable")


STEPS = {"batch": batch, "analytics": analytics, "stream": stream}


def main(argv: list[str]) -> None:
    where, data_dir, app, namespace, *steps = argv
    spark = session(where, data_dir, app, namespace)
    print("session", getattr(spark, "session_id", "classic"), flush=True)
    for step in steps:
        STEPS[step](spark, data_dir, app)
    print("done", app)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
