#!/usr/bin/env python3
"""Write the release catalogue of one or more SGLang releases, read statically from their source.

    python tools/extract_sglang_catalogue.py 0.5.23 [0.5.24 ...]
    python tools/extract_sglang_catalogue.py --from-dir DOWNLOADS 0.5.23
    python tools/extract_sglang_catalogue.py --all

Each release's wheel (or sdist) is fetched with ``pip download --no-deps`` into a temporary
directory (unless ``--from-dir`` holds it), its ``sglang/**/*.py`` files are parsed with ``ast``
(SGLang is never imported) and ``src/metricbridge/data/engines/sglang-<version>.json`` is
written. ``--all`` does every release the policy in ``sglang_catalogue.releases`` selects.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sglang_catalogue import releases
from sglang_catalogue.catalogue import build
from sglang_catalogue.sources import Release, read_archive, sha256
from sglang_catalogue.writer import dumps

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src" / "metricbridge" / "data" / "engines"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="releases to catalogue, e.g. 0.5.23")
    parser.add_argument("--all", action="store_true", help="every release the policy selects")
    parser.add_argument(
        "--from-dir", type=Path, help="a downloaded archive, or a directory of them"
    )
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="where the JSON goes")
    return parser


def catalogue_release(version: str, archive: Path, out_dir: Path) -> Path:
    """Extract one release from its archive and write its catalogue; returns the file."""
    release = Release(version, read_archive(archive), archive.name, sha256(archive))
    catalogue = build(release)
    if not catalogue["families"]:
        raise RuntimeError(f"sglang {version}: no `sglang:` metric found in {archive.name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"sglang-{version}.json"
    target.write_text(dumps(catalogue) + "\n", encoding="utf-8")
    return target


def _one(version: str, from_dir: Path | None, out_dir: Path) -> Path:
    if from_dir is not None:
        archive = releases.find_archive(from_dir, version)
        if archive is None:
            raise RuntimeError(f"no sglang {version} wheel or sdist in {from_dir}")
        return catalogue_release(version, archive, out_dir)
    with tempfile.TemporaryDirectory(prefix="sglang-") as tmp:
        return catalogue_release(version, releases.download(version, Path(tmp)), out_dir)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = _parser().parse_args(argv)
    versions = releases.policy(releases.available()) if args.all else args.versions
    if not versions:
        _parser().error("name at least one release, or pass --all")
    for version in versions:
        try:
            target = _one(version, args.from_dir, args.out_dir)
        except RuntimeError as error:
            sys.stderr.write(f"extract_sglang_catalogue: {error}\n")
            return 1
        sys.stdout.write(f"sglang {version}: {target.name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
