"""Build hook: compile the reader's optional C passes (``exposition._linescan``, ``_blockdigest``).

The package works without them (``exposition.line_match`` and ``block_digest`` fall back to
Python), so a machine without a C compiler still installs: the build says so on stderr and goes
on, unless
``METRICBRIDGE_REQUIRE_COMPILED`` is set (CI and the container's build stage set it, so that a
broken compile fails there instead of shipping the slower path unnoticed). Each C file is one
module and needs only CPython's headers, so the interpreter's own compiler settings are enough;
setuptools is not needed for them. Both are built, or neither is shipped.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = Path("src/metricbridge/exposition")
WHEEL_DIRECTORY = "metricbridge/exposition"
MODULES = ("_linescan", "_blockdigest")


class CompileLineScan(BuildHookInterface[BuilderConfig]):
    """Compiles the C passes into the wheel, or in place for an editable install."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile, and add the module to the wheel (which then has a platform tag)."""
        if self.target_name != "wheel":
            return
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        package = Path(self.root) / PACKAGE
        if version == "editable":
            # An editable install imports the package from src/, so the modules are built there.
            directory = package
        else:
            self._scratch = tempfile.mkdtemp(prefix="metricbridge-build-")
            directory = Path(self._scratch)
        built: list[Path] = []
        for module in MODULES:
            target = directory / f"{module}{suffix}"
            problem = _compile(package / f"{module}.c", target)
            if problem is not None:
                for done in built:
                    done.unlink(missing_ok=True)  # one without the other is not shipped
                if os.environ.get("METRICBRIDGE_REQUIRE_COMPILED"):
                    raise RuntimeError(f"metricbridge: the C passes did not build: {problem}")
                sys.stderr.write(
                    f"metricbridge: the C passes did not build ({problem}); "
                    "installing the pure-Python reader, which is slower\n"
                )
                return
            built.append(target)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            for target in built:
                build_data["force_include"][str(target)] = f"{WHEEL_DIRECTORY}/{target.name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the compiled module's scratch directory once the wheel holds it."""
        del version, build_data, artifact_path
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _compile(source: Path, target: Path) -> str | None:
    """Compile ``source`` into the extension module ``target``; None, or what went wrong."""
    if sys.platform == "win32":
        return "not built on Windows"
    # $CC first, as setuptools and make read it; then the compiler the interpreter was built with.
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    command = [
        *compiler,
        "-O2",
        "-fPIC",
        "-shared",
        "-Wall",
        f"-I{sysconfig.get_path('include')}",
        str(source),
        "-o",
        str(target),
    ]
    if sys.platform == "darwin":
        command[1:1] = ["-undefined", "dynamic_lookup"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{compiler[0]}: {error}"
    if result.returncode != 0:
        return f"{shlex.join(command)} exited with {result.returncode}: {result.stderr.strip()}"
    return None
