"""Query-key attribution (attnviz.readouts.qk_attribution) against references nobody here wrote: the
log-ratios of Hugging Face eager's attention weights, and the scores of the offline models. Every family's
terms are checked against its recorded scores in tests/parity/test_every_family.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz import plots
from attnviz.readouts.qk_attribution import RECORD_NAMES, attribute, qk_attribution
from attnviz.transformer.record import Recorder
from tests.helpers.tiny_hf import tiny_pair

T = 12
TEXT = "The keys to the cabinet are on the table."


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3", "gemma2"])  # q/k biases; q/k norms; soft-cap
def test_a_rows_score_differences_are_the_log_ratios_of_hf_eagers_weights(model_type):
    """score(i, j) - score(i, j') split into terms sums to log(a_ij / a_ij') of HF eager (through the soft-cap
    where the model has one: the terms are before it), for GQA query heads reading a shared KV head."""
    module, hf = tiny_pair(model_type)
    ids = torch.randint(3, 99, (1, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        weights = torch.stack(hf(ids, output_attentions=True).attentions)[:, 0].double()  # L, H, T, S
        record = module(ids, record=Recorder(*RECORD_NAMES)).record
    worst = 0.0
    for layer, head, query in ((0, 1, T - 1), (1, 2, 3), (2, 3, T - 2)):
        row = weights[layer, head, query]
        visible = torch.nonzero(row > 0).flatten().tolist()
        key, key2 = visible[0], visible[-1]
        split = attribute(module, record, ids, layer, head, query, key, key2)
        assert split.kv_head == module.kv_group[head]
        assert abs(split.total - split.score) <= 1e-4
        capped = split.total if split.softcap is None else split.capped  # the cap: of each score, not the sum
        worst = max(worst, abs(capped - float(torch.log(row[key] / row[key2]))))
    assert worst <= 1e-4, (model_type, worst)


@pytest.mark.parametrize(("fixture", "layer", "head"), [("minilm", 5, 7), ("smollm", 20, 3)])
def test_the_terms_sum_to_the_offline_models_own_scores(request, fixture, layer, head):
    """Real weights: the terms of a cell sum to the score the model records there, the components are the
    parts of the stream entering the layer (and the projection bias), and positions count special tokens."""
    model = request.getfixturevalue(fixture)
    tokens = model.encode(TEXT).tokens
    query, key = len(tokens) - 2, 2
    split = qk_attribution(model, TEXT, layer, head, query, key)
    recorded = model.record(TEXT, names=("scores",), layer=layer)["scores"][head, query, key]
    assert abs(split.total - float(recorded)) <= 1e-4
    assert abs(split.score - float(recorded)) <= 1e-4
    assert split.query_names[:1] == ["embed"] and split.query_names[-2:] == ["rest", "bias"]
    assert f"L{layer - 1}.mlp" in split.key_names and f"L{layer}.H0" not in split.key_names
    assert np.isfinite(split.matrix).all() and len(split.terms()) == split.matrix.size
    figure = plots.qk_attribution_figure(split, grouped=True)  # the notebook's: each layer's heads summed
    assert abs(np.asarray(figure.data[0].z, dtype=np.float64).sum() - split.score) <= 1e-3
    if model.info.causal:
        with pytest.raises(ValueError, match="not visible"):
            qk_attribution(model, TEXT, layer, head, key, query)


# --- T5: an encoder-decoder's encoder, its relative-position buckets a term of their own --------------------


@pytest.fixture(scope="module", params=[True, False], ids=["t5_v1_1", "t5_1_0"])
def t5_folder(request, tmp_path_factory):
    """A tiny random T5 (v1.1: gated-gelu; 1.0: relu) and its tiny SentencePiece tokenizer, saved as HF saves
    them, so `attnviz.load` opens it as a user's folder."""
    from tests.helpers.seq2seq import hf_t5, t5_tokenizer

    folder = tmp_path_factory.mktemp("t5")
    tokenizer = t5_tokenizer()
    tokenizer.save_pretrained(folder)
    hf_t5(gated=request.param, seed=2, vocab=len(tokenizer)).save_pretrained(folder)
    return folder


def test_t5_encoder_terms_sum_to_the_score_and_row_differences_equal_hf_log_ratios(t5_folder, monkeypatch, capsys):
    import json

    import transformers as tf

    import attnviz
    from attnviz.cli.main import main
    from attnviz.readouts.qk_attribution import T5_BUCKET

    model = attnviz.load(str(t5_folder))
    hf = tf.T5ForConditionalGeneration.from_pretrained(t5_folder, attn_implementation="eager").eval()
    text = "the cat sat on the mat and the dog sat on the rug"
    ids = torch.tensor([model.encode(text).ids])
    with torch.no_grad():
        weights = hf.encoder(input_ids=ids, output_attentions=True).attentions  # per layer: B, H, S, S
    n = ids.shape[1]
    query, key, key2 = n - 2, 1, n - 5
    for layer, layer_weights in enumerate(weights):
        for head in range(layer_weights.shape[1]):
            split = qk_attribution(model, text, layer, head, query, key)
            assert split.total == pytest.approx(split.score, abs=1e-4)
            bucket = [term.value for term in split.terms() if term.query == T5_BUCKET]
            assert len(bucket) == 1 and bucket[0] != 0.0  # the bucket bias is a term, and it counts
            row = qk_attribution(model, text, layer, head, query, key, key2)
            own = float(torch.log(layer_weights[0, head, query, key] / layer_weights[0, head, query, key2]))
            assert row.total == pytest.approx(own, abs=1e-4)  # HF eager's log-ratio of the two weights
        assert any(name.startswith(f"L{layer - 1}.H") for name in split.query_names) == (layer > 0)
    monkeypatch.setattr(attnviz, "load", lambda source: model)
    assert main(["qk", "--model", "t5", "--text", text, "--layer", "1", "--head", "0", "--query", str(query),
                 "--key", str(key), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sum"] == pytest.approx(printed["score"], abs=1e-4) and len(printed["tokens"]) == n
    with pytest.raises(ValueError, match="one source text"):
        qk_attribution(model, text, 0, 0, query, key, text_pair="a second sentence")


def test_a_post_norm_encoder_decoder_is_refused_with_a_reason():
    from attnviz.readouts.qk_attribution import attribute_encoder
    from tests.helpers.seq2seq import hf_bart, ours_from

    module = ours_from(hf_bart()).eval()
    ids = torch.tensor([[3, 4, 5, 6]])
    record = Recorder(*RECORD_NAMES)
    with torch.no_grad():
        module.encode(ids, record=record)
    with pytest.raises(ValueError, match="pre-norm one \\(T5\\)"):
        attribute_encoder(module, record, ids, 0, 0, 2, 1)
