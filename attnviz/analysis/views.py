"""What the Explore page draws: token- or word-level attention, optionally without special tokens."""

from __future__ import annotations

import codecs
from dataclasses import dataclass

import numpy as np

from attnviz.analysis.profile import special_tokens
from attnviz.analysis.scoring import word_attention_matrix
from attnviz.trace import AttentionTrace

WHITESPACE_SIGNS = {" ": "␣", "\n": "⏎", "\r": "␍", "\t": "⇥"}


def token_labels(trace: AttentionTrace) -> list[str]:
    """How each token reads on the page (display only: `trace.tokens` keeps the contract's text).

    - Byte pieces of one character (several tokens sharing one character span, as byte-level BPE
      splits a Chinese character) show which piece they are: "猫[1/3]", "猫[2/3]", "猫[3/3]".
    - Otherwise a token reads as the text it stands for, a leading space kept (the plots show it as ␣): no
      vocabulary's own marks (Ġ, ▁, ##), the same notation in every view (ui/tokens.shown_tokens).
    """
    labels = list(trace.tokens)
    for start, end in piece_runs(trace):
        for k in range(start, end):
            labels[k] = f"{trace.tokens[k]}[{k - start + 1}/{end - start}]"
    return labels


def piece_runs(trace: AttentionTrace) -> list[tuple[int, int]]:
    """(first token, end) of each run of two or more consecutive tokens that share one non-empty character span:
    the byte pieces of one character, as byte-level BPE splits a Chinese character (each piece's text, in
    `trace.tokens`, is the whole character)."""
    spans, runs, start = trace.offsets, [], 0
    while start < len(spans):
        end = start + 1
        while end < len(spans) and spans[end] == spans[start] and spans[start][0] < spans[start][1]:
            end += 1
        if end - start > 1:
            runs.append((start, end))
        start = end
    return runs


def word_runs(trace: AttentionTrace) -> list[tuple[int | None, int, int]]:
    """The tokens grouped as the page's token chips group them: (word, first token, end) for each run of
    consecutive tokens of one word (`trace.word_of_token`), and (None, t, t + 1) for a token of no word
    (special tokens, a token of only spaces). The runs cover every token once, in order."""
    runs: list[tuple[int | None, int, int]] = []
    for t, word in enumerate(trace.word_of_token):
        if word is not None and runs and runs[-1][0] == word and runs[-1][2] == t:
            runs[-1] = (word, runs[-1][1], t + 1)
        else:
            runs.append((word, t, t + 1))
    return runs


def visible_token(text: str, token_bytes: bytes | None = None) -> str:
    """A decoded token as a table shows it: spaces and line breaks as signs, and a piece of a character
    (decoding gives U+FFFD) as its bytes, e.g. "⟨e7 8c⟩"."""
    if "\ufffd" in text and token_bytes is not None:
        return "⟨" + " ".join(f"{b:02x}" for b in token_bytes) + "⟩"
    if text.strip() == text:
        return text
    core = text.strip()
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()):]
    sign = lambda part: "".join(WHITESPACE_SIGNS.get(c, "␣") for c in part)  # noqa: E731
    return sign(lead) + core + sign(trail) if core else sign(text)


def completed_text(pieces: list[bytes]) -> str | None:
    """The characters that byte pieces (a predicted piece of a character, then the tokens after it) make up,
    once the first piece's bytes all belong to whole characters: [e4 bb] + [96] -> "他", [e4 bb] + [96 e7 94 9f]
    -> "他生", [e4 bb] + [96 e7] -> "他" (e7 still waits for its character). None while the first piece is not
    complete yet, or when the bytes are not UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    joined = b"".join(pieces)
    try:
        text = decoder.decode(joined)
    except UnicodeDecodeError:
        return None
    pending = decoder.getstate()[0]  # the bytes of a character not finished yet
    return text if text and len(joined) - len(pending) >= len(pieces[0]) else None


@dataclass(frozen=True)
class AttentionView:
    attentions: np.ndarray  # [L, H, R, C], in the trace's float dtype
    labels: list[str]  # one per row (== column) of the view
    level: str  # "token" or "word"


def attention_view(trace: AttentionTrace, level: str = "token", hide_special: bool = False) -> AttentionView:
    """Token-level: the trace's own attention. Word-level: the docs/formats.md word attention (mean over the
    row word's tokens of the sum over the column word's tokens); special tokens belong to no word and
    drop out. hide_special (token level): drop [CLS]/[SEP]/BOS rows and columns and renormalise rows,
    so a row shows how the remaining weight is shared among real tokens.

    The view has the trace's float dtype (the app keeps float16 traces); arithmetic runs in float32 or
    float64 one layer at a time, so no full-size wide copy is made."""
    dtype = trace.attentions.dtype if trace.attentions.dtype in (np.float16, np.float32) else np.float32
    if level == "word":
        # Only words that kept a token: after truncation the rest of a long text has none, and a
        # words x words grid over all of them could need gigabytes.
        kept = sorted({w for w in trace.word_of_token if w is not None})
        index = {w: k for k, w in enumerate(kept)}
        word_of_token = [None if w is None else index[w] for w in trace.word_of_token]
        words = word_attention_matrix(trace.attentions, word_of_token, len(kept), dtype=dtype)
        return AttentionView(words, [trace.words[w] for w in kept], "word")
    if level != "token":
        raise ValueError(f"level must be 'token' or 'word', got {level!r}")
    attentions, labels = trace.attentions, token_labels(trace)
    special = special_tokens(trace)
    if hide_special and special.any():
        keep = np.flatnonzero(~special)
        if keep.size == 0:
            raise ValueError("the input has only special tokens")
        renormalised = np.empty((*attentions.shape[:2], keep.size, keep.size), dtype=dtype)
        for layer, layer_attentions in enumerate(attentions):
            kept = np.asarray(layer_attentions[:, keep][:, :, keep], dtype=np.float32)
            totals = kept.sum(axis=-1, keepdims=True)
            # A row whose whole weight went to special tokens has nothing left to share: it stays 0.
            renormalised[layer] = np.divide(kept, totals, out=np.zeros_like(kept), where=totals > 0)
        attentions = renormalised
        labels = [labels[i] for i in keep]
    return AttentionView(np.asarray(attentions, dtype=dtype), labels, "token")
