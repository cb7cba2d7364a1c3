"""The dependency direction of docs/architecture.md, checked on the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnviz"
THIRD_PARTY_ALLOWED_IN_CORE = {"torch", "numpy"}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules():
    return {p.relative_to(PACKAGE).as_posix(): imports(p) for p in PACKAGE.rglob("*.py")}


def top(name: str) -> str:
    return name.split(".")[0]


def test_package_uses_absolute_imports_only():
    """Relative imports would slip past the checks below."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path}: relative import"


def test_only_loading_hf_imports_transformers():
    users = {m for m, names in modules().items() if any(top(n) == "transformers" for n in names)}
    assert users == {"loading/hf.py"}


def test_only_ui_imports_streamlit():
    users = {m for m, names in modules().items() if any(top(n) == "streamlit" for n in names)}
    assert all(m.startswith("ui/") for m in users), users


def test_core_imports_only_torch_numpy_stdlib_and_core():
    import sys

    for module, names in modules().items():
        if not module.startswith("transformer/"):
            continue
        for name in names:
            if top(name) == "attnviz":
                assert name.startswith("attnviz.transformer"), f"{module} imports {name}"
            else:
                assert top(name) in THIRD_PARTY_ALLOWED_IN_CORE | set(sys.stdlib_module_names), (module, name)


def test_analysis_and_plots_stay_off_models_and_ui():
    for module, names in modules().items():
        if module.startswith("analysis/"):
            assert {top(n) for n in names} <= {"attnviz", "numpy", "__future__"} | _stdlib(), (module, names)
            assert all(n in ("attnviz.trace",) or n.startswith("attnviz.analysis") for n in names
                       if top(n) == "attnviz"), module
        if module.startswith("plots/"):
            assert not {top(n) for n in names} & {"streamlit", "torch", "transformers"}, names


def _stdlib() -> set[str]:
    import sys

    return set(sys.stdlib_module_names)
