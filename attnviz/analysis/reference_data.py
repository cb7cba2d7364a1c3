"""Where the reference data sets live: the one rule for the folder of treebanks, WinoBias and BLiMP files that
the project does not ship (they are other people's data). `$ATTNVIZ_DATA_DIR`, else `shared/data` in the
folder that holds the repository (`<repo>/../shared/data`). The blimp command, the corpus map, the Findings
page's Clark card and the tests all ask here."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "ATTNVIZ_DATA_DIR"
BESIDE_REPOSITORY = Path(__file__).resolve().parents[3] / "shared" / "data"  # attnviz/analysis/ -> <repo>/..


def data_dir() -> Path:
    """The reference-data folder (it may not exist: callers say so in their own words)."""
    value = os.environ.get(DATA_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else BESIDE_REPOSITORY


def data_path(*parts: str) -> Path:
    """A path inside the reference-data folder: `data_path("ud", "en_ewt-ud-dev.conllu")`."""
    return data_dir().joinpath(*parts)
