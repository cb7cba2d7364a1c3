"""plots.circuit_graph: nodes where their layer and row put them, labelled (labels escaped as data), edges as lines
whose width grows with |score| and whose colour is the sign, each edge's score on hover at its middle."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.interventions.circuit import Graph
from attnviz.plots.circuit import WIDTHS, circuit_graph
from attnviz.plots.colors import NEGATIVE_COLOR, POSITIVE_COLOR


def figure(labels=None, scores=(0.5, -0.2, 0.05)):
    graph = Graph(2, 3)
    labels = graph.labels() if labels is None else labels
    nodes = range(graph.n_nodes)
    edges = [(0, graph.head(0, 1)), (graph.head(0, 1), graph.mlp(1)), (graph.mlp(1), graph.logits)]
    fig = circuit_graph(labels, [graph.layer(n) for n in nodes], [graph.row(n) for n in nodes], edges,
                        np.array(scores), graph.n_layers, graph.n_heads, "a <b>circuit</b>",
                        ends=("embed", "logits"))
    return graph, edges, fig


def test_nodes_edges_widths_and_colours():
    graph, edges, fig = figure()
    lines = [t for t in fig.data if t.mode == "lines"]
    by_edge = {}
    for trace in lines:
        xs, ys = list(trace.x), list(trace.y)
        for i in range(0, len(xs), 3):
            by_edge[(xs[i], ys[i], xs[i + 1], ys[i + 1])] = (trace.line.width, trace.line.color)
    place = {n: (graph.layer(n), graph.row(n)) for n in range(graph.n_nodes)}
    drawn = [by_edge[(*place[u], *place[v])] for u, v in edges]
    assert drawn[0] == (WIDTHS[-1], POSITIVE_COLOR)  # the largest |score|: the widest line
    assert drawn[1][1] == NEGATIVE_COLOR and drawn[2][1] == POSITIVE_COLOR
    assert drawn[2][0] < drawn[1][0] < drawn[0][0]
    nodes = fig.data[-1]
    assert list(nodes.text) == ["embed", "L0 H1", "MLP 1", "logits"]
    assert (list(nodes.x), list(nodes.y)) == ([-1, 0, 1, 2], [1.5, 1.0, 3.0, 1.5])
    hover = fig.data[-2]
    assert list(hover.text) == ["+0.500", "-0.200", "+0.050"] and "score" in hover.hovertemplate
    assert [tuple(row) for row in hover.customdata][1] == ("L0 H1", "MLP 1")
    assert list(fig.layout.xaxis.ticktext) == ["embed", "L0", "L1", "logits"]
    assert list(fig.layout.yaxis.ticktext) == ["H0", "H1", "H2", "MLP"]
    assert fig.layout.title.text == "a &lt;b&gt;circuit&lt;/b&gt;"
    assert fig.layout.meta["edges"] == 3 and fig.layout.meta["nodes"] == 4


def test_labels_are_escaped_as_data():
    graph = Graph(2, 3)
    labels = graph.labels()
    labels[0] = "<b>x</b>&$y$"
    _, _, fig = figure(labels)
    assert fig.data[-1].text[0] == "&lt;b&gt;x&lt;/b&gt;&amp;&#36;y&#36;"
    assert fig.data[-2].customdata[0][0] == "&lt;b&gt;x&lt;/b&gt;&amp;&#36;y&#36;"


def test_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="3 edges and 2 scores"):
        figure(scores=(0.5, 0.1))
