"""A small sample PySpark pipeline: generated customers, orders and products, then a join, an
aggregate, a window, an explode, a Python UDF and a partitioned write.

Runs as an ordinary script would (`python -m emitter run demo/pipeline.py OUT_DIR`) or through
`run(spark, out_dir)` from the demo.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def build_session(app_name: str, warehouse: Path) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .getOrCreate()
    )


def run(spark: Any, out_dir: Path) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's own convention
    from pyspark.sql.types import StringType

    raw = out_dir / "raw"
    customers = spark.createDataFrame(
        [(1, "Ann Lee", "ann@example.com", "FR"), (2, "Bob Stone", "bob@shop.org", "NO"), (3, "Cy Park", "cy@example.com", "FR")],
        "customer_id long, name string, email string, country string",
    )
    products = spark.createDataFrame(
        [(100, "kettle", "kitchen,home", 25.0), (101, "lamp", "home", 40.0), (102, "pan", "kitchen", 18.5)],
        "product_id long, title string, tags string, price double",
    )
    orders = spark.createDataFrame(
        [
            (1000, 1, 100, 2, "2024-03-01"),
            (1001, 1, 101, 1, "2024-03-02"),
            (1002, 2, 102, 3, "2024-03-02"),
            (1003, 3, 100, 1, "2024-03-03"),
            (1004, 2, 101, 2, "2024-03-04"),
        ],
        "order_id long, customer_id long, product_id long, quantity int, order_date string",
    )
    for name, frame in (("customers", customers), ("products", products), ("orders", orders)):
        frame.write.mode("overwrite").parquet(str(raw / name))

    c = spark.read.parquet(str(raw / "customers"))
    p = spark.read.parquet(str(raw / "products"))
    o = spark.read.parquet(str(raw / "orders"))
    email_domain = F.udf(lambda email: email.split("@", 1)[1], StringType())

    sales = (
        o.join(c, "customer_id")
        .join(p, "product_id")
        .select(
            "order_id",
            "order_date",
            "country",
            email_domain("email").alias("email_domain"),
            F.upper("title").alias("product"),
            (F.col("quantity") * F.col("price")).alias("revenue"),
        )
    )
    sales.write.mode("overwrite").partitionBy("country").saveAsTable("sales")

    spark.sql(
        "CREATE TABLE revenue_by_country USING parquet AS "
        "SELECT country, sum(revenue) AS total_revenue, count(order_id) AS orders FROM sales GROUP BY country"
    )

    by_country = Window.partitionBy("country").orderBy(F.col("revenue").desc())
    (
        spark.table("sales")
        .withColumn("rank_in_country", F.rank().over(by_country))
        .select("order_id", "product", "rank_in_country")
        .write.mode("overwrite")
        .parquet(str(out_dir / "ranked_sales"))
    )

    (p.select("product_id", F.explode(F.split("tags", ",")).alias("tag")).write.mode("overwrite").saveAsTable("product_tags"))


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-output").resolve()
    session = build_session("demo pipeline", target / "warehouse")
    run(session, target)
    session.stop()
