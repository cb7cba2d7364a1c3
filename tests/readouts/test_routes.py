"""Information-flow routes: the proximity rule on a hand-worked case, the parts each importance is taken over
summing to the model's own streams, and a head made dominant (its output projection scaled) carrying the
prediction."""

from __future__ import annotations

import pytest
import torch

from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.readouts import recorded_run, routes
from attnviz.transformer.record import Recorder
from tests.helpers.tiny_hf import tiny
from tests.helpers.tiny_tokenizers import bpe_tokenizer

T = 10


def test_the_proximity_rule_weighs_the_part_nearest_the_sum():
    parts = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-0.5, 0.0]], dtype=torch.float64)
    total = parts.sum(0)  # (0.5, 1): ||total||_1 = 1.5; minus each part: 1.5, 0.5, 2.0
    assert routes.proximity(total, parts).tolist() == [0.0, 1.0, 0.0]
    random = torch.randn(7, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    weights = routes.proximity(random.sum(0), random)
    assert (weights >= 0).all() and float(weights.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("model_type", ["llama", "gemma3_text", "bert"])
def test_the_parts_of_every_sum_add_up_to_the_models_own_streams(model_type):
    module = tiny(model_type)
    ids = torch.randint(3, 99, (1, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = module(ids, record=Recorder(*routes.ROUTE_NAMES), with_logits=False)
    for layer in range(module.config.n_layers - 1):
        following = out.record.layers[layer + 1]["block_inputs"][0].double()
        for where, parts in routes._layer_sums(module, out.record, layer, [2, T - 1]).items():
            assert (parts["post"] - following[where]).abs().max() <= 1e-5
            for head in range(module.config.n_heads):
                assert (parts["terms"](head).sum(0) - parts["heads"][head]).abs().max() <= 1e-6


def dominant_head_routes(threshold: float) -> tuple[routes.Routes, int, int]:
    """The routes of a tiny Llama whose last layer's head 1 has its slice of the output projection 30 times
    larger, with that (layer, head)."""
    module = tiny("llama")
    layer, head = module.config.n_layers - 1, 1
    d = module.config.dim_per_head
    with torch.no_grad():  # this head's slice of the output projection, 30 times larger
        module.blocks[layer].attn.o_proj.weight[:, head * d:(head + 1) * d] *= 30
    model = LoadedModel(module, bpe_tokenizer(bos=False), ModelInfo.describe(module, "llama", "(test)", "llama", 64),
                        {"pad_token": "<pad>"})
    ids = torch.randint(3, 99, (1, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = module(ids, record=Recorder(*routes.ROUTE_NAMES), with_logits=False)
    return routes.routes(model, "", run=recorded_run.Run(ids, [""] * T, T - 1, out), threshold=threshold), layer, head


def test_a_dominant_head_carries_the_prediction():
    graph, layer, head = dominant_head_routes(threshold=0.04)
    into_mid = {e["source"]: e["importance"] for e in graph.edges if e["target"] == f"mid{layer}@{T - 1}"}
    assert max(into_mid, key=into_mid.get) == f"L{layer}.H{head}@{T - 1}"
    assert all(0 < e["importance"] <= 1 for e in graph.edges)
    ids_of = {n["id"] for n in graph.nodes}
    assert all(e["source"] in ids_of and e["target"] in ids_of for e in graph.edges)
    assert (layer, head) in graph.heads()


def _reaches_the_prediction(graph: routes.Routes) -> bool:
    """Every node of `graph` has a path of its own edges up to the prediction's stream."""
    root = f"x{graph.n_layers}@{graph.position}"
    reached, frontier = {root}, [root]
    fed_by: dict[str, list[str]] = {}
    for e in graph.edges:
        fed_by.setdefault(e["target"], []).append(e["source"])
    while frontier:
        for source in fed_by.get(frontier.pop(), ()):
            if source not in reached:
                reached.add(source)
                frontier.append(source)
    return reached == {n["id"] for n in graph.nodes}


def test_the_readable_cut_keeps_the_heads_that_carry_the_most_and_their_paths():
    """Routes.strongest (issue 35, item 6: 574 nodes and 881 edges were drawn): the k head nodes with the
    largest carried share, each connected to the prediction; the scaled head of the test above comes first."""
    graph, layer, head = dominant_head_routes(threshold=0.01)
    carried = graph.carried()
    assert carried[f"x{graph.n_layers}@{T - 1}"] == 1.0 and all(0 <= v <= 1 + 1e-9 for v in carried.values())
    head_nodes = [n["id"] for n in graph.nodes if n["kind"] == "head"]
    assert len(head_nodes) > 3 and _reaches_the_prediction(graph)
    assert graph.strongest(1).heads() == [(layer, head)]
    for k in (1, 3):
        cut = graph.strongest(k)
        kept = [n["id"] for n in cut.nodes if n["kind"] == "head"]
        assert sorted(kept, key=carried.get) == sorted(head_nodes, key=carried.get)[-k:]
        assert _reaches_the_prediction(cut) and len(cut.nodes) < len(graph.nodes)
    assert graph.strongest(len(head_nodes)) is graph
