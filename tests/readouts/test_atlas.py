"""The head atlas (attnviz.readouts.atlas, atlas_metrics; issue 37's first slice): HeadVis's six metrics from our
streaming pass, kept in DuckDB, against the definitions written out below on Hugging Face eager's full
`output_attentions=True` maps, for a tiny random Llama saved to a folder (BOS, GQA), a tiny GPT-2 (no BOS, so a
text can be one token) and a tiny Mistral with a sliding window; the merge of partial sums; a stopped build
resumed; the command line's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers as tf

import attnviz
from attnviz.cli.main import main
from attnviz.loading import build_module
from attnviz.readouts import atlas
from attnviz.readouts.atlas_metrics import COUNTS, METRICS, SUMS, HeadSums, diagonal_sums, sequence_sums
from tests.helpers import tiny_hf
from tests.helpers.tiny_tokenizers import bpe_tokenizer

TEXTS = [
    "The cat sat on the mat. The cat sat on the mat. The cat",  # repeated tokens: induction rows
    "a",  # GPT-2: one token, left out
    "The keys to the cabinet are on the table.",
    "the the the the the",  # a token repeated next to itself: the induction key is the query itself
    "A dog ran in the park, and the cat watched the dog from the wall.",
]
TOLERANCE = 1e-6


def reference(hf, ids_of_texts, threshold=0.01) -> dict[str, np.ndarray]:
    """HeadVis's definitions on HF eager's full [T, T] maps, float64, pooled over every position of every
    sequence of 2 tokens or more."""
    n_layers, n_heads = hf.config.num_hidden_layers, hf.config.num_attention_heads
    total = {name: np.zeros((n_layers, n_heads)) for name in ("self", "prev", "entropy", "d", "d2", "induction")}
    positions = previous = induction_rows = 0
    for ids in ids_of_texts:
        t = len(ids)
        if t < 2:
            continue
        with torch.no_grad():
            out = hf(input_ids=torch.tensor([ids]), output_attentions=True)
        a = torch.stack(out.attentions)[:, 0].double().numpy()  # L, H, T, T
        i = np.arange(t)
        distance = np.abs(i[:, None] - i[None, :]).astype(np.float64)
        total["self"] += a[..., i, i].sum(-1)
        total["prev"] += a[..., i[1:], i[1:] - 1].sum(-1)
        logs = np.log(np.where(a > 0, a, 1.0))
        total["entropy"] += -(a * logs).sum((-2, -1))
        total["d"] += (a * distance).sum((-2, -1))
        total["d2"] += (a * distance**2).sum((-2, -1))
        positions, previous = positions + t, previous + t - 1
        for q in range(t):
            earlier = [k for k in range(q) if ids[k] == ids[q]]
            induction_rows += bool(earlier)
            for k in earlier:
                value = a[..., q, k + 1]
                total["induction"] += np.where(value >= threshold, value, 0.0)
    mean_distance = total["d"] / positions
    return {"self_attention_score": total["self"] / positions, "prev_token_score": total["prev"] / previous,
            "pattern_entropy": total["entropy"] / positions, "qk_distance": mean_distance,
            "qk_distance_variance": total["d2"] / positions - mean_distance**2,
            "induction_score": total["induction"] / induction_rows}


@pytest.fixture(scope="module")
def llama(tiny_llama):
    """(our model loaded from the saved folder, HF eager from the same folder, the folder)."""
    hf = tf.AutoModelForCausalLM.from_pretrained(tiny_llama, attn_implementation="eager").eval()
    return attnviz.load(str(tiny_llama)), hf, tiny_llama


@pytest.fixture(scope="module")
def gpt2():
    return tiny_hf.tiny_decoder("gpt2", bpe_tokenizer(bos=False), seed=3)


def grids(result: dict) -> dict[str, np.ndarray]:
    return {name: np.array(result["metrics"][name], dtype=np.float64) for name in METRICS}


def assert_metrics_equal(got: dict, want: dict, tolerance=TOLERANCE) -> None:
    for name in METRICS:
        np.testing.assert_allclose(got[name], want[name], atol=tolerance, rtol=0, err_msg=name)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_the_six_metrics_equal_hf_eager(family, llama, gpt2, tmp_path):
    model, hf = (llama[0], llama[1]) if family == "llama" else gpt2
    ids = [model.encode(text).ids for text in TEXTS]
    assert (min(map(len, ids)) == 1) == (family == "gpt2")  # GPT-2's "a" is one token; Llama adds BOS
    want = reference(hf, ids)
    assert np.nanmax(want["induction_score"]) > 0.05  # the repeated tokens make it bite
    result = atlas.build(model, TEXTS, tmp_path)
    assert_metrics_equal(grids(result), want)
    skipped = int(family == "gpt2")
    assert (result["n_texts"], result["n_sequences"], result["skipped"]) == (5, 5 - skipped, skipped)
    assert result["complete"] and result["model"] == model.info.name
    for rows in (3, 7):  # blocks of a few query rows: each row's keys split over blocks
        sums = sum((sequence_sums(model.module, x, chunk_rows=rows) for x in ids), HeadSums.zeros(*model_shape(model)))
        assert_metrics_equal(sums.metrics(), want)


def test_a_sliding_window_model_equals_hf_eager():
    """Mistral with a window of 4 keys: blocks whose columns start after 0 (c0 > 0), the keys outside the window
    in no block."""
    hf = tiny_hf.hf_model(tiny_hf.llama_like(tf.MistralForCausalLM, tf.MistralConfig, 2, sliding_window=4))
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(3, 20, (n,), generator=g).tolist() for n in (30, 9, 2)]  # small vocabulary: repeats
    want = reference(hf, ids)
    for rows in (4, 256):
        sums = sum((sequence_sums(module, x, chunk_rows=rows) for x in ids), HeadSums.zeros(2, 4))
        assert_metrics_equal(sums.metrics(), want)


def model_shape(model) -> tuple[int, int]:
    return model.info.n_layers, model.info.n_heads


def test_texts_are_cut_at_seq_len(llama, tmp_path):
    model, hf, _ = llama
    ids = [model.encode(text, max_tokens=8).ids for text in TEXTS]
    assert max(map(len, ids)) == 8
    assert_metrics_equal(grids(atlas.build(model, TEXTS, tmp_path, seq_len=8)), reference(hf, ids))


def test_a_metric_with_no_count_is_none(gpt2, tmp_path):
    model, _ = gpt2
    result = atlas.build(model, ["a", "The cabinet is old."], tmp_path)  # no token repeats
    assert all(value is None for row in result["metrics"]["induction_score"] for value in row)
    assert all(value is not None for row in result["metrics"]["qk_distance"] for value in row)
    with pytest.raises(ValueError, match="no atlas"):
        atlas.metrics(tmp_path / "nowhere")


def test_sums_of_two_halves_add_to_the_sums_of_the_whole(llama):
    model = llama[0]
    parts = [sequence_sums(model.module, model.encode(text).ids) for text in TEXTS]
    zero = HeadSums.zeros(*model_shape(model))
    whole, first, second = sum(parts, zero), sum(parts[:2], zero), sum(parts[2:], zero)
    merged = first + second
    for name in SUMS:
        np.testing.assert_allclose(getattr(merged, name), getattr(whole, name), rtol=1e-13, atol=0)
    for name in COUNTS:
        assert getattr(merged, name) == getattr(whole, name)
    assert_metrics_equal(merged.metrics(), whole.metrics(), tolerance=1e-12)
    with pytest.raises(ValueError, match="do not add"):
        whole + HeadSums.zeros(1, 1)


class Stop(Exception):
    pass


def test_a_stopped_build_resumes_where_it_stopped(llama, tmp_path):
    model = llama[0]
    straight = atlas.build(model, TEXTS, tmp_path / "straight")

    def stop_after_three(done, total):
        assert total == len(TEXTS)
        if done == 3:
            raise Stop

    with pytest.raises(Stop):  # committed after 2 texts, then kept at 3 when stopped
        atlas.build(model, TEXTS, tmp_path / "stopped", commit_every=2, progress=stop_after_three)
    partial = atlas.metrics(tmp_path / "stopped")
    assert (partial["n_texts"], partial["complete"]) == (3, False)

    with pytest.raises(ValueError, match="other texts"):
        atlas.build(model, [TEXTS[1], *TEXTS[1:]], tmp_path / "stopped")
    with pytest.raises(ValueError, match="other settings"):
        atlas.build(model, TEXTS, tmp_path / "stopped", seq_len=16)
    with pytest.raises(ValueError, match="other settings.*dtype"):  # bfloat16 sums would be added to float32's
        atlas.build(attnviz.load(str(llama[2]), dtype="bfloat16"), TEXTS, tmp_path / "stopped")
    with pytest.raises(ValueError, match="more than these"):
        atlas.build(model, TEXTS[:2], tmp_path / "stopped")

    calls = []
    resumed = atlas.build(model, TEXTS, tmp_path / "stopped", progress=lambda done, total: calls.append(done))
    assert calls == [4, 5]  # only the remaining texts ran
    assert resumed == straight  # the same numbers, bit for bit, and the same counts


def test_the_command_line_builds_and_prints_json(llama, tmp_path, capsys):
    model, _, folder = llama
    lines = tmp_path / "texts.txt"
    lines.write_text("\n".join(TEXTS) + "\n\n", encoding="utf-8")
    jsonl = tmp_path / "texts.jsonl"
    jsonl.write_text("\n".join(json.dumps({"text": text, "id": i}) for i, text in enumerate(TEXTS)), encoding="utf-8")
    for source, out in ((lines, "a"), (jsonl, "b")):
        argv = ["atlas", "build", "--model", str(folder), "--texts", str(source), "--out", str(tmp_path / out)]
        assert main(argv) == 0
        assert "texts 5/5" in capsys.readouterr().err
    assert main(["atlas", "metrics", "--atlas", str(tmp_path / "a"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {"model", "n_texts", "metrics"} <= set(printed)
    assert printed["model"] == str(folder) and printed["n_texts"] == len(TEXTS)
    assert list(printed["metrics"]) == list(METRICS)
    for grid in printed["metrics"].values():
        assert len(grid) == model.info.n_layers and all(len(row) == model.info.n_heads for row in grid)
    assert printed == atlas.metrics(tmp_path / "b")  # JSONL's "text" fields: the same texts
    assert_metrics_equal(grids(printed), grids(atlas.build(model, TEXTS, tmp_path / "c")))
    assert main(["atlas", "metrics", "--atlas", str(tmp_path / "a")]) == 0
    assert "induction_score" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"id": 2}\n', encoding="utf-8")
    assert main(["atlas", "build", "--model", str(folder), "--texts", str(bad), "--out", str(tmp_path / "d")]) == 2
    assert "bad.jsonl, line 2" in capsys.readouterr().err


def test_every_table_exports_as_parquet_and_reads_back(llama, tmp_path, capsys):
    """`atlas export --parquet`: one file per table, read back by DuckDB's own Parquet reader, row for row."""
    import duckdb

    model, _, folder = llama
    atlas.build(model, TEXTS, tmp_path / "a")
    assert main(["atlas", "export", "--atlas", str(tmp_path / "a"), "--parquet", str(tmp_path / "pq")]) == 0
    con = duckdb.connect(str(atlas.atlas_path(tmp_path / "a")), read_only=True)
    try:
        tables = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"build", "heads", "sums"} <= tables
        assert {path.stem for path in (tmp_path / "pq").glob("*.parquet")} == tables
        for table in tables:
            stored = con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
            read = duckdb.sql(f"SELECT * FROM read_parquet('{tmp_path / 'pq' / table}.parquet') ORDER BY ALL")
            assert read.fetchall() == stored, table
    finally:
        con.close()
    assert main(["atlas", "export", "--atlas", str(tmp_path / "none"), "--parquet", str(tmp_path / "q")]) == 2
    assert "no atlas there" in capsys.readouterr().err


@pytest.mark.parametrize("shape", [(3, 1, 5), (2, 7, 7), (4, 16, 40), (2, 37, 21), (9, 256, 512)])
def test_diagonal_sums_are_the_sums_along_each_diagonal(shape):
    """Against torch.diagonal, diagonal by diagonal: blocks of one row, square, of a multiple of DIAGONAL_ROWS
    rows, of more rows than columns, SmolLM2's at 512 tokens; a corner off the origin; the scratch reused."""
    g = torch.Generator().manual_seed(0)
    scratch = {}
    for r0, c0 in ((0, 0), (300, 17)):
        p = torch.softmax(torch.randn(shape, generator=g), -1)
        distance, sums = diagonal_sums(p, r0, c0, scratch)
        assert sums.dtype == torch.float64 and sums.shape == (shape[0], distance.numel())
        for d in range(-(shape[2] - 1), shape[1]):  # every diagonal of the block, relative to its corner
            want = torch.diagonal(p.double(), offset=-d, dim1=1, dim2=2).sum(-1)
            got = sums[:, distance == d + r0 - c0]
            assert got.shape[1] == 1, d
            torch.testing.assert_close(got[:, 0], want, rtol=1e-6, atol=1e-9)
        outside = ~torch.isin(distance - (r0 - c0), torch.arange(-(shape[2] - 1), shape[1]))
        assert float(sums[:, outside].abs().sum()) == 0.0  # the diagonals of the padding rows: zero
