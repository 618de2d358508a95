"""deploy/k8s/ validated offline against the Kubernetes API schemas (kubernetes-validate), and
checked to fit together and to the consumer's settings."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from consumer.settings import documented_options

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30.0"


def _manifests() -> dict[str, dict]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return {name: yaml.safe_load((K8S / name).read_text()) for name in kustomization["resources"]}


def _by_kind() -> dict[str, dict]:
    return {manifest["kind"]: manifest for manifest in _manifests().values()}


def test_kustomization_lists_every_manifest() -> None:
    on_disk = {path.name for path in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(_manifests()) == on_disk


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_every_manifest_is_valid_kubernetes(version: str) -> None:
    for name, manifest in _manifests().items():
        assert kubernetes_validate.validate(manifest, version, strict=True), name


def test_validation_rejects_a_broken_deployment() -> None:
    broken = copy.deepcopy(_by_kind()["Deployment"])
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] = {"name": "http"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_replicas_share_one_consumer_group_and_a_shared_store() -> None:
    kinds = _by_kind()
    assert kinds["Deployment"]["spec"]["replicas"] > 1
    assert kinds["ConfigMap"]["data"]["LINEAGE_GROUP"]
    store_url = kinds["Secret"]["stringData"]["LINEAGE_STORE_URL"]
    assert store_url.startswith("postgresql://"), "replicas beyond one need PostgreSQL"
    assert "LINEAGE_STORE_URL" not in kinds["ConfigMap"]["data"] and "LINEAGE_API_TOKEN" in kinds["Secret"]["stringData"]


def test_the_deployment_reads_its_configmap_and_secret_and_probes_health() -> None:
    kinds = _by_kind()
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    sources = {next(iter(source)): next(iter(source.values()))["name"] for source in container["envFrom"]}
    assert sources == {"configMapRef": kinds["ConfigMap"]["metadata"]["name"], "secretRef": kinds["Secret"]["metadata"]["name"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert kinds["Service"]["spec"]["selector"].items() <= labels.items()
    port = int(kinds["ConfigMap"]["data"]["LINEAGE_PORT"])
    assert container["ports"][0]["containerPort"] == port


def test_every_variable_set_is_a_consumer_setting() -> None:
    known = {env for _, env, _, _ in documented_options()}
    kinds = _by_kind()
    assert set(kinds["ConfigMap"]["data"]) <= known
    assert set(kinds["Secret"]["stringData"]) <= known
