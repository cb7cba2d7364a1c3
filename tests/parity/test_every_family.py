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
import transformers as tf

from attnviz.analysis.lenses import rollout
from attnviz.analysis.query_key import query_key
from attnviz.loading import build_module
from attnviz.loading.registry import CONVERTERS
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import NAMES, Recorder

COMMON = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
              max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
GQA = dict(num_key_value_heads=2)
EXTRA = {
    "llama": GQA, "qwen2": GQA, "phi3": GQA,
    "mistral": GQA | dict(sliding_window=4),
    "mixtral": GQA | dict(num_local_experts=4, num_experts_per_tok=2),
    "gpt_oss": GQA | dict(num_local_experts=4, num_experts_per_tok=2, head_dim=8, sliding_window=4,
                          layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "gemma": dict(num_key_value_heads=1, head_dim=8),
    "gemma2": GQA | dict(head_dim=8, sliding_window=4, query_pre_attn_scalar=8, attn_logit_softcapping=5.0,
                         final_logit_softcapping=5.0),
    "gemma3_text": GQA | dict(head_dim=8, sliding_window=4, layer_types=["sliding_attention", "full_attention",
                                                                        "sliding_attention"]),
    "qwen3": GQA | dict(head_dim=8), "olmo2": GQA,
    "smollm3": GQA | dict(no_rope_layers=[1, 0, 1]),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1], [["global"], 1]], window_size=4),
    "opt": dict(ffn_dim=37, word_embed_proj_dim=32),
    "gpt_neox": dict(rotary_pct=0.5),
    "phi": dict(partial_rotary_factor=0.5),
    "modernbert": dict(local_attention=4, cls_token_id=1, sep_token_id=2),
    "deberta": dict(relative_attention=True, pos_att_type="c2p|p2c", position_biased_input=False,
                    max_relative_positions=4),
    "deberta-v2": dict(relative_attention=True, pos_att_type="p2c|c2p", position_biased_input=False, position_buckets=4,
                       max_relative_positions=16, share_att_key=True, norm_rel_ebd="layer_norm"),
    "electra": dict(embedding_size=16), "albert": dict(embedding_size=16),
}
# gemma3 is the multimodal wrapper of gemma3_text (same converter), whose config nests the text one.
FAMILIES = [t for t, c in CONVERTERS.items() if c.module is Transformer and t != "gemma3"]
T = 10


def tiny(model_type: str):
    torch.manual_seed(0)
    config = tf.AutoConfig.for_model(model_type, **COMMON, **EXTRA.get(model_type, {}))
    config._attn_implementation = "eager"
    try:
        hf = tf.AutoModelForCausalLM.from_config(config)
    except ValueError:  # an encoder without a causal-LM class
        hf = tf.AutoModel.from_config(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return build_module(config.to_dict(), hf.state_dict()).eval()


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
              "values": (c.n_layers, 1, c.kv_heads, T, c.dim_per_head),
              "value_norms": (c.n_layers, 1, c.n_heads, T),
              "head_outputs": (c.n_layers, 1, c.n_heads, T, c.dim_per_head)}
    for name, shape in shapes.items():
        assert tuple(record.stacked(name).shape) == shape, (model_type, name)
    if not c.attn_sinks:  # with sinks the softmax has one more term (tests/test_attention_kinds.py)
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
