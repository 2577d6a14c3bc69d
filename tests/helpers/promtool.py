"""Prometheus' own promtool as a test oracle: CI installs it, a bare laptop may skip those tests."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def promtool_path() -> str:
    """Path of Prometheus' promtool; CI installs it, a bare laptop may skip those tests."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is required in CI (Debian package 'prometheus')")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path


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
