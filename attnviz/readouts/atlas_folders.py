"""Where the app keeps a model's atlases, for the app (workbench.atlas) and the command line (`atlas import
--for-model`) alike: the atlas root (`$ATTNVIZ_ATLAS_DIR`, else `atlas/` in the model cache's folder), one folder
per model named by the SHA-256 of its store key (`AppSource.key`), never by a path a visitor gives, and beside it
`<name>.published`, a published atlas (a HeadVis tree imported) shown next to ours.

Here rather than in workbench/ because the command line, which may not import the workbench, writes the
published atlas where the page reads it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from attnviz.loading.cache import cache_dir
from attnviz.loading.sources import SourceRefused, allowed_model_dirs, app_source

ATLAS_DIR_VARIABLE = "ATTNVIZ_ATLAS_DIR"
PUBLISHED = ".published"


def atlas_root(environ=os.environ) -> Path | None:
    """The folder atlases live in: $ATTNVIZ_ATLAS_DIR, else atlas/ in the model cache's folder; None when
    either is switched off ("" or "off")."""
    value = environ.get(ATLAS_DIR_VARIABLE)
    if value is not None:
        value = value.strip()
        return None if value in ("", "off") else Path(value).expanduser()
    root = cache_dir(environ)
    return None if root is None else root / "atlas"


def folder_name(key: str) -> str:
    """A model's atlas folder name: the first 32 hex digits of the SHA-256 of its store key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def published_name(key: str) -> str:
    return folder_name(key) + PUBLISHED


def published_folder_for(source: str, environ=os.environ) -> Path:
    """The published atlas's folder of the model `source` as the app would load it (its store key by the app's
    own rule, `app_source` under ATTNVIZ_MODEL_DIRS); ValueError when atlases are off or the app would refuse
    the source."""
    root = atlas_root(environ)
    if root is None:
        raise ValueError(f"atlases are switched off here ({ATLAS_DIR_VARIABLE} or the model cache is off)")
    try:
        key = app_source(source, allowed_model_dirs(environ)).key
    except SourceRefused:  # the app would not load it, so no page would read its atlas
        raise ValueError(f"{source!r} is not a source the app loads (a hub id, a preset, or a path under "
                         "ATTNVIZ_MODEL_DIRS)") from None
    return root / published_name(key)
