"""The Explore page for a long text, past FULL_MAPS_TOKENS tokens (docs/architecture.md, "Long contexts").

Its trace is a reduced one (workbench.traces.reduced): computed as a heavy action that starts by itself, with
progress per layer and Cancel, and holds no [L, H, T, T] map. The mosaic is drawn from the tiles its pass
pooled for every view option, the head detail from one head's window recomputed from the kept queries and
keys, the profile from the pass's sums. What needs the full maps (the lenses, word-pair ranking, ablation,
minimal pairs, parity, full exports) is for texts up to FULL_MAPS_TOKENS, and the page says so."""

from __future__ import annotations

import functools

import streamlit as st

from attnviz import plots
from attnviz.ui import explore
from attnviz.ui.common import over_budget_message, plot_text, session_id, t, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.strings import translate
from attnviz.workbench import OverBudget, shelf, traces

LONG_RUN = "long_trace"  # the heavy action's key (and its button's)


def render(model, source: str, text: str, text_b: str | None) -> None:
    bench, info = workbench(), model.info
    key = (source, text, text_b)
    held = traces.held_reduced(bench, *key)
    if held is None:
        n = traces.long_tokens(model, text, text_b)
        full_gb = 4 * info.n_layers * info.n_heads * n * n / 1e9
        st.info(t("long_text", n=n, full=shelf.FULL_MAPS_TOKENS, gb=full_gb))
        stop_other_long_runs(key)
        done = heavy_action(LONG_RUN, t("long_run"), key,
                            lambda job: traces.reduced(bench, *key, progress=job.progress) is not None,
                            lambda done, total: t("long_progress", done=done, total=total),
                            primary=True, autostart=True)
        if not done:
            return
        held = traces.held_reduced(bench, *key)
        if held is None:  # made, then evicted at once by other visitors' work
            st.warning(t("long_evicted"))
            return
    explore.input_notices(model, held, shelf.long_token_limit(model))
    explore.token_chips(held)
    level, hide_special, scale, palette, first_aside = explore.view_options(held)
    view_key = (source, text, text_b, level, hide_special, "raw", True, first_aside)
    try:
        mosaic(held, view_key, palette, scale)
    except OverBudget as error:
        st.error(over_budget_message(error))
        return
    explore.head_detail(info, view_key, scale, palette, long=True)
    explore.next_token_predictions(model, key, long=True)
    explore.head_detectors(model, source)
    reduced_download(key)
    st.caption(t("long_full_only", full=shelf.FULL_MAPS_TOKENS))


# A layer of a 4,096-token SmolLM2 pass takes about 2 s of CPU: a cancelled run has stopped well within this.
STOP_WAIT_S = 30.0


def stop_other_long_runs(key: tuple) -> None:
    """Cancel this visitor's run for another long text (a visitor holds one heavy-work slot, so the new text's
    run would be refused as busy while the old one, no longer wanted, runs on), and wait for it to stop."""
    me = session_id()
    for job in workbench().jobs.running():
        if job.session_id == me and job.key[1] == LONG_RUN and tuple(job.key[2:]) != key:
            job.cancel()
            job.finished.wait(timeout=STOP_WAIT_S)


def reduced_download(key: tuple) -> None:
    """What this page draws from, as NPZ (analysis.export.reduced_npz), built on click."""
    lang = st.session_state.get("lang", "en")
    build = functools.partial(explore.export_or_refusal, functools.partial(reduced_npz_of, workbench(), key, lang),
                              session_id(), lang)
    st.download_button(t("download_reduced_npz"), build, file_name="attnviz_reduced.npz",
                       mime="application/octet-stream", on_click="ignore", key="reduced_npz",
                       help=t("download_reduced_npz_help"))


def reduced_npz_of(bench, key: tuple, lang: str):
    """The held trace's NPZ, looked up at the click rather than captured in the button: a captured trace would
    stay in memory, uncounted, after the store had let it go."""
    held = traces.held_reduced(bench, *key)
    if held is None:
        return translate(lang, "long_evicted")
    return traces.reduced_export(bench, held)


def mosaic(held, view_key: tuple, palette: str, scale: str) -> None:
    """Every head at once, from the tiles the reduced pass pooled for this view."""
    st.subheader(t("model_view"))
    bench = workbench()
    level, hide_special, first_aside = view_key[3], view_key[4], view_key[7]
    positions = traces.reduced_positions(bench, view_key)
    text = plot_text()
    figure = traces.figure(bench, ("reduced", *view_key, palette, scale, text), lambda: plots.model_view(
        held.view_tiles(level, hide_special, first_aside), kv_group=held.kv_group, max_cells=held.tile,
        row_labels=positions.labels, scale=scale, colorscale=palette, text=text,
        layer_kinds=explore.shown_kinds(held), pooled_tiles=True))
    explore.sink_mass_line(held)
    if (figure.layout.meta or {}).get("pooled"):
        st.info(t("pooled", cells=figure.layout.meta["tile"][0]))
    event = st.plotly_chart(figure, key="model_view", width="stretch", config={"displaylogo": False},
                            on_select="rerun", selection_mode="points")
    explore.select_clicked_head(event)
