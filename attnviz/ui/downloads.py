"""Downloads built at the click: a text's full-precision trace (NPZ, JSON), and the refusal text a download
carries instead when memory ran short since the page was drawn (the Explore page, and its long-text body)."""

from __future__ import annotations

import functools

import streamlit as st

from attnviz.analysis import export
from attnviz.ui.common import session_id, t, workbench
from attnviz.ui.strings import translate
from attnviz.workbench import OverBudget, traces
from attnviz.workbench.memory import VISITOR


def exports(model, text, text_b) -> None:
    """Full-precision exports recompute the trace on click (the app keeps only a float16 copy)."""
    st.caption(t("share"))
    cols = st.columns(2)
    bench, n_tokens = workbench(), len(model.encode(text, text_b).ids)
    formats = (("npz", export.trace_npz, "application/octet-stream"), ("json", export.trace_json, "application/json"))
    for column, (kind, write, mime) in zip(cols, formats):
        need = traces.export_bytes(model, n_tokens, kind)
        if need > traces.export_room(bench):  # refused here, visibly, rather than after the click
            column.caption(t("export_too_large", kind=kind.upper(), need=need / 1e9, budget=bench.budget / 1e9))
            continue
        write_export = functools.partial(traces.export, bench, model, text, text_b, kind, write)
        build = functools.partial(export_or_refusal, write_export, session_id(), st.session_state.get("lang", "en"))
        column.download_button(t(f"download_{kind}"), build, file_name=f"attnviz_trace.{kind}", mime=mime,
                               on_click="ignore", key=kind)


def export_or_refusal(build, visitor: str, lang: str):
    """The export's bytes, `build()`; if memory ran short since the page was drawn, a short text that says so
    (the download is the only place the visitor will look). Streamlit calls this in a worker thread of its
    own, outside the script run: the visitor and the language come from the page, not from the session."""
    VISITOR.set(visitor)
    try:
        return build()
    except OverBudget as error:
        return translate(lang, "export_refused", need=error.need / 1e9, budget=error.budget / 1e9,
                         used=error.used / 1e9)
