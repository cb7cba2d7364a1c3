"""Tests find their helpers in tests/helpers/ and tests/conftest.py, never in another test module: importing
a test module runs its module-level setup and pulls its tests into the importer's namespace (pytest then
collects them twice), and a helper hidden in a test file is one nobody knows to keep stable."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

TESTS = ROOT / "tests"
# Besides the suite: the benchmarks and scripts borrow test helpers too, and must reach them the same way.
IMPORTERS = [TESTS, ROOT / "benchmarks", ROOT / "scripts"]


def is_test_module(name: str) -> bool:
    """pytest's default python_files: test_*.py and *_test.py."""
    return name.startswith("test_") or name.endswith("_test")


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every module under `tests` that `source` imports, at any depth (lazy imports
    inside functions too). `from tests.a import b` names `tests.a.b` where b is a module file."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "tests":
            found.append((node.lineno, node.module))
            folder = TESTS.parent.joinpath(*node.module.split("."))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if (folder / f"{alias.name}.py").is_file()]
    return found


def imports_of_test_modules(source: str) -> list[str]:
    """The test modules `source` imports."""
    found = imported_modules(source)
    return [f"line {line}: {name}" for line, name in found if is_test_module(name.rsplit(".", 1)[-1])]


def python_files() -> list[Path]:
    return sorted(path for folder in IMPORTERS for path in folder.rglob("*.py") if "fixtures" not in path.parts)


def test_the_rule_sees_every_spelling_of_a_test_module_import():
    tiny = ["line 1: tests.parity.test_parity_tiny"]
    assert imports_of_test_modules("from tests.ui.test_app import APP") == ["line 1: tests.ui.test_app"]
    assert imports_of_test_modules("import tests.parity.test_parity_tiny as t") == tiny
    assert imports_of_test_modules("from tests.parity import test_parity_tiny") == tiny
    assert imports_of_test_modules("def f():\n    from tests.transformer.test_kv_cache import x") == [
        "line 2: tests.transformer.test_kv_cache"]
    assert imports_of_test_modules("from tests.helpers.pages import APP\nfrom tests.conftest import ROOT") == []
    assert imports_of_test_modules("from tests.helpers import tiny_tokenizers") == []


def test_no_module_imports_a_test_module():
    offenders = {}
    for path in python_files():
        found = imports_of_test_modules(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, (
        "test modules imported (move the helper to tests/helpers/ or a fixture to a conftest.py):\n"
        + "\n".join(f"  {path}: {', '.join(found)}" for path, found in offenders.items()))


def test_every_test_folder_is_a_package():
    """tests/ is a package, so each folder under it needs an __init__.py: without one pytest imports its
    files by basename, and two test files of the same name in different folders would collide."""
    folders = {path.parent for path in TESTS.rglob("*.py") if "fixtures" not in path.parts}
    missing = sorted(str(folder.relative_to(ROOT)) for folder in folders if not (folder / "__init__.py").is_file())
    assert not missing, f"folders without __init__.py: {missing}"


def test_test_modules_live_in_a_layer_folder():
    """The suite is grouped by layer (tests/<layer>/test_*.py); only conftest.py and __init__.py stay at the top."""
    loose = sorted(path.name for path in TESTS.glob("*.py") if path.name not in ("conftest.py", "__init__.py"))
    assert not loose, f"files directly in tests/: {loose}; put each in the folder of the layer it tests"
