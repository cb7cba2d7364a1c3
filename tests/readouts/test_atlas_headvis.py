"""Top examples (attnviz.readouts.atlas_examples) and HeadVis's data tree both ways (atlas_headvis): every field of
the export for every head; an exported sequence's COO against HF eager's full maps (top 8 keys a row, >= 0.005,
4 decimals); the max leaving position 0 out; export -> import -> atlas.metrics; a malformed tree refused where it
is malformed; sequences shorter than 8 keys; a stopped build's examples resumed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers as tf

import attnviz
from attnviz.cli.main import main
from attnviz.readouts import atlas, atlas_headvis
from attnviz.readouts.atlas_examples import MAX_BINS, QK_DISTANCE_EDGES, sequence_measures
from attnviz.readouts.atlas_metrics import METRICS
from tests.helpers.atlas_texts import TEXTS


@pytest.fixture(scope="module")
def llama(tiny_llama):
    hf = tf.AutoModelForCausalLM.from_pretrained(tiny_llama, attn_implementation="eager").eval()
    return attnviz.load(str(tiny_llama)), hf, tiny_llama


def eager(hf, ids) -> np.ndarray:
    with torch.no_grad():
        out = hf(input_ids=torch.tensor([ids]), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].double().numpy()  # L, H, T, T


def reference_coo(a: np.ndarray) -> tuple[list[int], list[float]]:
    """One head's [T, T] map: each row's 8 largest (fewer in a shorter row) >= 0.005, 4 decimals, by (q, k)."""
    t = a.shape[0]
    kept = []
    for q in range(t):
        for k in np.argsort(-a[q], kind="stable")[: min(8, t)]:
            if a[q, k] >= 0.005:
                kept.append((q, int(k), round(float(a[q, k]), 4)))
    kept.sort()
    return [q * t + k for q, k, _ in kept], [v for _, _, v in kept]


@pytest.fixture(scope="module")
def built(llama, tmp_path_factory):
    model = llama[0]
    folder = tmp_path_factory.mktemp("atlas")
    atlas.build(model, TEXTS, folder, examples=True, warmup=2)
    tree = tmp_path_factory.mktemp("tree")
    atlas_headvis.export(folder, tree)
    return folder, tree


def test_the_export_has_every_field_for_every_head(llama, built):
    model = llama[0]
    _, tree = built
    n_layers, n_heads = model.info.n_layers, model.info.n_heads
    config = json.loads((tree / "config.json").read_text())
    assert (config["n_layers"], config["n_heads"], config["metrics"]) == (n_layers, n_heads, list(METRICS))
    assert config["heads"] == [[layer, head] for layer in range(n_layers) for head in range(n_heads)]
    assert config["head_data_pattern"] == "L{layer}H{head}.json"
    for key in ("model_name", "np_model_id", "dataset_name", "n_intervals", "metric_descriptions", "has_umap",
                "umap_heads", "custom_plots", "custom_tables", "statistics_display", "pipeline_config"):
        assert key in config
    scatter = json.loads((tree / "scatter_data.json").read_text())
    assert [(r["layer"], r["head"]) for r in scatter] == [tuple(h) for h in config["heads"]]
    assert json.loads((tree / "server_config.json").read_text()) == {}
    kept_any = 0
    for layer in range(n_layers):
        for head in range(n_heads):
            payload = json.loads((tree / "heads" / f"L{layer}H{head}.json").read_text())
            assert set(payload) == {"sequences", "qk_distance_histogram", "top_query_tokens", "top_key_tokens",
                                    "histogram", "statistics"}
            for s in payload["sequences"]:
                assert {"tokens", "attention_indices", "attention_values", "seq_len", "interval"} <= set(s)
                assert len(s["tokens"]) == s["seq_len"] and all(isinstance(t, str) for t in s["tokens"])
                assert len(s["attention_indices"]) == len(s["attention_values"]) > 0
                assert all(isinstance(i, int) and 0 <= i < s["seq_len"] ** 2 for i in s["attention_indices"])
                assert all(isinstance(v, float) and v >= 0.005 for v in s["attention_values"])
                assert 1 <= s["interval"] <= config["n_intervals"]
            qk = payload["qk_distance_histogram"]
            assert qk["bin_edges"] == list(QK_DISTANCE_EDGES) and len(qk["bin_values"]) == len(QK_DISTANCE_EDGES) - 1
            histogram = payload["histogram"]
            assert len(histogram["bin_edges"]) == MAX_BINS + 1 and len(histogram["bin_values"]) == MAX_BINS
            assert sum(histogram["bin_values"]) == len(TEXTS)  # every sequence of 2 tokens or more (BOS: all)
            for side in ("top_query_tokens", "top_key_tokens"):
                assert all(set(row) == {"token", "weight"} for row in payload[side])
            assert payload["statistics"]["n_samples"] == len(payload["sequences"])
            assert isinstance(payload["statistics"]["mean_max_activation"], float)
            kept_any += len(payload["sequences"])
    assert kept_any > 0


def test_an_exported_coo_is_hf_eagers_top_8_and_the_max_leaves_position_0_out(llama, built):
    model, hf, _ = llama
    _, tree = built
    by_tokens = {}
    for text in TEXTS:
        ids = model.encode(text).ids
        by_tokens[tuple(model.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False))] = ids
    checked = 0
    for layer in range(model.info.n_layers):
        for head in range(model.info.n_heads):
            payload = json.loads((tree / "heads" / f"L{layer}H{head}.json").read_text())
            for s in payload["sequences"]:
                a = eager(hf, by_tokens[tuple(s["tokens"])])[layer, head]
                indices, values = reference_coo(a)
                assert s["attention_indices"] == indices
                np.testing.assert_allclose(s["attention_values"], values, atol=1.01e-4, rtol=0)
                assert s["max_activation"] == pytest.approx(a[1:, 1:].max(), abs=1e-4)
                checked += 1
    assert checked


def test_short_sequences_and_blocks_split_over_columns(llama):
    model, hf, _ = llama
    for text in ("Hi there", "Ok", TEXTS[0]):
        ids = model.encode(text).ids
        a = eager(hf, ids)
        for rows in (2, 3, 256):  # a row's keys split over blocks of 2 or 3 rows' columns
            _, found = sequence_measures(model.module, ids, chunk_rows=rows)
            for layer in range(a.shape[0]):
                for head in range(a.shape[1]):
                    indices, values = found.coo(layer, head)
                    want_i, want_v = reference_coo(a[layer, head])
                    assert indices.tolist() == want_i
                    np.testing.assert_allclose(values, want_v, atol=1.01e-4, rtol=0)
                    assert found.max[layer, head] == pytest.approx(a[layer, head, 1:, 1:].max(), abs=1e-6)
            t = len(ids)
            d = np.abs(np.arange(t)[:, None] - np.arange(t)[None, :])
            bins = np.searchsorted(QK_DISTANCE_EDGES, d, side="right") - 1
            want = np.stack([(a * (bins == b)).sum((-2, -1)) for b in range(len(QK_DISTANCE_EDGES) - 1)], -1)
            np.testing.assert_allclose(found.qk_mass, want, atol=1e-6)


def test_export_import_round_trip_gives_the_scatter_values(llama, built, tmp_path, capsys):
    _, tree = built
    assert main(["atlas", "import", "--headvis", str(tree), "--out", str(tmp_path / "in")]) == 0
    got = atlas.metrics(tmp_path / "in")
    scatter = json.loads((tree / "scatter_data.json").read_text())
    for row in scatter:
        for name in METRICS:
            assert got["metrics"][name][row["layer"]][row["head"]] == row[name]
    assert main(["atlas", "export", "--atlas", str(tmp_path / "in"), "--headvis", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "scatter_data.json").read_text()) == scatter


def test_a_malformed_tree_is_refused_where_it_is_malformed(built, tmp_path, capsys):
    import shutil

    _, tree = built
    bad = tmp_path / "bad"
    shutil.copytree(tree, bad)
    (bad / "scatter_data.json").write_text('[{"layer": 0, "head": 0,\n "qk_distance": }]')
    assert main(["atlas", "import", "--headvis", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert "scatter_data.json, line 2, column" in capsys.readouterr().err
    (bad / "scatter_data.json").write_text('[{"layer": 99, "head": 0}]')
    with pytest.raises(ValueError, match="row 0: layer 99"):
        atlas_headvis.import_tree(bad, tmp_path / "y")
    shutil.copy(tree / "scatter_data.json", bad / "scatter_data.json")
    (bad / "heads" / "L0H0.json").write_text('{"sequences": [{"seq_len": 2, "interval": 1, "tokens": ["a", "b"], '
                                             '"attention_indices": [9], "attention_values": [0.5]}]}')
    with pytest.raises(ValueError, match=r"L0H0.json, sequence 0: \"attention_indices\""):
        atlas_headvis.import_tree(bad, tmp_path / "z")


def test_a_stopped_build_keeps_the_uninterrupted_examples(llama, built, tmp_path):
    model = llama[0]
    straight, _ = built

    class Stop(Exception):
        pass

    def stop(done, total):
        if done == 5:
            raise Stop

    with pytest.raises(Stop):
        atlas.build(model, TEXTS, tmp_path, examples=True, warmup=2, commit_every=2, commit_seconds=0, progress=stop)
    # resumed with a commit after every text: each commit writes only the slots changed since the last
    atlas.build(model, TEXTS, tmp_path, examples=True, warmup=2, commit_every=1, commit_seconds=0)
    import duckdb

    con = duckdb.connect(str(atlas.atlas_path(tmp_path)), read_only=True)
    try:  # the tokens stored are exactly those of the sequences some head keeps
        stored = {row[0] for row in con.execute("SELECT id FROM sequences").fetchall()}
        kept = {row[0] for row in con.execute("SELECT DISTINCT sequence_id FROM examples").fetchall()}
    finally:
        con.close()
    assert stored == kept and kept
    atlas_headvis.export(tmp_path, tmp_path / "t1")
    atlas_headvis.export(straight, tmp_path / "t2")
    for layer in range(model.info.n_layers):
        for head in range(model.info.n_heads):
            name = f"L{layer}H{head}.json"
            assert (json.loads((tmp_path / "t1" / "heads" / name).read_text())
                    == json.loads((tmp_path / "t2" / "heads" / name).read_text()))
