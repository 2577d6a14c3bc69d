"""deploy/kubernetes/kustomization.yaml: the image is named in one place, and what it renders
is what a cluster accepts.

``kubectl kustomize`` renders it (offline); the rendered built-in kinds are validated against the
Kubernetes schemas ``kubernetes-validate`` bundles, as the manifests themselves are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.paths import TESTS

MANIFESTS = TESTS.parent / "deploy" / "kubernetes"
KUSTOMIZATION = MANIFESTS / "kustomization.yaml"
BUILT_IN = {"Deployment", "Service", "ConfigMap"}


def _kubectl() -> str:
    """Path of kubectl; CI installs it, a laptop may skip."""
    path = shutil.which("kubectl")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is required in CI (its kustomize renders deploy/kubernetes)")
        pytest.skip("kubectl not installed")
    return path


def _render(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize directory``, parsed."""
    done = subprocess.run(  # noqa: S603 - kubectl from PATH, on our own files
        [_kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _bridge_images(docs: list[dict[str, Any]]) -> list[str]:
    images = []
    for doc in docs:
        if doc["kind"] == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            containers = spec.get("initContainers", []) + spec["containers"]
            images += [c["image"] for c in containers if c["name"] == "metricbridge"]
    return images


def _kustomization() -> dict[str, Any]:
    return yaml.safe_load(KUSTOMIZATION.read_text())


def _copy_with(tmp_path: Path, **changes: Any) -> Path:
    """The manifests in ``tmp_path``, with top-level keys of the kustomization replaced."""
    target = tmp_path / "kubernetes"
    shutil.copytree(MANIFESTS, target)
    doc = {**_kustomization(), **changes}
    (target / KUSTOMIZATION.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


def test_every_bridge_container_is_named_as_the_images_entry_matches() -> None:
    """Both Deployments name the bridge's image by the name the one ``images:`` entry matches,
    so that entry sets it whichever Deployment is listed (no kubectl needed)."""
    (entry,) = _kustomization()["images"]
    for path in sorted(MANIFESTS.glob("sglang-*-sidecar.yaml")):
        (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
        (image,) = _bridge_images([doc])
        assert image.rsplit(":", 1)[0] == entry["name"], path.name
    for resource in _kustomization()["resources"]:
        assert (MANIFESTS / resource).is_file(), resource


def test_the_images_entry_sets_the_bridge_image_in_the_rendered_manifests(tmp_path: Path) -> None:
    """A registry name and tag set in the kustomization, and only there, reach the sidecar."""
    (entry,) = _kustomization()["images"]
    assert _bridge_images(_render(MANIFESTS)) == [f"{entry['newName']}:{entry['newTag']}"]
    pushed = {**entry, "newName": "example/team/metricbridge", "newTag": "1.2.3"}
    assert _bridge_images(_render(_copy_with(tmp_path, images=[pushed]))) == [
        "example/team/metricbridge:1.2.3"
    ]


@pytest.mark.parametrize(
    "deployment", ["sglang-native-sidecar.yaml", "sglang-classic-sidecar.yaml"]
)
def test_the_rendered_built_in_kinds_match_the_kubernetes_schema(
    tmp_path: Path, deployment: str
) -> None:
    """What ``kubectl kustomize`` renders, with either Deployment listed, validates strictly."""
    validator = pytest.importorskip("kubernetes_validate")
    resources = [
        deployment if name.startswith("sglang-") else name for name in _kustomization()["resources"]
    ]
    docs = _render(_copy_with(tmp_path, resources=resources))
    kinds = sorted(doc["kind"] for doc in docs)
    assert kinds == ["ConfigMap", "Deployment", "PodMonitor", "Service"]
    for doc in docs:
        if doc["kind"] in BUILT_IN:
            validator.validate(doc, "1.33.0", strict=True)
