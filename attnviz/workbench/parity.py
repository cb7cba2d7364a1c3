"""The parity check on the visitor's sentence: Hugging Face's eager model on the same weights beside ours."""

from __future__ import annotations

from attnviz.reference.parity import check_parity
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import reference_for
from attnviz.workbench.traces import trace_bytes

COMPARING = "comparing"  # the progress stage after the reference has loaded


def parity(bench: Workbench, model, text: str, text_pair: str | None, progress=None):
    """attnviz.reference.parity's report; the caller holds the heavy-work slot."""
    reference = reference_for(bench, model, progress=progress)
    if progress is not None:
        progress(COMPARING)
    n_tokens = len(model.encode(text, text_pair).ids)
    with bench.reserve(trace_bytes(model, n_tokens, 2), keep_model=model.info.name):  # ours and HF's
        return check_parity(model, text, text_pair, reference=reference)
