"""What a model source string names: a local folder or .gguf file, or a model id on the hub; and which
sources a public app may load (`app_source`).

The command line and the Python API are run by the machine's own user and accept any local path. The
app is opened by anonymous visitors, so it accepts presets and hub ids, and local paths only under the
directories its operator lists in ATTNVIZ_MODEL_DIRS (docs/app.md, "Public host").
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from attnviz.loading.offline import OFFLINE_MODELS, offline_path

MODEL_DIRS_VARIABLE = "ATTNVIZ_MODEL_DIRS"

# The hub's own rule for repo ids (huggingface_hub.utils.validate_repo_id): `name` or `owner/name`, each
# part of letters, digits, "-", "_" and ".", not starting or ending with "-" or ".", at most 96
# characters, with no "--" or "..".
_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HUB_ID = re.compile(rf"(?:{_HUB_PART}/)?{_HUB_PART}", re.ASCII)


def resolve_source(source: str) -> str:
    """A hub id that ships in an installed package loads from there (no network needed)."""
    local = offline_path(source)
    return str(local) if local is not None else source


def is_local_path(source: str) -> bool:
    """A folder or .gguf file on disk, or text written as a path. Anything else is a hub id, and hub
    ids may contain dots (Qwen/Qwen2.5-0.5B), so a suffix alone does not make a path."""
    return (source.endswith(".gguf") or source.startswith((".", "/", "~"))
            or os.path.exists(os.path.expanduser(source)))


def is_hub_id(text: str) -> bool:
    """Whether `text` is a valid hub repo id by the hub's rules (it may still not exist)."""
    return bool(_HUB_ID.fullmatch(text)) and "--" not in text and ".." not in text and not text.endswith(".git")


class SourceRefused(ValueError):
    """A source the app will not load. One message for every refused or missing local path, so that an
    answer never tells a visitor whether a path exists, and never echoes it."""

    def __init__(self) -> None:
        super().__init__(
            "this is not a model the app can load: choose a preset, or type a hub id (name or owner/name). "
            "Local folders and .gguf files are accepted only under directories the app's operator allows."
        )


@dataclass(frozen=True)
class AppSource:
    name: str  # what the visitor typed: the only form shown back to them
    location: str  # what the loader gets: a hub id, or a resolved local path
    from_hub: bool  # load `location` from the hub even if a folder of that name exists here

    @property
    def key(self) -> str:
        """One checkpoint, one key, however it was spelled: the hub id, or the resolved real path (`//`,
        `/./` and `dir/../dir` resolve alike; an offline id is its own key)."""
        return f"hub:{self.location}" if self.from_hub else f"local:{self.location}"


def allowed_model_dirs(environ=os.environ) -> list[Path]:
    """The operator's ATTNVIZ_MODEL_DIRS (os.pathsep-separated), resolved; the installed offline model
    packages are always allowed."""
    dirs = [Path(p.strip()).expanduser() for p in environ.get(MODEL_DIRS_VARIABLE, "").split(os.pathsep)
            if p.strip()]
    dirs += [path.parent for path in map(offline_path, OFFLINE_MODELS) if path is not None]
    return [d.resolve() for d in dirs]


def app_source(text: str, allowed_dirs: list[Path]) -> AppSource:
    """The source a visitor's `text` may load, or SourceRefused.

    A preset with an offline copy loads from it; anything shaped like a hub id is a hub id, even where a
    folder of that name sits in the server's working directory; anything else must be an absolute (or
    ~) path that, once symlinks and ".." are resolved, lies under an allowed directory and is a folder
    or a .gguf file.
    """
    text = text.strip()
    if offline_path(text) is not None:
        return AppSource(text, text, from_hub=False)  # the loader finds the installed copy itself
    if is_hub_id(text):
        return AppSource(text, text, from_hub=True)
    if not text.startswith(("/", "~")) or not allowed_dirs:
        raise SourceRefused()
    try:
        real = Path(text).expanduser().resolve(strict=True)
    except (OSError, RuntimeError):  # missing, unreadable, a symlink loop, an unknown ~user
        raise SourceRefused() from None
    inside = any(real.is_relative_to(d) for d in allowed_dirs)
    if not inside or not (real.is_dir() or (real.is_file() and real.suffix == ".gguf")):
        raise SourceRefused()
    return AppSource(text, str(real), from_hub=False)


# Whether this server has a route to the model hub, decided once in at most HUB_CHECK_S and kept for
# HUB_ROUTE_KEEP_S: offline, a hub load waited 26 s in the hub client's retries before it failed, so the app
# asks first and says so at once. HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) set means no route, unasked.
HUB_CHECK_S = 1.5
HUB_ROUTE_KEEP_S = 600.0
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_route: list = []  # [(reachable, when decided)], under _route_lock
_route_lock = threading.Lock()


def _probe_hub(timeout: float) -> bool:
    """A HEAD request to the hub's endpoint; any HTTP answer, even an error status, is a route."""
    import urllib.error
    import urllib.request

    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
    return True


def hub_reachable(environ=os.environ, probe=_probe_hub, timeout: float = HUB_CHECK_S) -> bool:
    """Whether the hub can be reached from here. The probe runs in a thread of its own and counts as failed
    past `timeout`: a name lookup with no DNS server can hang far longer than a socket's timeout."""
    if any(environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in _OFFLINE_VARIABLES):
        return False
    with _route_lock:
        if _route and time.monotonic() - _route[0][1] < HUB_ROUTE_KEEP_S:
            return _route[0][0]
        answer: list[bool] = []
        thread = threading.Thread(target=lambda: answer.append(probe(timeout)), name="attnviz-hub-route",
                                  daemon=True)
        thread.start()
        thread.join(timeout)
        reachable = bool(answer and answer[0])
        _route[:] = [(reachable, time.monotonic())]
        return reachable


def forget_hub_route() -> None:
    """Ask again next time (the app's Retry)."""
    with _route_lock:
        _route.clear()
