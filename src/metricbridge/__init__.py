"""metricbridge: translate SGLang's Prometheus metrics into a stable metric contract."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Read from the installed metadata when first asked: importing importlib.metadata costs
    # as much as a tenth of what `metricbridge translate` spends on a 10 MB file.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        found = version("metricbridge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
