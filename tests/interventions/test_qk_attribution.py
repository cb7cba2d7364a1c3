"""Query-key attribution (attnviz.interventions.qk_attribution) against references nobody here wrote: the
log-ratios of Hugging Face eager's attention weights, and the scores of the offline models. Every family's
terms are checked against its recorded scores in tests/parity/test_every_family.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz import plots
from attnviz.interventions.qk_attribution import RECORD_NAMES, attribute, qk_attribution
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
