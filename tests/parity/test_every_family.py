"""Every registered decoder and encoder family, on a tiny random HF model built from its own config class:
the recorder gives every name, the recorded scores give the recorded probabilities, head ablation zeroes
exactly that head's output, the query-key view reproduces every row, and the lenses take the maps. The
families' own parity tests (tests/test_parity_*.py) check the numbers against HF; this checks that the
views built on the numbers work for each. A family whose tiny config needs more than COMMON gets an EXTRA
entry: a new converter without one fails here until it has one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.analysis.attention_lenses import rollout
from attnviz.analysis.query_key import query_key
from attnviz.loading.registry import CONVERTERS
from attnviz.readouts import qk_attribution
from attnviz.transformer.decompose import logit_parts, stream_parts
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import NAMES, Recorder
from tests.helpers.tiny_hf import tiny

# gemma3 is the multimodal wrapper of gemma3_text (same converter), whose config nests the text one.
FAMILIES = [t for t, c in CONVERTERS.items() if c.module is Transformer and t != "gemma3"]
T = 10


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    module = tiny(request.param)
    ids = torch.randint(3, 99, (1, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = module(ids, record=Recorder(*NAMES))
    return request.param, module, ids, out


def test_the_recorder_keeps_every_name_and_scores_give_probabilities(family):
    model_type, module, _, out = family
    c = module.config
    record = out.record
    shapes = {"attentions": (c.n_layers, 1, c.n_heads, T, T), "scores": (c.n_layers, 1, c.n_heads, T, T),
              "queries": (c.n_layers, 1, c.n_heads, T, c.dim_per_head),
              "keys": (c.n_layers, 1, c.kv_heads, T, c.dim_per_head),
              "values": (c.n_layers, 1, c.kv_heads, T, c.value_dim),  # MLA's values are narrower
              "value_norms": (c.n_layers, 1, c.n_heads, T),
              "head_outputs": (c.n_layers, 1, c.n_heads, T, c.value_dim)}
    for name, shape in shapes.items():
        assert tuple(record.stacked(name).shape) == shape, (model_type, name)
    if not c.attn_sinks:  # with sinks the softmax has one more term (tests/transformer/test_attention_kinds.py)
        probs = torch.softmax(record.stacked("scores").float(), dim=-1)
        assert (probs - record.stacked("attentions")).abs().max() <= 1e-6, model_type


def test_head_ablation_zeroes_that_head_only(family):
    model_type, module, ids, out = family
    c = module.config
    mask = torch.ones(c.n_layers, c.n_heads)
    mask[1, 2] = 0
    with torch.no_grad():
        ablated = module(ids, head_mask=mask, record=Recorder("head_outputs"))
    outputs = ablated.record.stacked("head_outputs")
    assert outputs[1, :, 2].abs().max() == 0, model_type
    assert outputs[1, :, 1].abs().max() > 0
    assert (outputs[0] - out.record.stacked("head_outputs")[0]).abs().max() <= 1e-6  # layers before: untouched
    assert (ablated.hidden - out.hidden).abs().max() > 1e-6, model_type


def test_the_query_key_view_reproduces_every_row(family):
    model_type, module, _, out = family
    queries, keys = out.record.stacked("queries")[:, 0].numpy(), out.record.stacked("keys")[:, 0].numpy()
    split = bool(getattr(module.blocks[0].attn, "terms", ()))  # DeBERTa: c2p and p2c join q.k
    terms = out.record.stacked("score_terms")[:, 0].numpy() if split else None  # L, (c2c, c2p, p2c), H, T, S
    attentions = out.attentions[:, 0].numpy().astype(np.float64)
    worst = 0.0
    for layer in range(module.config.n_layers):
        for head in range(module.config.n_heads):
            setup = module.score_setup(layer, head)
            for position in range(T):
                extra = None if terms is None else {"c2p": terms[layer, 1, head, position],
                                                    "p2c": terms[layer, 2, head, position]}
                view = query_key(queries[layer], keys[layer], module.kv_group, head, position, terms=extra, **setup)
                worst = max(worst, float(np.abs(view.probabilities - attentions[layer, head, position]).max()))
    assert worst <= 1e-5, (model_type, worst)


def test_lenses_take_every_familys_maps(family):
    model_type, module, _, out = family
    maps = rollout(out.attentions[:, 0].numpy())
    assert maps.shape == (module.config.n_layers, 1, T, T) or maps.shape[-2:] == (T, T), model_type
    assert np.isfinite(maps).all()


def test_the_residual_streams_parts_sum_to_the_models_own_states_and_logits(family):
    """attnviz.transformer.decompose: with every norm's scale frozen, the parts (embeddings, each head, each
    MLP, biases) sum to the stream entering each block, to the final hidden states and to the logits."""
    model_type, module, ids, out = family
    positions = [0, 4, T - 1]
    for layer in range(module.config.n_layers):
        parts = stream_parts(module, out.record, ids, positions, layer)
        recorded = out.record.layers[layer]["block_inputs"][0, positions].double()
        assert (parts.total() - recorded).abs().max() <= 1e-5, (model_type, layer)
    parts = stream_parts(module, out.record, ids, positions)
    assert len(parts.names) == len(set(parts.names))
    assert (parts.total() - out.hidden[0, positions].double()).abs().max() <= 1e-5, model_type
    heads = parts.head_grid(module.config.n_layers, module.config.n_heads)
    assert heads.abs().amax(dim=(2, 3)).min() > 0, model_type  # every head has a part of its own
    if module.lm_head is not None:
        with torch.no_grad():
            capless = module.lm_head(out.hidden)[0, positions][:, [5, 7]].double()  # before any final soft-cap
        logits = logit_parts(module, parts, [5, 7])
        assert (logits.total() - capless).abs().max() <= 1e-5, model_type


def test_a_record_can_put_another_tensor_at_an_edit_point(family):
    """Zeroing a head's output through `LayerRecord.edit` is the head mask's ablation, exactly."""
    model_type, module, ids, out = family

    class ZeroHead(Recorder):
        def at(self, layer):
            record = super().at(layer)
            if layer == 1:
                def edit(name, tensor):
                    if name == "head_outputs":
                        tensor = tensor.clone()
                        tensor[:, 2] = 0
                    return tensor
                record.edit = edit
            return record

    mask = torch.ones(module.config.n_layers, module.config.n_heads)
    mask[1, 2] = 0
    with torch.no_grad():
        edited = module(ids, record=ZeroHead()).hidden
        masked = module(ids, head_mask=mask, record=Recorder()).hidden
    assert (edited - masked).abs().max() <= 1e-6, model_type
    assert (edited - out.hidden).abs().max() > 1e-6, model_type


def test_query_key_attribution_terms_sum_to_the_recorded_scores(family):
    """attnviz.readouts.qk_attribution: the (query component, key component) terms and the position
    terms sum to the recorded score of visible cells (the soft-cap applied to the sum where the model caps),
    and the split of a row's difference of two keys to the difference of the recorded scores; a key the
    query does not see is refused."""
    model_type, module, ids, out = family
    c = module.config
    scores = out.record.stacked("scores")[:, 0].double()  # L, H, T, S: the mask's term included
    worst = 0.0
    for layer in range(c.n_layers):  # one cell a layer (every layer kind): the first and last heads, two rows
        head, query = (0, T - 1) if layer % 2 == 0 else (c.n_heads - 1, 4)
        visible = torch.nonzero(scores[layer, head, query] > -1e30).flatten().tolist()
        cells = scores[layer, head, query]
        split = qk_attribution.attribute(module, out.record, ids, layer, head, query, visible[0])
        cap = split.softcap
        capped = split.total if cap is None else cap * np.tanh(split.total / cap)
        worst = max(worst, abs(split.total - split.score), abs(capped - float(cells[visible[0]])))
        hidden = sorted(set(range(T)) - set(visible))
        if hidden:
            with pytest.raises(ValueError, match="not visible"):
                qk_attribution.attribute(module, out.record, ids, layer, head, query, hidden[0])
    difference = qk_attribution.attribute(module, out.record, ids, layer, head, query, visible[0], query)
    worst = max(worst, abs(difference.total - difference.score),
                abs(difference.capped - float(cells[visible[0]] - cells[query])))
    assert worst <= 1e-4, (model_type, worst)
