"""Names: datasets by the OpenLineage naming spec, jobs as `{appName}.{command}.{output}`.

https://openlineage.io/docs/spec/naming: a local file is namespace `file` + absolute path;
HDFS is `hdfs://{namenode}:{port}` + path; S3 is `s3://{bucket}` + key (s3a/s3n are the same
store); GCS `gs://{bucket}`; Azure `abfss://{container}@{account}...` + path.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
BUCKET_SCHEMES = S3_SCHEMES | {"gs", "wasbs", "wasb", "abfs", "abfss", "oss", "cos"}
AZURE_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})  # container@account is no credential
JDBC_SCHEMES = {"postgresql": "postgres"}
LOCAL_SCHEMES = frozenset({"", "file", "local"})
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of a storage location given as a URI or an absolute local path."""
    if uri.startswith("jdbc:"):
        return _jdbc_name(uri[len("jdbc:"):])
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    path = unquote(parts.path)
    if scheme in LOCAL_SCHEMES:
        return "file", _strip_trailing_slash(path or "/")
    host = parts.netloc if scheme in AZURE_SCHEMES else _host_without_credentials(parts.netloc)
    if scheme in BUCKET_SCHEMES:
        namespace_scheme = "s3" if scheme in S3_SCHEMES else scheme
        return f"{namespace_scheme}://{host}", path.lstrip("/") or "/"
    authority = f"://{host}" if host else ""
    return f"{scheme}{authority}", _strip_trailing_slash(path or "/")


def _jdbc_name(url: str) -> tuple[str, str]:
    """jdbc:postgresql://host:port/db + /table -> (postgres://host:port, db.table)."""
    parts = urlsplit(url.split(";", 1)[0])
    scheme = JDBC_SCHEMES.get(parts.scheme.lower(), parts.scheme.lower())
    segments = [segment for segment in unquote(parts.path).split("/") if segment]
    return f"{scheme}://{_host_without_credentials(parts.netloc)}", ".".join(segments)


def _host_without_credentials(netloc: str) -> str:
    """Names never carry credentials (user:password@host)."""
    return netloc.rsplit("@", 1)[-1]


def _strip_trailing_slash(path: str) -> str:
    return path.rstrip("/") or "/"


def table_namespace(warehouse_dir: str, metastore_uri: str | None) -> str:
    """Namespace of catalog table symlinks: the Hive metastore when there is one, else the warehouse."""
    if metastore_uri:
        first = metastore_uri.split(",")[0].strip()
        parts = urlsplit(first)
        return f"hive://{parts.netloc}" if parts.netloc else first
    if not warehouse_dir:
        return "spark_catalog"
    parts = urlsplit(warehouse_dir)
    if parts.scheme.lower() in LOCAL_SCHEMES:
        return "file:" + _strip_trailing_slash(unquote(parts.path) or "/")
    return _strip_trailing_slash(warehouse_dir)


def snake_case(class_name: str) -> str:
    return _CAMEL_BOUNDARY.sub("_", class_name).lower()


def normalize(part: str) -> str:
    """Lowercase, every run of non-alphanumerics one `_`, none at the ends."""
    return _NOT_ALNUM.sub("_", part.lower()).strip("_")


def job_name(app_name: str, command: str, output: str) -> str:
    """`{app}.{command}.{output}`, each part normalized. `app_name` is the Spark app name, or the
    `spark.openlineage.jobName` conf when set (it replaces only this part; `fullJobName` replaces
    the whole name and bypasses this function)."""
    parts = [normalize(app_name) or "spark", normalize(snake_case(command)), normalize(output)]
    return ".".join(part for part in parts if part)
