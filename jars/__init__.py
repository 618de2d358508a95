"""The Maven artifacts the tests, benchmarks and local images run, fetched one way.

`jars/pom.xml` pins every version and holds one profile per set (``kafka``: Apache Kafka's broker).
Maven resolves a set through this machine's own Maven configuration (its mirrors and proxies) into
Maven's local repository, the cache; the resolved classpath is remembered under ``.run/jars`` per
version of the pom, so a second call starts no Maven at all.

    python -m jars classpath kafka      # prints the set's classpath (resolving it first)
    python -m jars copy kafka DIR       # copies the set's jars into DIR (container images)
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
POM = Path(__file__).resolve().parent / "pom.xml"
CACHE = PROJECT_ROOT / ".run" / "jars"
SETS = (
    "kafka",
    "iceberg-spark-3.5",
    "iceberg-spark-4.1",
    "delta-spark-3.5",
    "openlineage-spark_2.12",
    "openlineage-spark_2.13",
    "spark-sql-kafka-3.5",
    "spark-sql-kafka-4.3",
)


class JarsUnavailable(RuntimeError):
    """A jar set cannot be resolved: no Maven, or the registry refused an artifact."""


def classpath(jar_set: str) -> str:
    """The `os.pathsep`-joined jars of `jar_set`, resolved by Maven on first use."""
    remembered = _remembered(jar_set)
    if remembered.is_file():
        jars = remembered.read_text().strip()
        if jars and all(Path(jar).is_file() for jar in jars.split(":")):
            return jars
    remembered.parent.mkdir(parents=True, exist_ok=True)
    _maven(jar_set, "dependency:build-classpath", f"-Dmdep.outputFile={remembered}")
    return remembered.read_text().strip()


def copy(jar_set: str, destination: Path) -> list[Path]:
    """Copy `jar_set`'s jars into `destination` (created), returning the copies."""
    destination.mkdir(parents=True, exist_ok=True)
    copies = []
    for jar in classpath(jar_set).split(":"):
        copies.append(Path(shutil.copy2(jar, destination)))
    return copies


def _remembered(jar_set: str) -> Path:
    if jar_set not in SETS:
        raise JarsUnavailable(f"unknown jar set {jar_set!r}; jars/pom.xml has {', '.join(SETS)}")
    pom_version = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    return CACHE / f"{jar_set}-{pom_version}.classpath"


def _maven(jar_set: str, *goal: str) -> None:
    maven = shutil.which("mvn")
    if maven is None:
        raise JarsUnavailable(f"Maven (mvn) is not installed: it fetches the {jar_set!r} jars (apt-get install maven)")
    completed = subprocess.run(  # noqa: S603 - mvn from PATH with fixed arguments, no shell
        [maven, "-q", "-B", "-f", str(POM), "-P", jar_set, *goal],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        output = (completed.stdout + completed.stderr).strip().splitlines()
        errors = [line for line in output if "ERROR" in line][:5] or output[-5:]
        raise JarsUnavailable(f"Maven could not resolve the {jar_set!r} jars:\n" + "\n".join(errors))
