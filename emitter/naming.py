"""Names: datasets by the OpenLineage naming spec, jobs as `{appName}.{command}.{output}`.

https://openlineage.io/docs/spec/naming: a local file is namespace `file` + absolute path;
HDFS is `hdfs://{namenode}:{port}` + path; S3 is `s3://{bucket}` + key (s3a/s3n are the same
store); GCS `gs://{bucket}`; Azure `abfss://{container}@{account}...` + path; Kafka
`kafka://{host}:{port}` of the first bootstrap server + topic.

Streaming sources known only by their options (Kafka, socket, rate, Python data sources) get
URIs from `stream_source_uris`, which `dataset_name` reads back like any storage URI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from emitter.redaction import redact_text

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
BUCKET_SCHEMES = S3_SCHEMES | {"gs", "wasbs", "wasb", "abfs", "abfss", "oss", "cos"}
AZURE_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})  # container@account is no credential
JDBC_SCHEMES = {"postgresql": "postgres", "sqlserver": "mssql", "mariadb": "mysql"}
LOCAL_SCHEMES = frozenset({"", "file", "local"})
KAFKA_SCHEME = "kafka"
# The relation options naming a streaming dataset: all a listener keeps (never credentials).
# The only data source options read out of the JVM: those that name a dataset (lowercase;
# Spark's option keys are case-insensitive). Never anything secret-like.
NAMING_OPTIONS = frozenset(
    {"kafka.bootstrap.servers", "subscribe", "subscribepattern", "assign", "topic", "path", "host", "port"}
    | {"url", "dbtable", "query"}  # JDBC
)
_NOT_SCHEME = re.compile(r"[^0-9a-z+.-]+")
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of a storage location given as a URI or an absolute local path; never
    a credential (user:password@, JDBC properties, `password=` anywhere: emitter.redaction)."""
    namespace, name = _dataset_name(uri)
    return redact_text(namespace), redact_text(name)


def _dataset_name(uri: str) -> tuple[str, str]:
    if uri.startswith("jdbc:"):
        return _jdbc_name(uri[len("jdbc:") :])
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    path = unquote(parts.path)
    if scheme in LOCAL_SCHEMES:
        return "file", _strip_trailing_slash(path or "/")
    host = parts.netloc if scheme in AZURE_SCHEMES else _host_without_credentials(parts.netloc)
    if scheme == KAFKA_SCHEME:
        return f"kafka://{host}", path[1:] if path.startswith("/") else path
    if scheme in BUCKET_SCHEMES:
        namespace_scheme = "s3" if scheme in S3_SCHEMES else scheme
        return f"{namespace_scheme}://{host}", path.lstrip("/") or "/"
    authority = f"://{host}" if host else ""
    return f"{scheme}{authority}", _strip_trailing_slash(path or "/")


def jdbc_location(url: str, table: str) -> str:
    """The location of table `table` of JDBC database `url`, credentials already left out:
    `dataset_name` reads it back as the table's (namespace, name)."""
    namespace, database = _jdbc_name(url[len("jdbc:") :] if url.startswith("jdbc:") else url)
    segments = [segment for segment in (database, table.strip()) if segment]
    return f"jdbc:{namespace}/{'/'.join(segments)}"


def _jdbc_name(url: str) -> tuple[str, str]:
    """(namespace, name) of a JDBC URL (without `jdbc:`) by the naming spec, whatever the dialect
    puts where: never a user, password or any other connection property. The path segments after
    the database (`jdbc_location`'s table) are part of the name."""
    subprotocol = url.split(":", 1)[0].lower()
    parse = _JDBC_DIALECTS.get(subprotocol, _generic_jdbc)
    scheme, host, parts = parse(url)
    return f"{JDBC_SCHEMES.get(scheme, scheme)}://{host}", ".".join(part for part in parts if part)


def _generic_jdbc(url: str) -> tuple[str, str, list[str]]:
    """`sub[:driver]://[user[:password]@]host[:port]/database[/table][?props][;props]` (PostgreSQL,
    MySQL, MariaDB, Redshift, ...)."""
    scheme = url.split(":", 1)[0].lower()
    rest = url[url.index("//") :] if "//" in url else url[len(scheme) + 1 :]
    parts = urlsplit(rest.split(";", 1)[0])
    segments = [segment for segment in unquote(parts.path).split("/") if segment]
    return scheme, _host_without_credentials(parts.netloc), segments


def _sqlserver_jdbc(url: str) -> tuple[str, str, list[str]]:
    """`sqlserver://host[\\instance][:port][/table];databaseName=db;user=u;password=p`."""
    first, *pairs = url.split(";")
    props = _properties(pairs)
    parts = urlsplit(first[first.index("//") :] if "//" in first else "//")
    host = _host_without_credentials(parts.netloc) or props.get("servername", "")
    if props.get("portnumber") and ":" not in host:
        host = f"{host}:{props['portnumber']}"
    database = props.get("databasename") or props.get("database", "")
    return "mssql", host, [database, *(segment for segment in unquote(parts.path).split("/") if segment)]


def _oracle_jdbc(url: str) -> tuple[str, str, list[str]]:
    """`oracle:thin:[user/password]@//host:port/service[/table]`, `...@host:port:SID`, or a
    `(DESCRIPTION=(ADDRESS=(HOST=h)(PORT=p))(CONNECT_DATA=(SERVICE_NAME=s)))` descriptor; or
    `oracle://host:port/service/table`, as `jdbc_location` writes it."""
    if url.lower().startswith("oracle://"):
        return _generic_jdbc(url)
    target = url.rsplit("@", 1)[1] if "@" in url else url.split(":", 2)[-1]
    target = target.split("?", 1)[0]
    if target.lstrip().startswith("("):
        described = {key.lower(): value for key, value in _DESCRIPTOR_VALUE.findall(target)}
        host = described.get("host", "") + (f":{described['port']}" if described.get("port") else "")
        table = target.rsplit(")", 1)[1].strip("/") if ")" in target else ""
        return "oracle", host, [described.get("service_name") or described.get("sid", ""), *table.split("/")]
    target = target.lstrip("/")
    host_port, _, path = target.partition("/")
    host, port, sid = (host_port.split(":") + ["", ""])[:3]
    segments = [segment for segment in path.split("/") if segment]
    authority = f"{host}:{port}" if port else host
    return "oracle", authority, [sid, *segments] if sid else segments


def _teradata_jdbc(url: str) -> tuple[str, str, list[str]]:
    """`teradata://host[/table]/PARAM=value,PARAM=value` (USER, PASSWORD, DATABASE, DBS_PORT ...)."""
    parts = urlsplit(url[url.index("//") :] if "//" in url else "//")
    segments = [segment for segment in unquote(parts.path).split("/") if segment]
    params = [segment for segment in segments if "=" in segment]
    props = _properties(",".join(params).split(","))
    host = _host_without_credentials(parts.netloc)
    if props.get("dbs_port") and ":" not in host:
        host = f"{host}:{props['dbs_port']}"
    return "teradata", host, [props.get("database", ""), *(segment for segment in segments if "=" not in segment)]


def _db2_jdbc(url: str) -> tuple[str, str, list[str]]:
    """`db2://host:port/database[/table]:prop=value;prop=value;`."""
    scheme, host, segments = _generic_jdbc(url)
    return scheme, host, [segment.split(":", 1)[0] for segment in segments]


def _snowflake_jdbc(url: str) -> tuple[str, str, list[str]]:
    """`snowflake://account.snowflakecomputing.com/[table]?db=D&schema=S&user=u&password=p`."""
    parts = urlsplit(url[url.index("//") :] if "//" in url else "//")
    props = {key.lower(): value for key, value in parse_qsl(parts.query)}
    account = _host_without_credentials(parts.netloc).split(":", 1)[0].split(".", 1)[0]
    tables = [segment for segment in unquote(parts.path).split("/") if segment]
    return "snowflake", account, [props.get("db", ""), props.get("schema", ""), *tables]


def _properties(pairs: list[str]) -> dict[str, str]:
    """`key=value` pieces, keys lowercased."""
    return {key.strip().lower(): value.strip() for key, _, value in (pair.partition("=") for pair in pairs) if key.strip()}


_DESCRIPTOR_VALUE = re.compile(r"\((HOST|PORT|SERVICE_NAME|SID)\s*=\s*([^)\s]+)\)", re.IGNORECASE)
_JDBC_DIALECTS = {
    "sqlserver": _sqlserver_jdbc,
    "oracle": _oracle_jdbc,
    "teradata": _teradata_jdbc,
    "db2": _db2_jdbc,
    "snowflake": _snowflake_jdbc,
}


def _host_without_credentials(netloc: str) -> str:
    """Names never carry credentials (user:password@host, user/password@host)."""
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
    the whole name and bypasses this function). `output` (a location) loses its credentials first."""
    parts = [normalize(app_name) or "spark", normalize(snake_case(command)), normalize(redact_text(output))]
    return ".".join(part for part in parts if part)


def naming_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options `stream_source_uris` reads, keys lowercased (Spark's are case-insensitive)."""
    return {key.lower(): str(value) for key, value in options.items() if key.lower() in NAMING_OPTIONS}


def stream_source_uris(source_name: str, options: Mapping[str, str]) -> tuple[str, ...]:
    """URIs of the datasets a streaming source or sink reads or writes, from its short name
    (`kafka`, `socket`, `rate`, a Python data source's `name()`) and options; () when the
    options do not say (a Kafka sink taking the topic from a column).

    - Kafka: `kafka://{first bootstrap server}/{topic}`, one per topic of `subscribe` (a comma
      list) or `assign` (JSON `{"topic": [partitions]}`); the pattern itself for
      `subscribePattern`; the `topic` option of a sink.
    - a `path` option: that location (a Python data source reading files).
    - socket: `socket://{host}:{port}`.
    - anything else generates its rows: `{name}:{name}`, i.e. namespace and name both the
      source's short name (`rate`).
    """
    keyed = naming_options(options)
    name = source_name.strip().lower()
    if name == KAFKA_SCHEME:
        return kafka_uris(keyed)
    if keyed.get("path"):
        return (keyed["path"],)
    if name == "socket" and keyed.get("host"):
        port = f":{keyed['port']}" if keyed.get("port") else ""
        return (f"socket://{keyed['host']}{port}",)
    scheme = _NOT_SCHEME.sub("-", name).strip("-.+")
    return (f"{scheme}:{scheme}",) if scheme and scheme[0].isalpha() else ()


def kafka_uris(options: Mapping[str, str]) -> tuple[str, ...]:
    servers = [server.strip() for server in options.get("kafka.bootstrap.servers", "").split(",") if server.strip()]
    if not servers:
        return ()
    server = servers[0].rsplit("://", 1)[-1]  # a listener-style `PLAINTEXT://host:port`
    return tuple(f"kafka://{server}/{quote(topic, safe='')}" for topic in _kafka_topics(options))


def _kafka_topics(options: Mapping[str, str]) -> tuple[str, ...]:
    if options.get("subscribe"):
        topics = [topic.strip() for topic in options["subscribe"].split(",")]
    elif options.get("assign"):
        try:
            assigned = json.loads(options["assign"])
        except ValueError:
            return ()
        topics = [str(topic) for topic in assigned] if isinstance(assigned, dict) else []
    elif options.get("subscribepattern"):
        topics = [options["subscribepattern"].strip()]
    else:
        topics = [options.get("topic", "").strip()]
    return tuple(dict.fromkeys(topic for topic in topics if topic))
