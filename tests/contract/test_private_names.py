"""No module of the package reaches into another module's private names (a leading underscore): what two
modules share is public, one layer down, and named for what it is. Checked on the import statements and on
attribute reads of imported attnviz modules (`from attnviz.x import _y`, `x._y`)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "attnviz"


def private_uses(source: str) -> list[str]:
    """`line N: name` for each private name of another attnviz module that `source` imports or reads."""
    tree = ast.parse(source)
    modules, found = set(), []  # local names bound to attnviz modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "attnviz":
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: {node.module}.{alias.name}")
                elif (PACKAGE.parent / node.module.replace(".", "/") / f"{alias.name}.py").exists():
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "attnviz" and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_rule_sees_both_spellings():
    assert private_uses("from attnviz.models.inputs import _x, text_ids") == ["line 1: attnviz.models.inputs._x"]
    assert private_uses("from attnviz.models import inputs\ninputs._x(1)") == ["line 2: inputs._x"]
    assert private_uses("from attnviz.models import inputs\ninputs.text_ids(1)\nself._x") == []


def test_no_module_imports_another_modules_private_name():
    offenders = {str(path.relative_to(PACKAGE)): found for path in sorted(PACKAGE.rglob("*.py"))
                 if (found := private_uses(path.read_text(encoding="utf-8")))}
    assert not offenders, "private names used across modules:\n" + "\n".join(
        f"  {path}: {', '.join(found)}" for path, found in offenders.items())
