"""README.md against what nobody writes into it by hand: its code fences balance (an unclosed one turns the rest of
the page inside out on GitHub), its opening paragraph counts and names the loader registry's families, and its
Layout and command lines name exactly the subcommands of the CLI's own argparse parser."""

from __future__ import annotations

import re

from attnviz.loading.families import FAMILIES
from attnviz.loading.registry import CONVERTERS
from tests.conftest import ROOT
from tests.helpers.docs import cli_subcommands, fence_problems, named_commands

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_code_fences_balance():
    assert not fence_problems(README), "README.md:\n" + "\n".join(fence_problems(README))


def test_the_fence_check_finds_a_lost_closing_fence():
    lost = "```python\nd = qk_attribution(m)\n\nSinks and queries:\n\n```python\nfrom attnviz import x\n```\n"
    assert fence_problems(lost) == ["line 6: '```python' inside the block opened at line 1: "
                                    "a missing closing fence above it?"]
    assert fence_problems("```bash\nls\n") == ["line 1: a code block that never closes"]
    assert fence_problems("   ```toml\nA = 1\n   ```\n````\n```\n````\n") == []  # indented; a longer fence


def opening_families(text: str) -> tuple[int, int, list[str]]:
    """(model types, families, family names) of the opening's "N model types in M families: A; B; C." sentence."""
    opening = " ".join(text.split("\n## ", 1)[0].split())  # before the first section, lines joined
    match = re.search(r"(\d+) model types in (\d+) families: (.+?)\. ", opening)
    assert match, "README.md's opening no longer says 'N model types in M families: ...'"
    return int(match.group(1)), int(match.group(2)), match.group(3).split("; ")


def test_the_opening_paragraph_names_the_registry_families():
    n_types, n_families, names = opening_families(README)
    assert n_types == len(CONVERTERS), "the registry's model types (attnviz/loading/registry.py)"
    assert n_families == len(FAMILIES), "the families of attnviz/loading/families.py"
    assert names == [family.name for family in FAMILIES], "the families, in the order of families.py"


def layout_commands(text: str) -> list[str]:
    """The names in backticks in the second cell of the Layout table's `attnviz/cli/` row."""
    (row,) = [line for line in text.splitlines() if line.startswith("| `attnviz/cli/` |")]
    return re.findall(r"`([^`]+)`", row.split("|")[2])


def test_the_layout_names_every_subcommand_once():
    names = layout_commands(README)
    assert len(names) == len(set(names)), names
    assert set(names) == cli_subcommands()


def test_the_readme_runs_no_command_that_does_not_exist():
    assert named_commands(README) - cli_subcommands() == set()
    assert named_commands(README), "the pattern no longer finds README's command lines"


def folder_rows(text: str) -> set[str]:
    """The package folders (`attnviz/x/`) named at the start of a table row's first cell."""
    return set(re.findall(r"(?m)^\| `attnviz/(\w+)/`", text))


def test_the_folder_tables_name_every_layer_and_nothing_else():
    """README's Layout and the docs' index list one row per folder of the package, the folders as they are."""
    layers = {path.name for path in (ROOT / "attnviz").iterdir() if (path / "__init__.py").is_file()}
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        assert folder_rows(page.read_text(encoding="utf-8")) == layers, page.name
