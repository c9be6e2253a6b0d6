"""Generates openapi/openapi.yaml's ErrorName enum from lib/errors.tsv, the one registry.

python scripts/sync_openapi_errors.py          # rewrite the enum in place
python scripts/sync_openapi_errors.py --check  # exit 1 when it drifted (make test runs the test twin)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def registry_names() -> list[str]:
    rows = [ln.split("\t") for ln in (ROOT / "lib" / "errors.tsv").read_text().splitlines()]
    return [r[1] for r in rows if r and r[0].strip() and not r[0].startswith("#")]


def with_enum(spec: str, names: list[str]) -> str:
    """The spec text with the enum under ``ErrorName:`` replaced by ``names``."""
    m = re.search(r"(\n    ErrorName:\n(?:      .*\n)*?      enum:\n)((?:        - .*\n)+)", spec)
    if not m:
        raise SystemExit("openapi.yaml: no ErrorName enum found")
    block = "".join(f"        - {n}\n" for n in names)
    return spec[: m.start(2)] + block + spec[m.end(2) :]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    path = ROOT / "openapi" / "openapi.yaml"
    spec = path.read_text()
    new = with_enum(spec, registry_names())
    if args.check:
        if new != spec:
            print(
                "openapi.yaml's ErrorName enum differs from lib/errors.tsv: run scripts/sync_openapi_errors.py"
            )
            return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
