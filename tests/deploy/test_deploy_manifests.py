"""deploy/kubernetes: schema validation offline, the sidecar's shape, and the monitors' wiring.

Built-in kinds are validated against the Kubernetes OpenAPI schemas that the PyPI package
``kubernetes-validate`` bundles (strict: unknown fields fail). PodMonitor and ServiceMonitor are
CRDs, which it has no schema for: they are checked structurally (required fields, types, and
that their selectors and ports reach the pods and the Service).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
import yaml

from helpers.paths import TESTS

ROOT = TESTS.parent
MANIFESTS = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION = MANIFESTS / "kustomization.yaml"
BUILT_IN = {"Deployment", "Service", "ConfigMap"}
KUBERNETES_VERSIONS = ("1.29.0", "1.33.0")  # native sidecars on by default since 1.29
SECURITY_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "runAsGroup": 65534,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
_DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h))+$")


def _kubernetes_validate() -> ModuleType:
    """The validator; CI installs it (pip install kubernetes-validate), a laptop may skip."""
    try:
        import kubernetes_validate  # noqa: PLC0415 - optional test dependency
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("kubernetes-validate is required in CI: pip install kubernetes-validate")
        pytest.skip("kubernetes-validate not installed (pip install kubernetes-validate)")
    return kubernetes_validate


def _documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name == KUSTOMIZATION.name:  # how to apply them, not a manifest
            continue
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def _one(kind: str, file: str | None = None) -> dict[str, Any]:
    found = [d for f, d in _documents() if d["kind"] == kind and (file is None or f == file)]
    assert len(found) == 1, (kind, file, len(found))
    return found[0]


def _deployments() -> list[pytest.ParameterSet]:
    return [
        pytest.param(f, id=f.removesuffix(".yaml"))
        for f, d in _documents()
        if d["kind"] == "Deployment"
    ]


def _bridge(deployment: dict[str, Any]) -> dict[str, Any]:
    spec = deployment["spec"]["template"]["spec"]
    containers = spec.get("initContainers", []) + spec["containers"]
    return next(c for c in containers if c["name"] == "metricbridge")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    ("file", "doc"),
    [pytest.param(f, d, id=f"{f}:{d['kind']}") for f, d in _documents() if d["kind"] in BUILT_IN],
)
def test_built_in_kinds_match_the_kubernetes_schema(
    file: str, doc: dict[str, Any], version: str
) -> None:
    """Deployments, the Service and the ConfigMap validate strictly against the bundled schema."""
    validator = _kubernetes_validate()
    try:
        validator.validate(doc, version, strict=True)
    except validator.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{file}: {path}: {exc.message}")


def test_every_manifest_is_a_known_kind() -> None:
    """Every document is a built-in kind or one of the two Prometheus Operator monitors."""
    kinds = sorted(d["kind"] for _, d in _documents())
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "Deployment",
        "PodMonitor",
        "Service",
        "ServiceMonitor",
    ]


def test_configmap_is_config_aliases_byte_for_byte() -> None:
    """The ConfigMap's aliases.yaml equals config/aliases.yaml, and the generator agrees."""
    data = _one("ConfigMap")["data"]["aliases.yaml"]
    assert data.encode() == (ROOT / "config" / "aliases.yaml").read_bytes()
    result = subprocess.run(  # noqa: S603 - our own script
        [sys.executable, str(ROOT / "deploy" / "generate_configmap.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_native_sidecar_is_a_restartable_init_container() -> None:
    """The native variant runs the bridge as an init container with restartPolicy Always."""
    spec = _one("Deployment", "sglang-native-sidecar.yaml")["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["metricbridge"]
    assert spec["initContainers"][0]["restartPolicy"] == "Always"
    assert [c["name"] for c in spec["containers"]] == ["sglang"]


def test_classic_sidecar_is_a_second_container() -> None:
    """The classic variant runs the bridge beside SGLang in ``containers``."""
    spec = _one("Deployment", "sglang-classic-sidecar.yaml")["spec"]["template"]["spec"]
    assert "initContainers" not in spec
    assert [c["name"] for c in spec["containers"]] == ["sglang", "metricbridge"]
    assert "restartPolicy" not in spec["containers"][1]


@pytest.mark.parametrize("file", _deployments())
def test_bridge_probes_resources_and_security(file: str) -> None:
    """Probes hit /-/healthy and /-/ready; resources are set; the securityContext is locked down."""
    bridge = _bridge(_one("Deployment", file))
    assert bridge["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "metrics"}
    assert bridge["readinessProbe"]["httpGet"] == {"path": "/-/ready", "port": "metrics"}
    assert bridge["ports"] == [{"name": "metrics", "containerPort": 9850}]
    assert bridge["securityContext"] == SECURITY_CONTEXT
    resources = bridge["resources"]
    assert resources["requests"]["memory"] == "64Mi"
    assert resources["limits"]["memory"] == "160Mi"
    assert resources["requests"]["cpu"]


@pytest.mark.parametrize("file", _deployments())
def test_bridge_reads_the_configmap_at_the_image_config_path(file: str) -> None:
    """The ConfigMap is mounted where the image's CMD points, and the upstream is SGLang's port."""
    deployment = _one("Deployment", file)
    spec = deployment["spec"]["template"]["spec"]
    bridge = _bridge(deployment)
    mount = next(m for m in bridge["volumeMounts"] if m["mountPath"] == "/etc/metricbridge")
    assert mount.get("readOnly") is True
    assert "subPath" not in mount  # a subPath mount never sees ConfigMap updates
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == _one("ConfigMap")["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in bridge["env"]}
    assert env["METRICBRIDGE_UPSTREAM"] == "127.0.0.1:30000"
    assert "args" not in bridge  # keeps the image's CMD: --config /etc/metricbridge/aliases.yaml
    sglang = next(c for c in spec["containers"] if c["name"] == "sglang")
    assert sglang["image"].startswith("lmsysorg/sglang:")
    assert "--enable-metrics" in sglang["args"]
    assert "--port=30000" in sglang["args"]


def test_service_exposes_the_bridge_as_metrics() -> None:
    """The Service selects the pods and maps port ``metrics`` 9850 to the bridge's port."""
    service = _one("Service")
    pod_labels = _one("Deployment", "sglang-native-sidecar.yaml")["spec"]["template"]["metadata"][
        "labels"
    ]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert ports["metrics"]["port"] == 9850
    assert ports["metrics"]["targetPort"] == 9850


def _check_endpoint(endpoint: dict[str, Any]) -> None:
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert _DURATION.match(endpoint["interval"])
    assert _DURATION.match(endpoint["scrapeTimeout"])
    assert int(endpoint["scrapeTimeout"].removesuffix("s")) < int(
        endpoint["interval"].removesuffix("s")
    )


@pytest.mark.parametrize("kind", ["PodMonitor", "ServiceMonitor"])
def test_monitor_has_the_required_fields(kind: str) -> None:
    """apiVersion, kind, metadata.name, spec.selector and one endpoint on port ``metrics``."""
    monitor = _one(kind)
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert isinstance(monitor["metadata"]["name"], str)
    assert monitor["metadata"]["name"]
    assert isinstance(monitor["spec"]["selector"]["matchLabels"], dict)
    key = "podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"
    endpoints = monitor["spec"][key]
    assert len(endpoints) == 1
    _check_endpoint(endpoints[0])
    allowed = {"selector", key, "namespaceSelector", "jobLabel", "podTargetLabels", "targetLabels"}
    assert set(monitor["spec"]) <= allowed


def test_podmonitor_reaches_the_bridge_in_both_deployments() -> None:
    """Its selector matches both pod templates, each of which names a container port ``metrics``."""
    selector = _one("PodMonitor")["spec"]["selector"]["matchLabels"]
    for file in ("sglang-native-sidecar.yaml", "sglang-classic-sidecar.yaml"):
        deployment = _one("Deployment", file)
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
        assert any(p["name"] == "metrics" for p in _bridge(deployment)["ports"])


def test_servicemonitor_reaches_the_service_port() -> None:
    """Its selector matches the Service's labels and ``metrics`` is a Service port name."""
    service = _one("Service")
    selector = _one("ServiceMonitor")["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}
