"""Labels and words of the figures: `escape_label` for every piece of text that came from data, the
`PlotText` words a figure shows itself (English by default), and the token-axis helpers that keep
repeated tokens apart.

Plotly renders a subset of HTML in labels and hovers, so every label that came from text (tokens,
titles) goes through `escape_label`. The category labels of the axes ("3:the") are data and stay as
they are in every language.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnviz.analysis.views import WHITESPACE_SIGNS  # one table: tokens read alike everywhere


@dataclass(frozen=True)
class PlotText:
    """The words the figures show, English by default. The UI passes a translated one; the category labels
    of the axes ("L0 from 3:the", "3:the") are data and stay as they are in every language."""

    attention: str = "attention"  # colour-bar title
    query_axis: str = "from (query)"
    key_axis: str = "to (key)"
    mean: str = "mean"  # the mosaic's mean row and column
    from_: str = "from"  # hover: the query token
    to: str = "to"  # hover: the key token
    weight: str = "weight"
    pooled_weight: str = "row-mean of the weight summed over the block"
    masked: str = "masked (causal)"
    open_head: str = "click to open this head"
    layer: str = "layer"  # score grids' axis titles
    head: str = "head"


ENGLISH = PlotText()



def escape_label(text: object) -> str:
    """Make a token or title safe and visible as a plotly label, tick or hover text.

    Plotly renders a subset of HTML (`<b>`, `<br>`, `<a href>`) in text and decodes entities, so `&`,
    `<`, `>` become entities and show literally. Whitespace-only tokens would render as nothing, so each
    of their characters gets a visible sign; a newline inside a token would vanish, so it becomes "⏎".
    A string that starts and ends with `$` would be typeset as LaTeX where MathJax is loaded, so `$`
    becomes an entity too.
    """
    text = str(text)
    if text == "":
        return "∅"
    if text.isspace():
        text = "".join(WHITESPACE_SIGNS.get(char, "␣") for char in text.replace("\r\n", "\n"))
    else:
        text = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("$", "&#36;")


def unique_keys(labels: list[str]) -> list[str]:
    """"3:the"-style categories: a categorical axis merges equal labels, so each gets its position."""
    return [f"{i}:{escape_label(label)}" for i, label in enumerate(labels)]


def token_axis(keys: list[str], labels: list[str], **extra) -> dict:
    """Category axis ticking every token by its key but showing the bare token; plotly thins past 100."""
    axis = {"showgrid": False, **extra}
    if len(keys) <= 100:
        axis |= {"tickmode": "array", "tickvals": keys, "ticktext": [escape_label(t) for t in labels]}
    return axis
