"""The dependency direction of docs/layers.md ("Layers"), checked on the import statements of every
module: each folder of the package is a layer and imports only the layers listed for it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "attnviz"

# Layer -> the attnviz layers it may import (besides itself). "attnviz" is the package root (`attnviz.load`,
# the seed's `attnviz.attention` re-export); "trace" is attnviz/trace/, the data every layer passes on.
LOWER = {
    "memory": set(),
    "transformer": {"memory"},
    "trace": set(),
    "analysis": {"trace"},
    "plots": {"trace", "analysis"},
    "probesets": {"analysis"},
    "models": {"memory", "transformer", "trace"},
    "loading": {"memory", "models", "transformer", "trace"},
    "reference": {"memory", "loading", "models", "transformer", "trace"},
    "attention_kinds": {"memory", "transformer", "analysis"},
    "readouts": {"memory", "attnviz", "loading", "models", "transformer", "trace", "analysis", "probesets"},
    "interventions": {"memory", "attnviz", "loading", "models", "transformer", "trace", "analysis", "probesets",
                      "readouts"},
    "findings": {"memory", "attnviz", "loading", "models", "transformer", "trace", "analysis", "probesets",
                 "readouts", "interventions"},
    "workbench": {"memory", "attnviz", "loading", "models", "transformer", "trace", "analysis", "probesets",
                  "readouts", "interventions", "attention_kinds", "findings", "reference", "plots"},
    "cli": {"memory", "attnviz", "loading", "models", "transformer", "trace", "analysis", "probesets", "readouts",
            "interventions", "attention_kinds", "findings", "reference"},
    "ui": {"workbench", "plots", "analysis", "trace", "probesets"},
    "attnviz": {"memory", "transformer", "loading", "cli"},
}
THIRD_PARTY = {
    "memory": {"psutil"},
    "transformer": {"torch", "numpy"},
    "trace": {"numpy", "jieba"},
    "analysis": {"numpy"},
    "plots": {"numpy", "plotly"},
    "probesets": set(),
    "ui": {"streamlit", "numpy", "pandas", "plotly"},
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "attnviz":  # `from attnviz import plots` names the layer plots
                names.update(f"attnviz.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
    return names


def modules():
    return {p.relative_to(PACKAGE).as_posix(): imports(p) for p in PACKAGE.rglob("*.py")}


def top(name: str) -> str:
    return name.split(".")[0]


def layer_of_module(relative: str) -> str:
    """`transformer/attention.py` -> "transformer"; `trace/words.py` -> "trace"; root files -> "attnviz"."""
    return relative.split("/")[0] if "/" in relative else "attnviz"


def layer_of_import(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1:
        return "attnviz"
    return parts[1] if parts[1] in LOWER else "attnviz"


def test_every_folder_is_a_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LOWER) - {"attnviz"}


def test_package_uses_absolute_imports_only():
    """Relative imports would slip past the checks below."""
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path}: relative import"


def test_layers_import_only_the_layers_below():
    for module, names in modules().items():
        layer = layer_of_module(module)
        for name in names:
            if top(name) != "attnviz":
                continue
            target = layer_of_import(name)
            assert target == layer or target in LOWER[layer], f"{module} ({layer}) imports {name} ({target})"


def test_layers_use_only_their_third_party_packages():
    for module, names in modules().items():
        layer = layer_of_module(module)
        if layer not in THIRD_PARTY:
            continue
        for name in names:
            if top(name) in ("attnviz", "__future__") or top(name) in sys.stdlib_module_names:
                continue
            assert top(name) in THIRD_PARTY[layer], f"{module} ({layer}) imports {name}"


def test_only_loading_hf_imports_transformers():
    users = {m for m, names in modules().items() if any(top(n) == "transformers" for n in names)}
    assert users == {"loading/hf.py"}


def test_only_loading_imports_accelerate():
    """Models split by accelerate (loading/split.py): the loaded module carries hooks, but no layer above
    loading calls accelerate itself."""
    users = {m for m, names in modules().items() if any(top(n) == "accelerate" for n in names)}
    assert users and all(m.startswith("loading/") for m in users), users


def test_only_ui_imports_streamlit_and_ui_imports_no_torch():
    streamlit_users = {m for m, names in modules().items() if any(top(n) == "streamlit" for n in names)}
    assert all(m.startswith("ui/") for m in streamlit_users), streamlit_users
    torch_users = {m for m, names in modules().items() if any(top(n) == "torch" for n in names)}
    assert not {m for m in torch_users if m.startswith("ui/")}, torch_users


# The pages of ui/: the modules app.py and app_pages/*.py run (each one `render`). Everything else in ui/ is a
# section or widget that pages import; a page imports no other page, and no section imports a page.
PAGES = {"ui/explore.py", "ui/head_finder.py", "ui/learn.py", "ui/translate.py", "ui/findings.py", "ui/atlas.py"}


def module_name(relative: str) -> str:
    """`ui/explore.py` -> "attnviz.ui.explore"; `ui/__init__.py` -> "attnviz.ui"."""
    parts = ["attnviz", *relative.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path) -> set[str]:
    """The package's modules `path` imports, at module level or inside a function: `from attnviz.ui import
    lenses` names the module attnviz.ui.attention_lenses, `from attnviz.workbench import Busy` the package."""
    known = {module_name(p.relative_to(PACKAGE).as_posix()) for p in PACKAGE.rglob("*.py")}
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                names.add(submodule if submodule in known else node.module)
    return {name for name in names if name in known}


def import_graph() -> dict[str, set[str]]:
    return {module_name(p.relative_to(PACKAGE).as_posix()): module_imports(p) for p in PACKAGE.rglob("*.py")}


def test_the_pages_are_what_the_app_runs():
    root = PACKAGE.parent
    run = set()
    for page in [root / "app.py", *sorted((root / "app_pages").glob("*.py"))]:
        for node in ast.walk(ast.parse(page.read_text())):
            if isinstance(node, ast.ImportFrom) and any(alias.name == "render" for alias in node.names):
                run.add(node.module.removeprefix("attnviz.").replace(".", "/") + ".py")
    assert run == PAGES


def test_no_module_imports_a_page():
    """Pages share sections and widgets, never each other: a page module imported by another module (a page
    or a section) would be a page that is also a library."""
    pages = {module_name(page) for page in PAGES}
    for module, names in import_graph().items():
        assert not names & pages, f"{module} imports the page(s) {sorted(names & pages)}"


def test_no_import_cycles():
    """No module of the package reaches itself through imports, counting those inside functions. The root's
    `attnviz.load` imports attnviz.loading inside the function, and workbench and cli call `attnviz.load`
    (an `import attnviz` of the root module): no cycle, as long as nothing under loading imports the root."""
    graph = import_graph()
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for name in sorted(graph.get(module, ())):
            if name in path:
                cycles.append(path[path.index(name):] + [name])
            elif name not in done:
                visit(name, [*path, name])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)
