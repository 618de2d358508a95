"""deploy/k8s/ validated offline against the Kubernetes API schemas (kubernetes-validate), and
checked to fit together and to the consumer's settings: a Deployment per role (Kafka ingestion,
read-only API), each Service selecting one of them, pods locked down (non-root, read-only root
filesystem, no capabilities), pinned image tags, the token from a mounted Secret file."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from consumer.api.auth import TokenRefused, check_token
from consumer.settings import documented_options

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
EXAMPLE_SECRETS = "secret.example.yaml"
KUBERNETES_VERSION = "1.30.0"


def _documents(name: str) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all((K8S / name).read_text()) if document]


def _manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [document for name in kustomization["resources"] for document in _documents(name)]


def _named(kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in _manifests() + _documents(EXAMPLE_SECRETS) if m["kind"] == kind}


def _role(deployment: dict[str, Any]) -> str:
    env = {item["name"]: item.get("value") for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    return str(env["LINEAGE_ROLE"])


def _pods() -> list[dict[str, Any]]:
    return [d["spec"]["template"]["spec"] for d in _named("Deployment").values()]


def test_kustomization_lists_every_manifest_but_the_example_secrets() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    on_disk = {path.name for path in K8S.glob("*.yaml")} - {"kustomization.yaml", EXAMPLE_SECRETS}
    assert set(kustomization["resources"]) == on_disk


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_every_manifest_is_valid_kubernetes(version: str) -> None:
    for manifest in _manifests() + _documents(EXAMPLE_SECRETS):
        assert kubernetes_validate.validate(manifest, version, strict=True), manifest["metadata"]["name"]


def test_validation_rejects_a_broken_deployment() -> None:
    broken = copy.deepcopy(_named("Deployment")["lineage-ingest"])
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = {"name": "http"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_a_deployment_per_role_and_a_service_for_each() -> None:
    deployments = _named("Deployment")
    assert {name: _role(d) for name, d in deployments.items()} == {"lineage-ingest": "kafka", "lineage-api": "api"}
    assert deployments["lineage-ingest"]["spec"]["replicas"] > 1 and deployments["lineage-api"]["spec"]["replicas"] > 1
    migrating = [c["args"] for d in deployments.values() for c in d["spec"]["template"]["spec"].get("initContainers", [])]
    assert migrating == [["migrate"]], "only the ingesting members migrate the schema"
    services = _named("Service")
    for name, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        selecting = [s for s, service in services.items() if service["spec"]["selector"].items() <= labels.items()]
        assert selecting == [name], f"{name}: selected by {selecting}"


def test_replicas_share_one_consumer_group_and_a_shared_store() -> None:
    config = _named("ConfigMap")["lineage-consumer"]["data"]
    assert config["LINEAGE_GROUP"]
    store_url = _named("Secret")["lineage-consumer"]["stringData"]["LINEAGE_STORE_URL"]
    assert store_url.startswith("postgresql://") and "sslmode=" in store_url, "replicas beyond one need PostgreSQL"
    assert "LINEAGE_STORE_URL" not in config and "LINEAGE_API_TOKEN" not in config


def test_the_token_is_a_mounted_file_and_the_example_is_refused() -> None:
    ingest = _named("Deployment")["lineage-ingest"]["spec"]["template"]["spec"]
    container = ingest["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in ingest["volumes"]}
    token_volume = volumes["api-token"]["secret"]
    assert env["LINEAGE_API_TOKEN_FILE"] == f"{mounts['api-token']}/{token_volume['items'][0]['path']}"
    example = _named("Secret")[token_volume["secretName"]]["stringData"][token_volume["items"][0]["key"]]
    with pytest.raises(TokenRefused):
        check_token(example, "the write token")
    assert not any("token" in " ".join(c.get("args", [])) for pod in _pods() for c in pod["containers"])


def test_the_deployments_read_their_configmap_and_secret_and_probe_health() -> None:
    config = _named("ConfigMap")["lineage-consumer"]
    for pod in _pods():
        container = pod["containers"][0]
        sources = {next(iter(source)): next(iter(source.values()))["name"] for source in container["envFrom"]}
        assert sources == {"configMapRef": config["metadata"]["name"], "secretRef": "lineage-consumer"}
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert container["ports"][0]["containerPort"] == int(config["data"]["LINEAGE_PORT"])


def test_pods_run_locked_down_on_pinned_images() -> None:
    for pod in _pods():
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
        assert pod["automountServiceAccountToken"] is False
        writable = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            image = container["image"]
            assert ":" in image and not image.endswith(":latest"), image
            assert {m["name"] for m in container["volumeMounts"]} & writable, "a writable /tmp"


def test_every_variable_set_is_a_consumer_setting() -> None:
    known = {env for _, env, _, _ in documented_options()}
    assert set(_named("ConfigMap")["lineage-consumer"]["data"]) <= known
    assert set(_named("Secret")["lineage-consumer"]["stringData"]) <= known
    for pod in _pods():
        assert {item["name"] for item in pod["containers"][0]["env"]} <= known


def test_the_http_only_overlay_turns_the_ingesting_members_to_http_ingestion() -> None:
    overlay = yaml.safe_load((K8S / "http-only" / "kustomization.yaml").read_text())
    assert overlay["resources"] == [".."]
    (patch,) = overlay["patches"]
    assert patch["target"] == {"kind": "Deployment", "name": "lineage-ingest"}
    deployment = copy.deepcopy(_named("Deployment")["lineage-ingest"])
    for operation in yaml.safe_load(patch["patch"]):  # JSON patch: test, then replace
        *parents, last = operation["path"].strip("/").split("/")
        node: Any = deployment
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key = int(last) if isinstance(node, list) else last
        if operation["op"] == "test":
            assert node[key] == operation["value"], operation
        else:
            node[key] = operation["value"]
    assert _role(deployment) == "http"
    assert kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
