"""Rewrite the supported-architectures table in README.md and docs/models.md from the registry
(attnviz/loading/families.py). tests/contract/test_families.py fails when either file is out of date.

    .venv/bin/python scripts/families_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from attnviz.loading.families import replace_table  # noqa: E402

DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "models.md"]

if __name__ == "__main__":
    for path in DOCUMENTS:
        path.write_text(replace_table(path.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"rewrote the table in {path.relative_to(ROOT)}")
