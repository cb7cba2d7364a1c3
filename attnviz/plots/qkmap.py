"""One head's queries and keys across a corpus as one 2-D scatter (AttentionViz, Yeh et al. 2023): queries as
circles, keys as diamonds, coloured by kind, by relative position or by part of speech. The input is a
`QKMap` (attnviz.readouts.qkmap) or anything with its fields; every point's hover shows its token in its
sentence (escaped: plotly reads a subset of HTML), and its customdata is [sentence, position], which a click
returns (st.plotly_chart's selection)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import COLORSCALES, GROUP_COLORS, NEGATIVE_COLOR, POSITIVE_COLOR
from attnviz.plots.text import escape_label

COLOURINGS = ("kind", "position", "pos")
CONTEXT_CHARS = 40  # characters of the sentence shown on each side of the token in a hover
QUERY_SYMBOL, KEY_SYMBOL = "circle", "diamond"


def in_sentence(sentence: str, start: int, end: int, token: str) -> str:
    """The hover of one token: its sentence (cut to CONTEXT_CHARS a side) with the token in bold, escaped."""
    if start == end:  # a special token: no characters of the sentence
        return f"<b>{escape_label(token)}</b> {escape_label(sentence[:2 * CONTEXT_CHARS])}"
    before = sentence[max(0, start - CONTEXT_CHARS):start]
    after = sentence[end:end + CONTEXT_CHARS]
    lead = "…" if start > CONTEXT_CHARS else ""
    tail = "…" if end + CONTEXT_CHARS < len(sentence) else ""
    return (f"{lead}{escape_label(before) if before else ''}<b>{escape_label(sentence[start:end])}</b>"
            f"{escape_label(after) if after else ''}{tail}")


def _hovers(result, kind_label: str) -> list[str]:
    return [f"{kind_label} · {in_sentence(result.sentences[s], a, b, token)}<br>position {p}"
            + (f" · {escape_label(tag)}" if tag else "")
            for s, p, (a, b), token, tag in zip(result.sentence, result.position, result.spans, result.tokens,
                                                 result.tags)]


def qk_map_figure(result, colour: str = "kind", title: str = "", query_label: str = "query",
                  key_label: str = "key", position_label: str = "relative position") -> go.Figure:
    """The scatter of `result`'s query and key points; `colour`: "kind" (queries and keys apart), "position"
    (relative position in the sentence, 0 first token to 1 last) or "pos" (the treebank's part of speech; a
    token without one is grey). The labels are the figure's own words (the UI passes translated ones)."""
    if colour not in COLOURINGS:
        raise ValueError(f"colour must be one of {', '.join(COLOURINGS)}, got {colour!r}")
    custom = np.stack([result.sentence, result.position], axis=1).tolist()  # plain ints (see plots.grids)
    fig = go.Figure()
    sides = [(query_label, result.query_points, QUERY_SYMBOL, POSITIVE_COLOR),
             (key_label, result.key_points, KEY_SYMBOL, NEGATIVE_COLOR)]
    for label, points, symbol, kind_colour in sides:
        hovers = _hovers(result, escape_label(label))
        if colour == "pos":
            tags = np.array(result.tags, dtype=object)
            for i, tag in enumerate(sorted(set(result.tags))):
                picked = np.flatnonzero(tags == tag)
                tag_colour = GROUP_COLORS[i % len(GROUP_COLORS)] if tag else "#bbbbbb"
                fig.add_trace(_points(points[picked], [hovers[j] for j in picked], [custom[j] for j in picked],
                                      f"{escape_label(label)} · {escape_label(tag or '–')}", symbol,
                                      {"color": tag_colour}, legendgroup=tag))
            continue
        marker = {"color": kind_colour} if colour == "kind" else {
            "color": np.asarray(result.relative, dtype=np.float32), "colorscale": COLORSCALES["default"],
            "cmin": 0.0, "cmax": 1.0, "showscale": symbol == QUERY_SYMBOL,
            "colorbar": {"title": escape_label(position_label)}}
        fig.add_trace(_points(points, hovers, custom, escape_label(label), symbol, marker))
    explained = getattr(result, "explained", (0.0, 0.0))
    fig.update_layout(
        title=escape_label(title), height=620, legend={"itemsizing": "constant"}, dragmode="zoom",
        xaxis={"title": f"PC1 ({explained[0]:.0%})", "zeroline": False},
        yaxis={"title": f"PC2 ({explained[1]:.0%})", "zeroline": False, "scaleanchor": "x"},
        meta={"colour": colour, "points": 2 * len(result.tokens)},
    )
    return fig


def _points(points, hovers, custom, name, symbol, marker, **extra) -> go.Scatter:
    # SVG (go.Scatter), as the score grids' pick points: the click on it was checked in Chromium
    return go.Scatter(
        x=np.asarray(points[:, 0], dtype=np.float32), y=np.asarray(points[:, 1], dtype=np.float32),
        mode="markers", name=name, text=hovers, customdata=custom, hovertemplate="%{text}<extra></extra>",
        marker={"size": 6, "opacity": 0.75, "symbol": symbol, **marker}, **extra)
