"""One head's queries and keys across a corpus (AttentionViz) for the Explore page: the corpora a visitor can
pick (the built-in probe sentences, a treebank of the reference data, an uploaded file), and the map computed
once per (model, head, corpus) and shared, under the memory budget (readouts.qkmap computes it)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import BinaryIO

from attnviz.analysis.conllu import parse_conllu_sentences, read_conllu_sentences
from attnviz.analysis.lines import MAX_TEXT_CHARS, text_lines
from attnviz.readouts import qkmap
from attnviz.workbench.shared import Workbench

DEFAULT_SENTENCES = 200
MAX_SENTENCES = qkmap.MAX_SENTENCES


def corpora() -> list[str]:
    """The corpus names a visitor may pick: builtin:en, builtin:zh, and ud:<file> per treebank found."""
    return ["builtin:en", "builtin:zh", *(f"ud:{path.name}" for path in qkmap.data_treebanks())]


def named_corpus(name: str) -> list[qkmap.CorpusSentence]:
    kind, _, rest = name.partition(":")
    if kind == "builtin":
        return qkmap.builtin_corpus(rest)
    if kind == "ud":
        paths = {path.name: path for path in qkmap.data_treebanks()}
        if rest not in paths:
            raise ValueError(f"no treebank {rest!r} in the reference data")
        return qkmap.treebank_corpus(read_conllu_sentences(paths[rest], most=MAX_SENTENCES))
    raise ValueError(f"unknown corpus {name!r}")


@dataclass(frozen=True)
class Upload:
    """A visitor's file as the map reads it: its first sentences (MAX_SENTENCES at most, all the slider can
    ask for), whether the file held more, and the corpus key of the map (a digest of those sentences: visitors
    with the same sentences share one map, and nothing keeps the file's bytes)."""

    key: str
    sentences: tuple[qkmap.CorpusSentence, ...]
    more: bool


def uploaded_corpus(filename: str, data: bytes | BinaryIO) -> Upload:
    """A visitor's file: a .conllu treebank (parts of speech kept), else UTF-8 text, one sentence a line. Read as a
    stream only until MAX_SENTENCES sentences (and one more, to tell whether there are more) are had: a 19.9 MB
    file read whole took the server from 0.98 to 2.34 GB and 20-29 s (issue 36, F2)."""
    if filename.lower().endswith(".conllu"):
        read = parse_conllu_sentences(data, filename, most=MAX_SENTENCES + 1)
        sentences, more = qkmap.treebank_corpus(read[:MAX_SENTENCES]), len(read) > MAX_SENTENCES
    else:
        texts, more = text_lines(data, filename, most=MAX_SENTENCES, max_line_chars=MAX_TEXT_CHARS)
        sentences = [qkmap.CorpusSentence(text) for text in texts]
    if not sentences:
        raise ValueError(f"{filename}: no sentences")
    digest = hashlib.sha256(repr([(s.text, s.spans, s.tags) for s in sentences]).encode())
    return Upload("upload:" + digest.hexdigest()[:32], tuple(sentences), more)


def result(bench: Workbench, name: str, layer: int, head: int, corpus: str, n: int):
    return bench.views.get(("qkmap", name, layer, head, corpus, n))


def qk_map(bench: Workbench, model, name: str, layer: int, head: int, corpus: str, sentences, n: int,
           progress=None):
    """The map of head (layer, head) over the first `n` of `sentences` (named `corpus` in the key); the caller
    holds the heavy-work slot."""
    key = ("qkmap", name, layer, head, corpus, n)
    done = bench.views.get(key)
    if done is not None:
        return done
    chosen = list(sentences)[:n]
    need = qkmap.map_bytes(model, min(len(chosen) * qkmap.SENTENCE_TOKENS, qkmap.MAX_TOKENS))
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        found = qkmap.qk_map(model, chosen, layer, head, progress=progress)
    size = found.n_points * (4 * 4 + 8 * 4) + sum(len(t) for t in found.tokens) + sum(map(len, found.sentences))
    bench.views.put(key, found, size)
    return found
