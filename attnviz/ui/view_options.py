"""The view options row that the Explore page's mosaic and head detail follow, for a full or a long text:
token or word level, special tokens hidden, colour scale, palette, and a decoder's first token set aside
(with the line of how much weight it draws)."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis.sink import FIRST_TOKEN_EPSILON, FirstTokenShare, first_token_share
from attnviz.trace import ReducedTrace
from attnviz.ui.language import t
from attnviz.ui.url_state import seed_from_url, write_url

# Option values stay the same in every language (the URL and the widget state hold them); their display
# goes through t() (format_func: Streamlit keys these widgets by key, so a new language keeps the choice).
# Each format_func is a dict of this run's labels, not a call of t(): a format_func may be called after
# the run (AppTest does), where it must still agree with the options drawn.
LEVELS = ["token", "word"]
SCALES = ["linear", "power", "log"]
PALETTES = ["default", "colorblind", "blues"]


def view_options(trace):
    """(level, hide_special, scale, palette, first_aside), seeded from the link and written back to it."""
    for key, url_key, default in (("level", "level", "token"), ("hide_special", "hide", False),
                                  ("scale", "scale", "linear"), ("palette", "palette", "default"),
                                  ("first_aside", "first_aside", False)):
        seed_from_url(key, default, url_key)
    causal = bool(trace.metadata.get("causal"))
    cols = st.columns(4)
    level = cols[0].radio(t("level"), LEVELS, key="level", horizontal=True,
                          format_func={v: t(f"level_{v}") for v in LEVELS}.get)
    why_not = (t("hide_special_word_level") if level == "word"
               else t("hide_special_none") if not any(trace.special_mask) else None)
    hide_special = cols[1].toggle(t("hide_special"), key="hide_special", disabled=why_not is not None,
                                  help=why_not or t("hide_special_help")) and why_not is None
    scale = cols[2].radio(t("scale"), SCALES, key="scale", horizontal=True,
                          format_func={v: t(f"scale_{v}") for v in SCALES}.get)
    palette = cols[3].selectbox(t("palette"), PALETTES, key="palette",
                                format_func={v: t(f"palette_{v}") for v in PALETTES}.get,
                                placeholder=t("choose_option"))
    first_aside = False
    if causal:  # a decoder's first token is its attention sink (docs/views/sink.md, "The first-token sink")
        alone = len(trace.tokens) < 2  # nothing would be left to show
        first_aside = st.toggle(t("first_aside"), key="first_aside", disabled=alone,  # a row of its own
                                help=t("first_aside_alone") if alone else t("first_aside_help")) and not alone
        first_token_line(trace, first_aside)
    write_url(level=level if level != "token" else None, hide=hide_special or None,
              scale=scale if scale != "linear" else None, palette=palette if palette != "default" else None,
              first_aside=first_aside or None)
    return level, hide_special, scale, palette, first_aside


def first_token_line(trace, first_aside: bool) -> None:
    """The model-level first-token share of this input (analysis.sink): the mean weight on the first token
    over every head, and the share of heads above Gu et al. 2024's epsilon."""
    share = first_shares(trace)
    st.caption(t("first_token_line", mean=share.mean, above=share.above, heads=share.per_head.size,
                 share=share.share_above, epsilon=FIRST_TOKEN_EPSILON)
               + (" " + t("first_aside_on") if first_aside else ""))


def first_shares(trace) -> FirstTokenShare:
    """The first-token shares of a full trace, or of a reduced one (the mean weight on position 0 its pass kept)."""
    if isinstance(trace, ReducedTrace):
        return FirstTokenShare(trace.statistics["first"])
    return first_token_share(trace.attentions)
