"""`docker compose config` of the public docker-compose.yml and of it with the local override
(deploy/compose.local.yml): both must parse, and the override must change only what the local
variant needs; both run the same Apache Kafka, at the version jars/pom.xml pins, with the same
settings. Needs the `docker compose` plugin (./run tests installs it): missing is a failure."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from consumer.settings import documented_options

ROOT = Path(__file__).resolve().parents[2]
OVERRIDE = "deploy/compose.local.yml"
TOKEN = "3d9f1a7c5e2b8d4f6a0c9e1b7d3f5a2c"
# the broker settings that are addresses: the local variant's own (loopback, ports of its own)
BROKER_ADDRESSES = ("KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS", "KAFKA_CONTROLLER_QUORUM_VOTERS")


def _config(*files: str, env: dict[str, str] | None = None) -> dict:
    assert shutil.which("docker"), "the docker CLI is missing (./run tests installs it)"
    arguments = [part for name in files for part in ("-f", name)]
    environment = {name: value for name, value in os.environ.items() if not name.startswith(("STACK_", "LINEAGE_"))}
    environment |= {"LINEAGE_API_TOKEN": TOKEN} if env is None else env
    result = subprocess.run(
        ["docker", "compose", *arguments, "--profile", "jobs", "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )
    assert result.returncode == 0, f"docker compose config failed:\n{result.stderr}"
    return yaml.safe_load(result.stdout)


def _config_error(*files: str) -> str:
    environment = {name: value for name, value in os.environ.items() if not name.startswith(("STACK_", "LINEAGE_"))}
    result = subprocess.run(
        ["docker", "compose", *[part for name in files for part in ("-f", name)], "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )
    assert result.returncode != 0
    return result.stderr


def _listeners(value: str) -> dict[str, str]:
    """`NAME://host:port,...` (a listener setting) as {NAME: "host:port"}."""
    return dict(listener.split("://") for listener in value.split(","))


def _pinned_kafka_version() -> str:
    """Apache Kafka's version in jars/pom.xml, where the project pins it (deploy/local-images.sh
    tags the local image with it the same way)."""
    pinned = re.search(r"<kafka.version>(.+?)</kafka.version>", (ROOT / "jars" / "pom.xml").read_text())
    assert pinned, "jars/pom.xml pins no kafka.version"
    return pinned.group(1)


@pytest.fixture(scope="module")
def public() -> dict:
    return _config("docker-compose.yml")


@pytest.fixture(scope="module")
def local() -> dict:
    return _config("docker-compose.yml", OVERRIDE)


def test_public_file_uses_public_images_and_our_dockerfiles(public: dict) -> None:
    services = public["services"]
    assert set(services) == {"kafka", "postgres", "consumer", "web", "spark-job"}
    assert services["kafka"]["image"].startswith("apache/kafka")
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["web"]["image"].startswith("marquezproject/marquez-web")
    assert services["consumer"]["build"]["dockerfile"] == "deploy/consumer.Dockerfile"
    assert services["spark-job"]["build"]["dockerfile"] == "deploy/spark-job.Dockerfile"
    assert not any(service.get("network_mode") == "host" for service in services.values())


def test_public_kafka_is_reachable_from_the_containers_and_from_the_host(public: dict) -> None:
    kafka = public["services"]["kafka"]
    advertised = dict(listener.split("://") for listener in kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert advertised["PLAINTEXT"] == "kafka:9092"
    host_port = advertised["HOST"].rsplit(":", 1)[1]
    container_port = kafka["environment"]["KAFKA_LISTENERS"].split("HOST://:")[1].split(",")[0]
    assert [(str(port["published"]), str(port["target"])) for port in kafka["ports"]] == [(host_port, container_port)]


def test_every_port_is_published_on_loopback_only_and_the_api_needs_a_token(public: dict) -> None:
    for name in ("kafka", "consumer", "web"):
        for port in public["services"][name]["ports"]:
            assert port["host_ip"] == "127.0.0.1", (name, port)
    consumer = public["services"]["consumer"]["environment"]
    assert consumer["LINEAGE_API_TOKEN"] == TOKEN
    assert "LINEAGE_API_TOKEN" in _config_error("docker-compose.yml"), "no token: compose refuses to start"


def test_images_are_pinned(public: dict) -> None:
    for name, service in public["services"].items():
        if "image" in service:
            tag = service["image"].rpartition(":")[2]
            assert tag != "latest" and any(c.isdigit() for c in tag) and "." in tag, (name, service["image"])
    for dockerfile in ("consumer.Dockerfile", "spark-job.Dockerfile"):
        text = (ROOT / "deploy" / dockerfile).read_text()
        base = next(line for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
        assert base.count(".") >= 2 and ":latest" not in base, base
        assert "\nUSER 10001" in text, f"{dockerfile}: runs as an unprivileged user"


def test_local_variant_uses_host_networking_and_local_images_only(local: dict) -> None:
    script = (ROOT / "deploy" / "local-images.sh").read_text()
    for name, service in local["services"].items():
        assert service.get("network_mode") == "host", name
        assert not service.get("ports"), f"{name}: published ports mean nothing with host networking"
        assert service["image"].startswith("lineage-local/"), name
        assert service.get("pull_policy") == "never", name
        assert service["image"].split(":")[0].removeprefix("lineage-local/") in script, f"{name}: image not built by the script"


def test_local_variant_keeps_every_service_on_loopback(local: dict) -> None:
    services = local["services"]
    assert services["consumer"]["environment"]["LINEAGE_HOST"] == "127.0.0.1"
    assert services["consumer"]["environment"]["KAFKA_BOOTSTRAP_SERVERS"].startswith("127.0.0.1:")
    assert "@127.0.0.1:" in services["consumer"]["environment"]["LINEAGE_STORE_URL"]
    kafka = services["kafka"]["environment"]
    for name in ("KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS"):
        assert all(address.startswith("127.0.0.1:") for address in _listeners(kafka[name]).values()), kafka[name]
    assert kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith("1@127.0.0.1:")
    assert services["spark-job"]["environment"]["OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS"].startswith("127.0.0.1:")
    assert services["web"]["environment"]["MARQUEZ_HOST"] == "127.0.0.1"


def test_local_variant_builds_on_local_bases_and_keeps_the_public_dockerfiles(local: dict, public: dict) -> None:
    for name in ("consumer", "spark-job"):
        assert local["services"][name]["build"]["dockerfile"] == public["services"][name]["build"]["dockerfile"]
        assert local["services"][name]["build"]["args"]["BASE_IMAGE"].startswith("lineage-local/")


def test_consumer_environment_names_are_consumer_settings(local: dict, public: dict) -> None:
    known = {env for _, env, _, _ in documented_options()}
    for config in (public, local):
        assert set(config["services"]["consumer"]["environment"]) <= known


def test_local_ports_default_to_their_documented_values(local: dict) -> None:
    services = local["services"]
    assert _listeners(services["kafka"]["environment"]["KAFKA_LISTENERS"]) == {
        "PLAINTEXT": "127.0.0.1:59092",
        "CONTROLLER": "127.0.0.1:59093",
    }
    assert services["postgres"]["environment"]["PGPORT"] == "55432"
    assert services["consumer"]["environment"]["LINEAGE_PORT"] == "55000"
    assert services["web"]["environment"]["WEB_PORT"] == "53000"


def test_each_local_port_moves_everywhere_it_is_used() -> None:
    """./run stack moves a port that is taken: every service, healthcheck and URL naming it must follow."""
    moved = {
        "STACK_BROKER_PORT": "41001",
        "STACK_POSTGRES_PORT": "41002",
        "STACK_API_PORT": "41003",
        "STACK_WEB_PORT": "41004",
        "STACK_CONTROLLER_PORT": "41005",
    }
    moved |= {"LINEAGE_API_TOKEN": TOKEN}
    services = _config("docker-compose.yml", OVERRIDE, env=moved)["services"]
    text = yaml.safe_dump(services)
    for default in ("59092", "59093", "55432", "55000", "53000"):
        assert default not in text, f"port {default} is fixed somewhere"
    broker, postgres, api, web, controller = (
        moved[name]
        for name in ("STACK_BROKER_PORT", "STACK_POSTGRES_PORT", "STACK_API_PORT", "STACK_WEB_PORT", "STACK_CONTROLLER_PORT")
    )
    kafka = services["kafka"]["environment"]
    assert _listeners(kafka["KAFKA_LISTENERS"]) == {"PLAINTEXT": f"127.0.0.1:{broker}", "CONTROLLER": f"127.0.0.1:{controller}"}
    assert _listeners(kafka["KAFKA_ADVERTISED_LISTENERS"]) == {"PLAINTEXT": f"127.0.0.1:{broker}"}
    assert kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"1@127.0.0.1:{controller}"
    assert f"127.0.0.1:{broker}" in services["kafka"]["healthcheck"]["test"]
    assert services["consumer"]["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == f"127.0.0.1:{broker}"
    assert services["spark-job"]["environment"]["OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS"] == f"127.0.0.1:{broker}"
    assert services["postgres"]["environment"]["PGPORT"] == postgres and postgres in services["postgres"]["healthcheck"]["test"]
    assert f"@127.0.0.1:{postgres}/" in services["consumer"]["environment"]["LINEAGE_STORE_URL"]
    assert services["consumer"]["environment"]["LINEAGE_PORT"] == api == services["web"]["environment"]["MARQUEZ_PORT"]
    assert services["web"]["environment"]["WEB_PORT"] == web


def test_both_stacks_run_the_apache_kafka_version_the_project_pins(local: dict, public: dict) -> None:
    version = _pinned_kafka_version()
    assert public["services"]["kafka"]["image"] == f"apache/kafka:{version}"
    assert local["services"]["kafka"]["image"] == f"lineage-local/kafka:{version}"


def test_both_stacks_give_the_broker_the_same_settings(local: dict, public: dict) -> None:
    """The public broker's settings are the ones ./run stack proves: the local variant keeps every
    one and changes only the addresses (host networking: one loopback listener serves the
    containers and the host, so it has no separate HOST listener)."""
    ours, theirs = (config["services"]["kafka"]["environment"] for config in (local, public))
    assert set(ours) == set(theirs)
    assert all(name == "CLUSTER_ID" or name.startswith("KAFKA_") for name in theirs), "only what the image reads"
    assert {name: ours[name] for name in ours if name not in BROKER_ADDRESSES} == {
        name: theirs[name] for name in theirs if name not in BROKER_ADDRESSES
    }
    for name in ("KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS"):
        assert set(_listeners(ours[name])) <= set(_listeners(theirs[name])), name
    assert ours["KAFKA_CONTROLLER_QUORUM_VOTERS"].split("@")[0] == theirs["KAFKA_CONTROLLER_QUORUM_VOTERS"].split("@")[0]
    for settings in (ours, theirs):
        listeners = set(_listeners(settings["KAFKA_LISTENERS"]))
        protocols = dict(item.split(":") for item in settings["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        assert listeners <= set(protocols), "every listener has its security protocol"
        assert set(_listeners(settings["KAFKA_ADVERTISED_LISTENERS"])) <= listeners
        assert {settings["KAFKA_INTER_BROKER_LISTENER_NAME"], settings["KAFKA_CONTROLLER_LISTENER_NAMES"]} <= listeners
