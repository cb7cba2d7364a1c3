"""The Findings page's computations: each replication card's report (findings.cards.report) on the
loaded model, computed once per (card, model, data) under the memory budget and shared with every visitor,
as the retrieval heads are (workbench.retrieval); a card whose need passes the host's budget says so
before it starts (`too_large`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from attnviz.analysis.reference_data import data_path
from attnviz.findings import measures as findings
from attnviz.findings.cards import Card, cannot_measure, cards, report
from attnviz.workbench import retrieval
from attnviz.workbench.head_finder import BATCH_BYTES
from attnviz.workbench.shared import Workbench
from attnviz.workbench.traces import trace_bytes

__all__ = ["Card", "cannot_measure", "cards"]  # the page reads the cards through here (ui imports no interventions)


def data_key(data: bytes | None) -> str:
    """What a card's result is keyed by besides card and model: the treebank's digest, or "builtin"."""
    return "builtin" if data is None else hashlib.sha256(data).hexdigest()


def _key(card: Card, name: str, data: bytes | None) -> tuple:
    return ("finding", card.id, name, data_key(data))


def shared_report(bench: Workbench, card: Card, name: str, data: bytes | None = None) -> dict | None:
    """The card's report on this model and data, if some visitor has computed it."""
    return bench.views.get(_key(card, name, data))


def applies(card: Card, model) -> bool:
    """Whether the card can run on this model at all (some need a decoder with a language-model head)."""
    return findings.is_decoder(model) or not card.decoders_only


def need_bytes(card: Card, model) -> int:
    """What the card's largest step holds besides the model: clark2019's scoring batch of traces (the
    Head Finder's BATCH_BYTES, or one 128-token trace when that is more), wu2024's decoding of its longest
    prompt (as workbench.retrieval reserves it), the others' passes (findings.run_bytes)."""
    if card.id == "clark2019":
        return max(BATCH_BYTES, trace_bytes(model, 128))
    if card.id == "wu2024":
        batch = retrieval.prompts(model, card.inputs["haystack_tokens"], card.inputs["needles"])
        return retrieval.job_bytes(model, batch)
    return findings.run_bytes(model, card)


def too_large(bench: Workbench, card: Card, model) -> int | None:
    """The bytes the card needs when the host's budget cannot hold them beside the loaded model, else None."""
    need = need_bytes(card, model)
    model_bytes = sum(p.numel() * p.element_size() for p in model.module.parameters())
    return need if need + model_bytes > bench.budget else None


def run(bench: Workbench, card: Card, model, name: str, items=None, data: bytes | None = None,
        progress=None) -> dict:
    """The card's report (computing it when no visitor has); `items` are clark2019's treebank items, `data`
    the bytes they were read from (the cache key). The caller holds the heavy-work slot."""
    key = _key(card, name, data)
    done = bench.views.get(key)
    if done is not None:  # another visitor's identical run finished while this one waited for the slot
        return done
    if card.id == "wu2024":  # the Head Finder's own grid, shared with it (it reserves its own bytes)
        ours = findings.compute(card, model, name, progress=progress, grid_of=lambda haystack, n, tick: (
            retrieval.retrieval_grid(bench, model, name, haystack, n, progress=tick)))
    else:
        need = need_bytes(card, model)
        with bench.run_slot(need), bench.reserve(need, keep_model=name):
            ours = findings.compute(card, model, name, items=items, progress=progress)
    result = report(card, name, ours)
    bench.views.put(key, result, 4 * len(repr(result)) + 1_000)
    return result


TREEBANK = "ud/en_ewt-ud-dev.conllu"  # the UD English EWT dev split of the reference-data folder


def default_treebank() -> Path | None:
    """The reference-data folder's UD English EWT dev split (attnviz.analysis.reference_data, where
    the blimp command and the corpus map find theirs) when the server has it (the UD treebanks
    are not shipped: the project ships only self-written data), else None: the page then asks for an upload."""
    path = data_path(TREEBANK)
    return path if path.is_file() else None
