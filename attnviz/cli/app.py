"""`attnviz app [streamlit options]`: `streamlit run` on the checkout's app.py, from any folder.

The app (app.py, app_pages/) lives beside the package in the checkout, not inside it: an editable install
(scripts/setup.sh) finds it one folder above attnviz/; an installed wheel has none and says so."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import attnviz


def app_script() -> Path:
    script = Path(attnviz.__file__).resolve().parent.parent / "app.py"
    if not script.is_file():
        raise OSError(f"no app.py beside {Path(attnviz.__file__).resolve().parent}: the app runs from a checkout "
                      "of the repository (install it with `bash scripts/setup.sh`, which runs `pip install -e .`)")
    return script


def streamlit_command(extra: list[str]) -> list[str]:
    """This Python's streamlit, on the checkout's app.py, with the options given after `app`."""
    return [sys.executable, "-m", "streamlit", "run", str(app_script()), *extra]


def run_app_command(args) -> int:
    command = streamlit_command(args.streamlit_args)
    # The process becomes streamlit: Ctrl-C and its exit status are streamlit's own, with no wrapper left.
    os.execv(command[0], command)
    return 0  # not reached
