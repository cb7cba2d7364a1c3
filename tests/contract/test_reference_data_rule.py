"""The reference-data folder has one rule (attnviz/analysis/reference_data.py): no other module of the package,
the tests, the benchmarks or the scripts spells the environment variable's name or builds the
`../shared/data` path itself."""

from __future__ import annotations

from pathlib import Path

from attnviz.analysis import reference_data
from tests.conftest import ROOT

RULE = ROOT / "attnviz" / "analysis" / "reference_data.py"


def test_only_the_rule_names_the_folder():
    spelled = []
    for folder in ("attnviz", "tests", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in (RULE, Path(__file__).resolve()):
                continue
            text = path.read_text(encoding="utf-8")
            if '"ATTNVIZ_DATA_DIR"' in text or '/ "shared" / "data"' in text:
                spelled.append(str(path.relative_to(ROOT)))
    assert not spelled, f"the reference-data folder spelled outside its rule: {spelled}"


def test_the_rule(monkeypatch, tmp_path):
    monkeypatch.setenv(reference_data.DATA_ENV, str(tmp_path))
    assert reference_data.data_path("ud", "x.conllu") == tmp_path / "ud" / "x.conllu"
    monkeypatch.setenv(reference_data.DATA_ENV, "  ")
    assert reference_data.data_dir() == ROOT.parent / "shared" / "data"
