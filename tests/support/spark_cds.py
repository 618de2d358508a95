"""A class-data-sharing archive for the tests' Spark drivers: `python -m tests.support.spark_cds ARCHIVE`.

The suite starts some twenty Spark drivers (the shared sessions and the scripts the tests run), and
a fresh JVM spends much of a small job loading and verifying Spark's classes. A dynamic CDS archive
(`-XX:ArchiveClassesAtExit`) of the classes one representative job loaded lets every later JVM map
them instead: a small job's driver starts and runs in about half the wall time.

`./run tests` makes one per virtualenv (PySpark 4 and 3.5 load different jars) and names it in
`LINEAGE_TEST_SPARK_CDS`, which `tests.support.spark` adds to the drivers' Java options. The archive
is made again when PySpark or Java changes; a JVM that finds it unusable ignores it and runs as
without. Nothing of the product depends on it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from tests.support.paths import PROJECT_ROOT

JOB = """
import sys
import emitter
from tests.support.spark import DRIVER_JIT_OPTIONS, spark_builder
from pathlib import Path

work = Path(sys.argv[1])
work.mkdir(parents=True, exist_ok=True)
options = DRIVER_JIT_OPTIONS + " -XX:ArchiveClassesAtExit=" + sys.argv[2]
spark = spark_builder("class data sharing", work / "warehouse").config("spark.driver.extraJavaOptions", options).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
emitter.attach(spark, {"transport": {"type": "file", "log_file_path": str(work / "events.jsonl"), "append": True}})
frame = spark.range(20).selectExpr("id", "cast(id % 3 AS string) AS key", "id * 1.5 AS amount")
frame.write.parquet(str(work / "parquet"))
frame.write.json(str(work / "json"))
frame.write.partitionBy("key").parquet(str(work / "partitioned"))
frame.write.saveAsTable("saved")
spark.sql("CREATE TABLE totals USING parquet AS SELECT key, sum(amount) AS total FROM saved GROUP BY key")
joined = spark.read.parquet(str(work / "parquet")).join(spark.read.json(str(work / "json")).select("id"), "id")
joined.groupBy("key").count().write.mode("overwrite").parquet(str(work / "counts"))
spark.sql("INSERT INTO totals SELECT key, max(amount) FROM saved GROUP BY key")
spark.table("totals").collect()
spark.stop()
"""


def java_version() -> str:
    return subprocess.run(["java", "-version"], capture_output=True, text=True, check=True).stderr.strip()


def archive_key() -> str:
    import pyspark

    return f"pyspark {pyspark.__version__} ({Path(pyspark.__file__).parent})\n{java_version()}\n"


def ensure_archive(archive: Path) -> None:
    """Make `archive` unless one made by this PySpark and Java is there."""
    key_file = archive.with_name(archive.name + ".key")
    key = archive_key()
    if archive.is_file() and key_file.is_file() and key_file.read_text() == key:
        return
    archive.unlink(missing_ok=True)
    key_file.unlink(missing_ok=True)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        partial = archive.with_name(archive.name + ".partial")
        partial.unlink(missing_ok=True)
        made = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(JOB), work, str(partial)],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if made.returncode != 0:
            raise RuntimeError(f"the archive's job failed:\n{made.stdout[-3000:]}\n{made.stderr[-3000:]}")
        if not partial.is_file():
            raise RuntimeError(f"the JVM wrote no archive at {partial}")
        partial.replace(archive)
    key_file.write_text(key)


if __name__ == "__main__":
    ensure_archive(Path(sys.argv[1]).resolve())
