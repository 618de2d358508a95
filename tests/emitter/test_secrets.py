"""No credential ever becomes part of a dataset name or leaves through a redacted string: every
JDBC dialect's way of carrying a user and password, and the secret spellings redaction knows."""

from __future__ import annotations

import pytest

from emitter.naming import dataset_name, jdbc_location, job_name
from emitter.redaction import REDACTED, redact, redact_text

SECRET = "hunter2"

# (JDBC URL as a user gives Spark, table option, expected (namespace, name))
DIALECTS = [
    (
        "jdbc:postgresql://etl:hunter2@db:5432/shop?user=etl&password=hunter2&sslmode=require",
        "public.orders",
        ("postgres://db:5432", "shop.public.orders"),
    ),
    ("jdbc:mysql://etl:hunter2@db:3306/shop?password=hunter2&useSSL=true", "orders", ("mysql://db:3306", "shop.orders")),
    ("jdbc:mariadb://db:3306/shop?user=etl&password=hunter2", "orders", ("mysql://db:3306", "shop.orders")),
    ("jdbc:oracle:thin:scott/hunter2@//ora:1521/sales", "hr.emp", ("oracle://ora:1521", "sales.hr.emp")),
    ("jdbc:oracle:thin:scott/hunter2@ora:1521:ORCL", "hr.emp", ("oracle://ora:1521", "ORCL.hr.emp")),
    (
        "jdbc:oracle:thin:scott/hunter2@(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=ora)(PORT=1521))"
        "(CONNECT_DATA=(SERVICE_NAME=sales)))",
        "hr.emp",
        ("oracle://ora:1521", "sales.hr.emp"),
    ),
    (
        "jdbc:teradata://td.example.com/USER=etl,PASSWORD=hunter2,DATABASE=sales",
        "orders",
        ("teradata://td.example.com", "sales.orders"),
    ),
    (
        "jdbc:teradata://td.example.com/DATABASE=sales,DBS_PORT=1025,PASSWORD=hunter2",
        "orders",
        ("teradata://td.example.com:1025", "sales.orders"),
    ),
    (
        "jdbc:sqlserver://mssql:1433;databaseName=shop;user=etl;password=hunter2;encrypt=true",
        "dbo.orders",
        ("mssql://mssql:1433", "shop.dbo.orders"),
    ),
    (
        "jdbc:sqlserver://;serverName=mssql;portNumber=1433;databaseName=shop;user=etl;Password=hunter2",
        "dbo.orders",
        ("mssql://mssql:1433", "shop.dbo.orders"),
    ),
    ("jdbc:db2://db2:50000/SAMPLE:user=etl;password=hunter2;", "s.orders", ("db2://db2:50000", "SAMPLE.s.orders")),
    (
        "jdbc:snowflake://acme-prod.snowflakecomputing.com/?user=etl&password=hunter2&db=SALES&schema=PUBLIC",
        "ORDERS",
        ("snowflake://acme-prod", "SALES.PUBLIC.ORDERS"),
    ),
    (
        "jdbc:redshift://c1.abc.us-east-1.redshift.amazonaws.com:5439/dev?user=etl&password=hunter2",
        "public.orders",
        ("redshift://c1.abc.us-east-1.redshift.amazonaws.com:5439", "dev.public.orders"),
    ),
    (
        "jdbc:redshift:iam://c1.abc.us-east-1.redshift.amazonaws.com:5439/dev?AccessKeyID=AKIA&SecretAccessKey=hunter2",
        "public.orders",
        ("redshift://c1.abc.us-east-1.redshift.amazonaws.com:5439", "dev.public.orders"),
    ),
    ("jdbc:h2:mem:shop;USER=sa;PASSWORD=hunter2", "orders", ("h2://", "shop.orders")),
]


@pytest.mark.parametrize(("url", "table", "expected"), DIALECTS, ids=[url.split(":")[1] for url, *_ in DIALECTS])
def test_each_jdbc_dialect_names_the_table_without_its_credentials(url, table, expected):
    location = jdbc_location(url, table)
    assert SECRET not in location
    assert dataset_name(location) == expected
    assert "etl" not in "".join(expected) and "scott" not in "".join(expected), "nor the user"


def test_a_jdbc_url_given_as_a_path_with_credentials_is_named_without_them():
    assert dataset_name("jdbc:postgresql://etl:hunter2@db:5432/shop/public.orders") == (
        "postgres://db:5432",
        "shop.public.orders",
    )
    assert dataset_name("jdbc:oracle:thin:scott/hunter2@//ora:1521/sales/hr.emp") == ("oracle://ora:1521", "sales.hr.emp")


@pytest.mark.parametrize(
    "uri",
    [
        "s3a://AKIA:hunter2@bucket/key",
        "hdfs://nn:8020/data/x;password=hunter2",
        "file:/data/token=hunter2/part",
        "custom://host/path?pwd=hunter2",
    ],
)
def test_every_name_goes_through_the_redaction(uri):
    namespace, name = dataset_name(uri)
    assert SECRET not in namespace + name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jdbc:oracle:thin:scott/hunter2@//h:1521/s", f"jdbc:oracle:thin:scott/{REDACTED}@//h:1521/s"),
        ("Login failed; pwd=hunter2; server=x", f"Login failed; pwd={REDACTED}; server=x"),
        ("PASSWD=hunter2,DATABASE=d", f"PASSWD={REDACTED},DATABASE=d"),
        ("/USER=u,PASSWORD=hunter2,DATABASE=d", f"/USER=u,PASSWORD={REDACTED},DATABASE=d"),
        ("Authorization=Bearer", f"Authorization={REDACTED}"),
        ("(user=u)(password=hunter2)", f"(user=u)(password={REDACTED})"),
        ("s3a://AKIA:hunter2@bucket/x", f"s3a://AKIA:{REDACTED}@bucket/x"),
        ("s3a://bucket/dir@2024/x", "s3a://bucket/dir@2024/x"),
    ],
)
def test_redaction_knows_the_spellings_of_a_secret(text, expected):
    assert redact_text(text) == expected


def test_redaction_masks_values_under_secret_looking_keys():
    assert redact({"spark.jdbc.pwd": "hunter2", "db.passwd": "x", "authHeader": "y", "user": "etl"}) == {
        "spark.jdbc.pwd": REDACTED,
        "db.passwd": REDACTED,
        "authHeader": REDACTED,
        "user": "etl",
    }


def test_a_job_named_after_its_output_location_carries_no_credential():
    assert SECRET not in job_name("etl", "SaveIntoDataSourceCommand", "//AKIA:hunter2@bucket/orders")
    assert SECRET not in job_name("etl", "SaveIntoDataSourceCommand", "oracle:thin:scott/hunter2@//ora:1521/sales")
