"""Prometheus' own binaries as test oracles: CI installs them, a bare laptop may skip those tests."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _binary(name: str) -> str:
    """Path of one of the Debian package ``prometheus``'s binaries: failed without it in CI."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required in CI (Debian package 'prometheus')")
        pytest.skip(f"{name} not installed (apt-get install prometheus)")
    return path


def promtool_path() -> str:
    """Path of Prometheus' promtool."""
    return _binary("promtool")


def prometheus_path() -> str:
    """Path of the Prometheus server."""
    return _binary("prometheus")


def promtool_check_metrics(exposition: bytes) -> str:
    """Run ``promtool check metrics``; fail on a parse error, return the lint output."""
    result = subprocess.run(  # noqa: S603 - fixed binary, our own input
        [promtool_path(), "check", "metrics"],
        input=exposition,
        capture_output=True,
        timeout=60,
        check=False,
    )
    output = (result.stdout + result.stderr).decode()
    # Exit 3 means lint findings only (e.g. colons in names, which SGLang uses by design);
    # exit 1 with "error while linting" is a parse failure.
    assert "error while linting" not in output, output
    assert result.returncode in (0, 3), output
    return output
