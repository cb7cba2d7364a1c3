"""The documentation site (mkdocs.yml, docs/): `mkdocs build --strict` passes, which fails on a page left out of
the nav, a link or anchor that does not resolve and a `:::` identifier of docs/reference.md that griffe cannot
find in the tree; every page's code fences balance; docs/cli.md names every subcommand of the parser and no other;
docs/performance.md's benchmarks table names every script in benchmarks/."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.helpers.docs import cli_subcommands, fence_problems, named_commands

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def test_the_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        reason = "mkdocs is not installed (pip install -r requirements-dev.txt)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the docs build cannot be skipped")
        pytest.skip(reason)
    site = tmp_path / "site"
    # NO_MKDOCS_2_WARNING: Material's end-of-life banner, which is not a build warning (requirements-dev.txt)
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(site)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    identifiers = re.findall(r"^::: (\S+)$", (DOCS / "reference.md").read_text(encoding="utf-8"), re.M)
    assert identifiers
    assert [name for name in identifiers if f'id="{name}"' not in reference] == []  # each one rendered


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(DOCS).as_posix())
def test_the_code_fences_balance(page):
    problems = fence_problems(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_command_line_page_names_every_subcommand_and_no_other():
    synopsis = (DOCS / "cli.md").read_text(encoding="utf-8").split("```")[1]  # the first code block
    assert named_commands(synopsis) == cli_subcommands()
    everywhere = set().union(*(named_commands(page.read_text(encoding="utf-8")) for page in PAGES))
    assert everywhere - cli_subcommands() == set()


def test_the_benchmarks_table_names_every_script():
    section = (DOCS / "performance.md").read_text(encoding="utf-8").split("\n## Benchmarks\n", 1)[1]
    listed = [line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `")]
    scripts = sorted(path.name for path in (ROOT / "benchmarks").glob("*.py"))
    assert sorted(listed) == scripts
