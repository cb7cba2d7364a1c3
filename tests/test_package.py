"""The installed package (issue 26): `pyproject.toml` declares requirements.txt's pins and the `attnviz` command;
`scripts/setup.sh` installs this checkout into the venv (editable), so `import attnviz` and the command work
from any folder and run this checkout's code; a Python without torch gets one line, not a traceback.

The install checks read the venv of the Python running the tests: they pass once `bash scripts/setup.sh`
(or `.venv/bin/python -m pip install --no-deps -e .`) has installed this checkout into it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from tests.conftest import MINILM, ROOT, require_offline

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def clean_env() -> dict:
    """The environment a person's shell gives: no PYTHONPATH pointing into the checkout."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def requirements(path: Path) -> list[Requirement]:
    # pip's comment rule: a "#" at the start or after whitespace (a URL's "#sha256=" is no comment)
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("-")]


def pinned_versions(requirement: Requirement) -> set[str]:
    """The versions a requirement allows, as written: the `==` pin, or a direct URL's wheel version."""
    if requirement.url:
        version = parse_wheel_filename(requirement.url.split("/")[-1].split("#")[0].replace("%2B", "+"))[1]
        return {version.public}
    return {spec.version for spec in requirement.specifier if spec.operator == "=="}


def test_pyproject_declares_the_pins_of_requirements_txt():
    """One spec per package, the same as requirements.txt's; torch, which requirements.txt splits by platform
    (a direct URL to the CPU wheel on Linux x86_64 Python 3.12, the plain pin elsewhere), is the plain pin
    of the same version in both of its lines."""
    ours = {canonicalize_name(r.name): r for r in map(Requirement, PYPROJECT["project"]["dependencies"])}
    theirs: dict[str, list[Requirement]] = {}
    for requirement in requirements(ROOT / "requirements.txt"):
        theirs.setdefault(canonicalize_name(requirement.name), []).append(requirement)
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    for name, lines in theirs.items():
        mine = ours[name]
        assert mine.marker is None and mine.url is None, mine
        if name == "torch":
            assert len(lines) == 2 and {pinned_versions(line).pop() for line in lines} == pinned_versions(mine), lines
        else:
            assert len(lines) == 1 and str(lines[0].specifier) == str(mine.specifier), (lines, mine)


def test_the_console_script_is_declared():
    assert PYPROJECT["project"]["scripts"] == {"attnviz": "attnviz.__main__:run"}
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "pip install -q --no-deps -e ." in setup
    assert setup.index('-r "$requirements"') < setup.index("--no-deps -e .")  # the requirements first


@pytest.mark.parametrize("beside", [False, True])
def test_import_from_another_folder_is_this_checkout(tmp_path, beside):
    """From an empty folder, and from one holding a folder named attnviz (the parent of a clone named
    attnviz): setuptools' import hook lost to that folder, read as a namespace package with no `load`."""
    if beside:
        (tmp_path / "attnviz").mkdir()
    out = subprocess.run([sys.executable, "-c", "import attnviz, attnviz.plots; print(attnviz.__file__)"],
                         cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() != "None", "attnviz imported as a namespace package: the folder beside, not the checkout"
    where = Path(out.stdout.strip()).resolve()
    assert where.is_relative_to(ROOT), f"attnviz imported from {where}, not from this checkout {ROOT}"


def test_the_console_script_runs_from_another_folder(tmp_path):
    require_offline(MINILM)
    command = Path(sys.executable).parent / "attnviz"
    assert command.is_file(), f"no {command}: install this checkout (bash scripts/setup.sh)"
    shown = subprocess.run([command, "--help"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: attnviz "), shown.stdout + shown.stderr
    assert "app" in shown.stdout and "parity" in shown.stdout
    heads = subprocess.run([command, "heads", "--model", MINILM, "--n", "4", "--sequences", "1", "--json"],
                           cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert heads.returncode == 0, heads.stderr[-2000:]
    grid = json.loads(heads.stdout)["previous_token"]
    assert len(grid) == 6 and all(len(row) == 12 for row in grid)  # MiniLM: 6 layers x 12 heads


def test_the_app_command_runs_streamlit_on_this_checkouts_app(monkeypatch):
    from attnviz.cli import app
    from attnviz.cli.main import main

    ran = []
    monkeypatch.setattr(app.os, "execv", lambda path, command: ran.append(command))
    assert main(["app", "--server.port", "8502", "--server.headless", "true"]) == 0
    assert ran == [[sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                    "--server.port", "8502", "--server.headless", "true"]]


def test_the_app_command_without_a_checkout_says_so(monkeypatch, tmp_path, capsys):
    import attnviz
    from attnviz.cli.main import main

    monkeypatch.setattr(attnviz, "__file__", str(tmp_path / "attnviz" / "__init__.py"))  # an installed wheel
    assert main(["app"]) == 2
    assert "no app.py beside" in capsys.readouterr().err


def test_a_python_without_torch_gets_one_line():
    """`python -m attnviz parity` with a Python that lacks torch (the system's, outside the venv): the message
    names the module and the interpreter to use; no traceback."""
    blocked = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = ['attnviz', 'parity', '--model', 'x'];"
               " runpy.run_module('attnviz', run_name='__main__', alter_sys=True)")
    out = subprocess.run([sys.executable, "-c", blocked], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "'torch'" in out.stderr and ".venv/bin/attnviz" in out.stderr and "scripts/setup.sh" in out.stderr
