"""Sink anatomy (Gu et al. 2024) for the Explore page: every head's mean weight on the first token over the
built-in texts or the visitor's file, with the first key's geometry; computed once per (model, texts) and
shared, under the memory budget (readouts.sinks computes it)."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

from attnviz.analysis.lines import MAX_TEXT_CHARS, text_lines
from attnviz.readouts import sinks
from attnviz.workbench.shared import Workbench

BUILTIN = "builtin"
MAX_TEXTS = 200  # a file's texts at most, each cut at sinks.TEXT_TOKENS (the built-in set is 26)


def corpus_key(texts: list[str] | None) -> str:
    """BUILTIN for the built-in texts, else a digest of the visitor's texts (the store keeps no text as key)."""
    if texts is None:
        return BUILTIN
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:32]


def uploaded_texts(filename: str, data: bytes | BinaryIO) -> tuple[list[str], bool]:
    """A visitor's file's first MAX_TEXTS texts (non-empty lines, stripped) and whether it held more, read as a
    stream no further than the text after them: a 19.9 MB file of 6.6 million lines was split whole on every
    rerun (+0.58 GB) only to be refused for holding more than MAX_TEXTS (issue 36, F2)."""
    texts, more = text_lines(data, filename, most=MAX_TEXTS, max_line_chars=MAX_TEXT_CHARS)
    if not texts:
        raise ValueError(f"{filename}: no texts (one a line)")
    return texts, more


def result(bench: Workbench, name: str, key: str):
    """The SinkAnatomy of these texts, if some visitor has computed it."""
    return bench.views.get(("sinks", name, key))


def anatomy(bench: Workbench, model, name: str, texts: list[str] | None, progress=None):
    """The SinkAnatomy of `texts` (None: the built-in ones), every text cut at sinks.TEXT_TOKENS; the caller
    holds the heavy-work slot."""
    key = ("sinks", name, corpus_key(texts))
    done = bench.views.get(key)
    if done is not None:  # another visitor's identical run finished while this one waited for the slot
        return done
    chosen = sinks.builtin_texts() if texts is None else texts
    if len(chosen) > MAX_TEXTS:
        raise ValueError(f"{len(chosen)} texts: at most {MAX_TEXTS} are measured")
    need = sinks.anatomy_bytes(model, sinks.TEXT_TOKENS)
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        found = sinks.sink_anatomy(model, chosen, max_tokens=sinks.TEXT_TOKENS, progress=progress)
    for array in (found.means, found.first_key_norm, found.other_key_norm, found.query_cosine, found.sink_mass):
        array.setflags(write=False)
    bench.views.put(key, found, 5 * found.means.nbytes + 1024)
    return found
