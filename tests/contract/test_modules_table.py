"""The Modules table of docs/layers.md against the tree: every module of attnviz/ is listed once, and
nothing is listed that does not exist. The parse rule is the one written above the table."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

DOC = ROOT / "docs" / "layers.md"
PACKAGE = ROOT / "attnviz"
NAME = re.compile(r"`([^`]+)`")


def table_rows(text: str) -> list[str]:
    """The first cell of each row of the table under "## Modules" (the header row left out)."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("|")]
    return [row for row in rows if row != "module" and set(row) != {"-"}]


def row_names(cell: str) -> list[str]:
    """The paths a first cell names, relative to attnviz/: "`a/b.py`, `c.py`, `d/`" -> a/b.py, a/c.py, a/d/.
    A name without "/" (a module, or a folder's last part before its trailing "/") is in the folder of the
    name before it; the first name of a cell starts from attnviz/."""
    parts = [part.strip() for part in cell.split(",")]
    names = [NAME.fullmatch(part) for part in parts]
    if not all(names):
        raise ValueError(f"not a comma-separated list of `names`: {cell!r}")
    paths, folder = [], ""
    for match in names:
        name = match.group(1)
        path = name if "/" in name.rstrip("/") else folder + name
        folder = path.rstrip("/").rpartition("/")[0] + "/" if "/" in path.rstrip("/") else ""
        paths.append(path)
    return paths


def listed(text: str) -> tuple[list[str], list[str]]:
    """(modules, folders) the table names, in order; a module named twice appears twice."""
    modules, folders = [], []
    for cell in table_rows(text):
        for path in row_names(cell):
            (folders if path.endswith("/") else modules).append(path)
    return modules, folders


def tree_modules() -> set[str]:
    return {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}


def problems(text: str, modules_on_disk: set[str], folders_on_disk: set[str]) -> list[str]:
    """What is wrong with the table, one line each; empty when it matches the tree."""
    modules, folders = listed(text)
    covered = {m for m in modules_on_disk for f in folders if m.startswith(f)}
    named = set(modules)
    out = []
    twice = sorted({m for m in modules if modules.count(m) > 1} | (named & covered))
    missing = sorted(m for m in modules_on_disk - named - covered if not m.endswith("__init__.py"))
    extra = sorted(named - modules_on_disk)
    no_folder = sorted(f for f in folders if f.rstrip("/") not in folders_on_disk)
    if missing:
        out.append(f"missing (in attnviz/, not in the table): {', '.join(missing)}")
    if extra:
        out.append(f"listed but not in attnviz/: {', '.join(extra)}")
    if no_folder:
        out.append(f"folder rows naming no folder of attnviz/: {', '.join(no_folder)}")
    if twice:
        out.append(f"listed more than once (by name or by a folder row): {', '.join(twice)}")
    return out


def test_the_modules_table_lists_every_module_once_and_nothing_else():
    folders = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*") if path.is_dir()}
    found = problems(DOC.read_text(encoding="utf-8"), tree_modules(), folders)
    assert not found, "docs/layers.md, ## Modules:\n" + "\n".join(found)


TABLE = """
## Modules

| module | holds |
|---|---|
| `a/x.py`, `y.py`, `sub/` | ... |
| `__init__.py`, `top.py` | ... |
| `b/z.py` | ... |

## Next
"""


def test_the_parse_rule():
    assert row_names("`transformer/masks.py`, `rope.py`") == ["transformer/masks.py", "transformer/rope.py"]
    assert row_names("`ui/escape.py`, `strings.py`, `locales/`") == ["ui/escape.py", "ui/strings.py", "ui/locales/"]
    assert row_names("`loading/converters/bert.py`, `gpt2.py`") == ["loading/converters/bert.py",
                                                                     "loading/converters/gpt2.py"]
    assert row_names("`trace.py`, `attention.py`") == ["trace.py", "attention.py"]
    assert row_names("`probesets/`") == ["probesets/"]
    with pytest.raises(ValueError, match="comma-separated"):
        row_names("`loading/<family>.py` (`bert`, ...)")


def test_the_check_names_what_is_missing_extra_and_twice():
    disk = {"a/x.py", "a/y.py", "a/sub/deep.py", "b/z.py", "top.py", "__init__.py", "b/__init__.py"}
    folders = {"a", "a/sub", "b"}
    assert problems(TABLE, disk, folders) == []  # __init__.py files need not be listed, and may be
    assert problems(TABLE, disk | {"b/new.py"}, folders) == ["missing (in attnviz/, not in the table): b/new.py"]
    assert problems(TABLE, disk - {"a/y.py"}, folders) == ["listed but not in attnviz/: a/y.py"]
    assert problems(TABLE, disk, folders - {"a/sub"}) == ["folder rows naming no folder of attnviz/: a/sub/"]
    doubled = TABLE.replace("| `b/z.py` |", "| `b/z.py`, `a/sub/deep.py` |")  # also under the folder row a/sub/
    assert problems(doubled, disk, folders) == [
        "listed more than once (by name or by a folder row): a/sub/deep.py"]
