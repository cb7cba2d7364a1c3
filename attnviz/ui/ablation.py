"""The Explore page's head ablation: switch heads (or whole layers) off and watch the prediction change,
and the importance scan, every head switched off alone (attnviz.interventions.ablation does the computing)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis.views import visible_token
from attnviz.ui.escape import md
from attnviz.ui.focus import head_label
from attnviz.ui.guard import guarded, heavy_slot, public_message, refused, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.url_state import MAX_CONTINUATION, seed_from_url, write_url
from attnviz.ui.widgets import head_grid
from attnviz.workbench import heads as head_work

# The scan runs L x H forward passes (270 for SmolLM2): longer sentences are refused, so one visitor's
# scan holds the heavy-work slot for about a minute at most on a shared 2-core host.
MAX_SCAN_TOKENS = 64


def head_value(layer: int, head: int) -> str:
    """A head as the multiselect and the link hold it ("26.0"); shown as every view writes a head ("L26 H0")."""
    return f"{layer}.{head}"


def shown_head(value: str) -> str:
    return head_label(*(int(n) for n in value.split(".")))


def switched_off(heads: list[str], layers: list[int], n_heads: int) -> tuple[tuple[int, int], ...]:
    """The (layer, head) pairs that the two choices switch off, sorted, each once."""
    off = {tuple(int(n) for n in label.split(".")) for label in heads}
    off |= {(layer, head) for layer in layers for head in range(n_heads)}
    return tuple(sorted(off))


def _keep_valid(key: str, options: list) -> None:
    """Drop choices the current model does not have (a smaller model, a stale link): a multiselect refuses
    a value that is not among its options."""
    allowed = set(options)
    st.session_state[key] = [v for v in st.session_state[key] if v in allowed]


@st.fragment
@guarded
def head_ablation(model, source: str, text: str, has_pair: bool = False) -> None:
    info = model.info
    kind = "decoder" if info.causal else ("mlm" if info.mlm_head else "embedding")
    with st.expander(t("ablation_title")):
        st.caption(t(f"ablation_caption_{kind}"))
        if has_pair:
            st.caption(t("ablation_pair_note"))
        labels = [head_value(layer, head) for layer in range(info.n_layers) for head in range(info.n_heads)]
        seed_from_url("ablation_heads", [], "off")
        seed_from_url("ablation_layers", [], "off_layers")
        st.session_state["ablation_layers"] = [int(v) for v in st.session_state["ablation_layers"]]
        _keep_valid("ablation_heads", labels)
        _keep_valid("ablation_layers", list(range(info.n_layers)))
        cols = st.columns(2)
        heads = cols[0].multiselect(t("ablation_heads"), labels, key="ablation_heads", help=t("ablation_heads_help"),
                                    format_func=shown_head,
                                    placeholder=t("choose_options"))
        layer_names = {layer: t("ablation_layer_option", layer=layer) for layer in range(info.n_layers)}
        layers = cols[1].multiselect(t("ablation_layers"), list(range(info.n_layers)), key="ablation_layers",
                                     placeholder=t("choose_options"),
                                     format_func=layer_names.get)
        continuation = None
        if info.causal:
            seed_from_url("ablation_continuation", "", "cont")
            continuation = st.text_input(t("ablation_continuation"), key="ablation_continuation",
                                         max_chars=MAX_CONTINUATION, help=t("ablation_continuation_help")) or None
        write_url(off=",".join(heads) or None, off_layers=",".join(map(str, layers)) or None,
                  cont=continuation if info.causal else None)
        if kind == "mlm" and not _has_mask(text):
            st.info(t("ablation_need_mask"))
            return
        off = switched_off(heads, layers, info.n_heads)
        if off:
            st.caption(t("ablation_n_off", n=len(off), total=info.n_layers * info.n_heads))
            # Two or four forward passes of up to 512 tokens: the process's heavy-work slot, like the scan.
            effect = run_heavy(source, lambda: head_work.ablation_effect(workbench(), model, source, text, off,
                                                                     continuation))
            if effect is None:
                return
            show_effect(model, effect)
        else:
            st.info(t("ablation_choose"))
        importance_scan(model, source, text, continuation)


def run_heavy(source: str, compute):
    """compute() in the process's heavy-work slot; None, after saying why, when this visitor already has
    a heavy action running, the memory budget refuses it, or the input is refused."""
    with refused():
        try:
            with heavy_slot():
                return compute()
        except ValueError as error:
            st.warning(t("ablation_failed", error=md(public_message(error, source))))
    return None


def _has_mask(text: str) -> bool:
    return any(spelling in text for spelling in head_work.MASK_SPELLINGS)


def _token(model, prediction) -> str:
    return visible_token(prediction.text, model.token_bytes(prediction.id))


def show_effect(model, effect: head_work.Effect) -> None:
    if effect.quantity == "embedding":
        st.markdown(t("ablation_embedding_result", change=effect.cosine_change))
        return
    left, right = st.columns(2)
    left.caption(t("ablation_all_on"))
    left.dataframe({
        t("column_token"): [_token(model, p) for p in effect.before],
        t("column_probability"): [round(p.prob, 4) for p in effect.before],
        t("ablation_column_after"): [round(float(np.exp(lp)), 4) for lp in effect.before_after],
    }, hide_index=True, key="ablation_before")
    right.caption(t("ablation_switched_off"))
    right.dataframe({
        t("column_token"): [_token(model, p) for p in effect.after],
        t("column_probability"): [round(p.prob, 4) for p in effect.after],
    }, hide_index=True, key="ablation_after")
    if effect.continuation_before is not None:
        (before, tokens_before), (after, tokens_after) = effect.continuation_before, effect.continuation_after
        st.markdown(t("ablation_continuation_result", before=before, after=after, delta=after - before))
        st.dataframe({
            t("column_token"): [visible_token(text, None) for text, _ in tokens_before],
            t("ablation_column_logprob_before"): [round(lp, 4) for _, lp in tokens_before],
            t("ablation_column_logprob_after"): [round(lp, 4) for _, lp in tokens_after],
        }, hide_index=True, key="ablation_continuation_tokens")


def importance_scan(model, source: str, text: str, continuation: str | None) -> None:
    """Every head switched off alone: a heavy action (the head_detectors pattern of ui/detectors.py: button,
    progress, cancel, the heavy-work slot, memory reserved), its grid shared per (model, text, quantity)."""
    info = model.info
    st.subheader(t("ablation_scan_title"))
    quantity = head_work.default_quantity(model, continuation)
    cont = continuation if quantity == "continuation" else None
    n_tokens = len(model.encode(text + (cont or "")).ids)
    scores = head_work.scan_scores(workbench(), source, text, quantity, cont)
    if scores is None:
        if n_tokens > MAX_SCAN_TOKENS:
            st.info(t("ablation_scan_too_long", limit=MAX_SCAN_TOKENS, n=n_tokens))
            return
        total = info.n_layers * info.n_heads
        bench = workbench()
        scores = heavy_action(
            "ablation_scan_run", t("ablation_scan_run", n=total), (source, text, quantity, cont),
            lambda job: head_work.scan_heads(bench, model, source, text, quantity, cont, progress=job.progress),
            lambda done, total: t("ablation_scan_progress", done=done, total=total))
        if scores is None:
            return
    st.caption(t(f"ablation_scan_caption_{quantity}", token=md(_scan_target(model, source, text, quantity))))
    grid = np.asarray(scores, dtype=np.float64)
    # A drop can be negative (switching a head off can help): a diverging scale centred at 0.
    figure = plots.score_grid(grid, t(f"ablation_scan_grid_{quantity}"), diverging=True, text=plot_text())
    if figure.layout.meta["values"] == "hover":
        st.caption(t("grid_values_hover"))
    head_grid(st, figure, "ablation_scan", in_fragment=True)


def _scan_target(model, source: str, text: str, quantity: str) -> str:
    """The token whose log-probability the scan follows, for the caption (top next token or top fill)."""
    if quantity not in ("next_token", "mask_fill"):
        return ""
    effect = head_work.ablation_effect(workbench(), model, source, text, (), None)
    return _token(model, effect.before[0]) if effect.before else ""
