"""Downloads of files that take memory to build: a text's full-precision trace (NPZ, JSON) on the Explore page,
and the long-text body's reduced views (NPZ). A download that cannot be made is a message on the page, never a
file of text: what is known when the page draws (the file would not fit, the trace is gone) replaces the
button; what is known only when the file is built (memory ran short since) is said where the button was."""

from __future__ import annotations

import functools

import streamlit as st

from attnviz.analysis import export
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.language import t
from attnviz.workbench import OverBudget, traces


def exports(model, text, text_b) -> None:
    """Full-precision exports recompute the trace when asked (the app keeps only a float16 copy)."""
    st.caption(t("share"))
    cols = st.columns(2)
    bench, n_tokens = workbench(), len(model.encode(text, text_b).ids)
    formats = (("npz", export.trace_npz, "application/octet-stream"), ("json", export.trace_json, "application/json"))
    for column, (kind, write, mime) in zip(cols, formats):
        need = traces.export_bytes(model, n_tokens, kind)
        if need > traces.export_room(bench):  # refused here, visibly, rather than after the click
            column.caption(t("export_too_large", kind=kind.upper(), need=need / 1e9, budget=bench.budget / 1e9))
            continue
        with column:
            prepared_download(t(f"download_{kind}"), kind, functools.partial(
                traces.export, bench, model, text, text_b, kind, write), f"attnviz_trace.{kind}", mime)


@st.fragment
@guarded
def prepared_download(label: str, key: str, build, file_name: str, mime: str, help: str | None = None,
                      gone: str | None = None) -> None:
    """A "Prepare" button that builds the file in this script run, under the memory budget (`build()`, which
    reserves its peak), then the file's download button; when the build is refused, the refusal on the page, and
when `build()` returns None (what the file is made from is no longer held), `gone`.

    Not a download button whose data is built at the click: Streamlit calls that in a thread of its own and
    saves whatever it returns as the file, so a refusal could only be a file of text (or, raised, Streamlit's
    own "Failed to generate file"). The built bytes go to the download button alone: Streamlit holds them until
    this fragment runs again (the next click here, or the page's next run), and nothing else keeps them."""
    if not st.button(t("download_prepare", what=label), key=f"{key}_prepare", help=help):
        return
    try:
        with st.spinner(t("download_preparing")):
            data = build()
    except OverBudget as error:
        st.warning(t("export_refused", need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9))
        return
    if data is None:
        st.warning(gone)
        return
    st.download_button(t("download_ready", what=label), data, file_name=file_name, mime=mime, on_click="ignore",
                       key=key, type="primary", help=help)
