"""metricbridge: translate SGLang's Prometheus metrics into a stable metric contract."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("metricbridge")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
