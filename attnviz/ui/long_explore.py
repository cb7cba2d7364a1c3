"""The Explore page's body for a long text, past FULL_MAPS_TOKENS tokens (docs/performance.md, "Long contexts").

Its trace is a reduced one (workbench.traces.reduced): computed as a heavy action that starts by itself, with
progress per layer and Cancel, and holds no [L, H, T, T] map. The mosaic is drawn from the tiles its pass
pooled for every view option, the head detail from one head's window recomputed from the kept queries and
keys, the profile from the pass's sums. What needs the full maps (the lenses, word-pair ranking, ablation,
minimal pairs, parity, full exports) is for texts up to FULL_MAPS_TOKENS, and the page says so."""

from __future__ import annotations

import functools

import streamlit as st

from attnviz.analysis.export import reduced_npz_bytes
from attnviz.ui.attention_lenses import lens_switch_unavailable
from attnviz.ui.detectors import head_detectors
from attnviz.ui.downloads import prepared_download
from attnviz.ui.guard import session_id, workbench
from attnviz.ui.head_detail import head_detail
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import t
from attnviz.ui.mosaic import reduced_mosaic
from attnviz.ui.predictions import next_token_predictions
from attnviz.ui.tokens import input_notices, token_chips
from attnviz.ui.view_options import view_options
from attnviz.workbench import shelf, traces

LONG_RUN = "long_trace"  # the heavy action's key (and its button's)


def render(model, source: str, text: str, text_b: str | None) -> None:
    bench, info = workbench(), model.info
    key = (source, text, text_b)
    held = traces.held_reduced(bench, *key)
    n = len(held.tokens) if held is not None else traces.long_tokens(model, text, text_b)
    full_gb = 4 * info.n_layers * info.n_heads * n * n / 1e9
    st.info(t("long_text", n=n, full=shelf.FULL_MAPS_TOKENS, gb=full_gb))  # why this page differs, on top
    if held is None:
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
    input_notices(model, held, shelf.long_token_limit(model))
    token_chips(held, model.token_bytes)
    level, hide_special, scale, palette, first_aside = view_options(held)
    lens_switch_unavailable(t("long_full_only", full=shelf.FULL_MAPS_TOKENS))  # what is left out, and why
    view_key = (source, text, text_b, level, hide_special, "raw", True, first_aside)
    reduced_mosaic(held, view_key, palette, scale)  # over the memory budget: guarded's message ends the page
    head_detail(info, view_key, scale, palette, long=True)
    next_token_predictions(model, key, long=True)
    head_detectors(model, source)
    reduced_download(key)


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
    """What this page draws from, as NPZ (analysis.export.reduced_npz), built when asked (ui.downloads); in its
    place, why not, when the trace is gone or the file would not fit the memory budget now."""
    bench = workbench()
    held = traces.held_reduced(bench, *key)
    if held is None:
        st.warning(t("long_evicted"))
        return
    need = reduced_npz_bytes(held)
    del held  # not kept by the page: reduced_npz_of looks it up again
    if need > traces.export_room(bench):
        st.caption(t("export_too_large", kind="NPZ", need=need / 1e9, budget=bench.budget / 1e9))
        return
    prepared_download(t("download_reduced_npz"), "reduced_npz", functools.partial(reduced_npz_of, workbench(), key),
                      "attnviz_reduced.npz", "application/octet-stream", help=t("download_reduced_npz_help"),
                      gone=t("long_evicted"))


def reduced_npz_of(bench, key: tuple) -> bytes | None:
    """The held trace's NPZ, None when the store has let the trace go. The trace is looked up when the file is
    built rather than captured by the button: a captured trace would stay in memory, uncounted, after the store
    had let it go."""
    held = traces.held_reduced(bench, *key)
    if held is None:
        return None
    return traces.reduced_export(bench, held)
