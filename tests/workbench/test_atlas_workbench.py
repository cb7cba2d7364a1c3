"""workbench/atlas.py without a model: where an atlas lives (never a visitor's path), ranks, and relation scores
read defensively (the atlas's "relations" may be absent, null or partial)."""

from __future__ import annotations

from pathlib import Path

from attnviz.workbench import Workbench
from attnviz.workbench import atlas as work


def test_the_atlas_folder_follows_the_settings_and_hashes_the_store_key(tmp_path):
    assert work.atlas_root({work.ATLAS_DIR_VARIABLE: str(tmp_path)}) == tmp_path
    assert work.atlas_root({work.ATLAS_DIR_VARIABLE: " off "}) is None
    assert work.atlas_root({work.ATLAS_DIR_VARIABLE: ""}) is None
    assert work.atlas_root({"ATTNVIZ_CACHE_DIR": str(tmp_path)}) == tmp_path / "atlas"
    assert work.atlas_root({"ATTNVIZ_CACHE_DIR": "off"}) is None
    assert work.atlas_root({}) == Path.home() / ".cache" / "attnviz" / "atlas"
    bench = Workbench(budget=2_000_000_000)
    bench.model_keys.put("../../etc", "hub:owner/name", 10)  # what a visitor typed never becomes a path
    name = work.folder_name("hub:owner/name")
    assert len(name) == 32 and set(name) <= set("0123456789abcdef")
    assert work.store_key(bench, "../../etc") == "hub:owner/name"


def test_ranks_and_relation_scores_are_read_defensively():
    grid = [[0.5, None], [0.9, 0.1]]
    assert work.head_ranks(grid, 0, 0) == (0.5, 2, 3)
    assert work.head_ranks(grid, 0, 1) == (None, None, 3)
    assert work.head_ranks(grid, 5, 5) == (None, None, 3)
    assert work.relation_scores({}, 0, 0) == []
    assert work.relation_scores({"relations": None}, 0, 0) == []
    found = {"relations": {"nsubj": {"source_to_target": grid, "target_to_source": None, "n": 4,
                                     "best": {"source_to_target": {"layer": 1, "head": 0, "accuracy": 0.9}},
                                     "baselines": {"source_to_target": {}}}, "bad": 3}}
    assert work.relation_scores(found, 1, 0) == [
        {"relation": "nsubj", "direction": "source_to_target", "score": 0.9, "rank": 1, "of": 3}]
    assert work.seed_table({"metrics": {}}) is None
    rows = work.seed_table(found)
    assert rows is not None and len(rows) == 4 and rows[0]["available"] and rows[0]["best"]["layer"] == 1
    assert work.seed_table({"relations": {"nsubj": {"best": "not a block"}}}) is None  # unreadable: no table
