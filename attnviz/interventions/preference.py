"""Which sentence of a minimal pair a model prefers, and the `blimp` command that counts how often it
prefers the grammatical one (BLiMP, Warstadt et al. 2020; the built-in pairs).

Methods (`preference_method`), all natural-log probabilities from `attnviz.interventions.effects`:

- "prefix" (decoders, pairs with one_prefix fields): log P(word | prefix) of each side's word, BLiMP's
  one-prefix method. The continuation scored is the word with its leading space (" are"), tokenised
  together with the prefix (effects.continuation_logprob's boundary rule).
- "sentence" (decoders, pairs without them): the full-sentence log-probability, the sum of
  log P(token | tokens before) over the sentence's tokens. Where the tokenizer adds a start token (BOS)
  every token is scored; where it adds none (GPT-2, SmolLM2) the first token has no context and is left
  out (`Preference.first_token_unscored`), which cancels exactly when both sentences start with the same
  token, as every built-in pair does.
- "masked" (encoders with a masked-LM head): the masked word score, the pseudo-log-likelihood
  (Salazar et al. 2020) of the differing word: each of its tokens is replaced by the mask token in
  turn, the rest of the sentence kept, and the log-probabilities of the original tokens are summed.
  The word is the one-prefix word where the pair has one, else the differing span of the word
  alignment (attnviz.analysis.pairs); an insertion has no word on one side and is not scored.
- Encoders without a masked-LM head (all-MiniLM-L6-v2) have no preference: `preference_method` raises
  ValueError(NOT_AVAILABLE).

The model prefers the good sentence when its score is strictly higher (a tie counts as not preferred).
What the verdict compares (`Preference.compares`): the sums above when both sides score the same number of
tokens; the per-token means (sum / tokens) when they do not, since a sum of log-probabilities falls with
every token scored and would reward the shorter side for its length alone (他比我高 against 他比我很高).
The `blimp` command keeps BLiMP's own metric, the sum (`Preference.margin`), whatever the token counts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from attnviz.analysis.pair_items import MinimalPair, read_pairs
from attnviz.analysis.pairs import align_texts
from attnviz.interventions import effects
from attnviz.probesets import PROBESET_DIR
from attnviz.trace import split_words
from attnviz.transformer.record import Recorder

BUILTIN_PAIRS = PROBESET_DIR / "pairs.jsonl"
METHODS = ("prefix", "sentence", "masked")
NOT_AVAILABLE = ("not available: this encoder has no masked-LM head, so it gives sentences no probability "
                 "(a sentence-embedding model such as all-MiniLM-L6-v2)")
DATA_ENV = "ATTNVIZ_DATA_DIR"
BATCH_PAIRS = 32  # pairs one padded forward pass of the blimp command holds (64 rows of ~10 tokens)


@dataclass(frozen=True)
class Preference:
    method: str  # one of METHODS
    good: float  # natural log-probability (score) of the good side
    bad: float
    tokens_good: list[tuple[str, float]] = field(default_factory=list)  # each scored token's (text, logprob)
    tokens_bad: list[tuple[str, float]] = field(default_factory=list)
    first_token_unscored: bool = False  # "sentence" method without a start token

    @property
    def margin(self) -> float:
        """good - bad of the summed scores: BLiMP's metric, which the `blimp` command counts."""
        return self.good - self.bad

    @property
    def n_good(self) -> int:
        return len(self.tokens_good)

    @property
    def n_bad(self) -> int:
        return len(self.tokens_bad)

    @property
    def mean_good(self) -> float:
        """The good side's mean log-probability per scored token."""
        return self.good / self.n_good if self.n_good else float("nan")

    @property
    def mean_bad(self) -> float:
        return self.bad / self.n_bad if self.n_bad else float("nan")

    @property
    def compares(self) -> str:
        """"sum" when both sides score as many tokens, else "mean" (see the module docstring)."""
        return "sum" if self.n_good == self.n_bad else "mean"

    @property
    def verdict_margin(self) -> float:
        """good - bad of what the verdict compares: the sums, or the per-token means."""
        return self.margin if self.compares == "sum" else self.mean_good - self.mean_bad

    @property
    def prefers_good(self) -> bool:
        return self.verdict_margin > 0


def builtin_pairs(lang: str | None = None) -> list[MinimalPair]:
    """The built-in, self-written pairs (attnviz/probesets/pairs.jsonl), optionally of one language."""
    pairs = read_pairs(BUILTIN_PAIRS)
    return [p for p in pairs if lang is None or p.lang == lang]


def pair_from_texts(first: str, second: str) -> MinimalPair:
    """Two typed sentences as a pair (first as "good", second as "bad": the page does not know which is
    grammatical). A substitution after a common prefix of words gets one_prefix fields from the word
    alignment, so a decoder scores the differing words given the prefix; an insertion, or a change of
    the first word, is scored whole (the "sentence" method)."""
    alignment = align_texts(first, second)  # ValueError for the same words
    if alignment.kind == "substitution" and alignment.prefix > 0:
        spans = {side: split_words(text) for side, text in (("a", first), ("b", second))}
        (a0, a1), (b0, b1) = alignment.span_a, alignment.span_b
        start_a, start_b = spans["a"][a0][0], spans["b"][b0][0]
        prefix = first[:start_a].rstrip()
        if prefix == second[:start_b].rstrip():
            return MinimalPair(first, second, prefix, first[start_a: spans["a"][a1 - 1][1]],
                               second[start_b: spans["b"][b1 - 1][1]])
    return MinimalPair(first, second)


def preference_method(model, pair: MinimalPair) -> str:
    if model.config.causal and model.module.lm_head is not None:
        return "prefix" if pair.has_prefix else "sentence"
    if effects.has_mlm_head(model):
        return "masked"
    raise ValueError(NOT_AVAILABLE)


def pair_preference(model, pair: MinimalPair, head_mask=None) -> Preference:
    """The model's scores of both sentences by `preference_method`; head_mask [L, H] or [L, B, H] with
    B = 1 switches heads off (effects)."""
    method = preference_method(model, pair)
    if method in ("prefix", "sentence"):
        (good_request, bad_request), unscored = decoder_requests(model, pair)
        good, tokens_good = effects.continuation_logprob(model, *good_request, head_mask)
        bad, tokens_bad = effects.continuation_logprob(model, *bad_request, head_mask)
        return Preference(method, good, bad, tokens_good, tokens_bad, unscored)
    spans = differing_spans(pair)
    good, tokens_good = masked_word_logprob(model, pair.good, spans["good"], head_mask)
    bad, tokens_bad = masked_word_logprob(model, pair.bad, spans["bad"], head_mask)
    return Preference(method, good, bad, tokens_good, tokens_bad)


def decoder_requests(model, pair: MinimalPair) -> tuple[tuple[tuple[str, str], tuple[str, str]], bool]:
    """((prefix, continuation) of the good side, of the bad side), and whether a first token is left
    out: what a decoder scores with effects.continuation_logprob under the pair's method."""
    if pair.has_prefix:
        return ((pair.prefix, pair.continuation("good")), (pair.prefix, pair.continuation("bad"))), False
    good, unscored_good = sentence_request(model, pair.good)
    bad, unscored_bad = sentence_request(model, pair.bad)
    return (good, bad), unscored_good or unscored_bad


def sentence_request(model, sentence: str) -> tuple[tuple[str, str], bool]:
    """(prefix, continuation) whose continuation log-probability is the sentence's, and whether the first
    token is left out for want of a start token (BOS)."""
    enc = model.encode(sentence)
    if not enc.ids:
        raise ValueError("the sentence produced no tokens")
    if enc.special_tokens_mask[0]:
        return ("", sentence), False
    # No start token: the first token's own text is the context. The boundary rule scores the tokens
    # whose span ends after the prefix: all but the first.
    first_end = enc.offsets[0][1]
    return (sentence[:first_end], sentence[first_end:]), True


def continuation_batch(model, rows: list[tuple[list[int], int]], head_mask=None) -> np.ndarray:
    """float64 [B]: for each row (ids, first) of effects.continuation_ids, the summed log P(ids[t] | ids[:t])
    over t >= first, in one forward pass: rows are padded on the right (a causal model's earlier
    positions never see the padding); head_mask None, [L, H] or [L, B, H] (one mask per row).
    What `effects.continuation_logprob` gives row by row (tested), batched for the BLiMP files and the
    ablation benchmark."""
    weight = next(model.module.parameters())
    device = weight.device
    width = max(len(ids) for ids, _ in rows)
    tokens = torch.full((len(rows), width), model.pad_id, dtype=torch.long)
    keep = torch.zeros_like(tokens)
    batch, position, target = [], [], []
    for b, (ids, first) in enumerate(rows):
        if not 1 <= first < len(ids):
            raise ValueError(f"row {b}: the first scored token needs a token before it")
        tokens[b, : len(ids)] = torch.tensor(ids)
        keep[b, : len(ids)] = 1
        for t in range(first, len(ids)):
            batch.append(b)
            position.append(t - 1)  # token t is predicted from the hidden state at t - 1
            target.append(ids[t])
    mask = None if head_mask is None else torch.as_tensor(np.asarray(head_mask, dtype=np.float32)).to(weight)
    with torch.inference_mode():
        out = model.module(tokens.to(device), keep.to(device), torch.zeros_like(tokens).to(device),
                           head_mask=mask, with_logits=False, record=Recorder())
        rows_index = torch.tensor(batch, device=device)
        hidden = out.hidden[rows_index, torch.tensor(position, device=device)]  # N, C
        logprobs = torch.log_softmax(model.module.unembed(hidden).float(), dim=-1)  # N, V
        picked = logprobs.gather(-1, torch.tensor(target, device=device)[:, None])[:, 0].double()  # N
        sums = torch.zeros(len(rows), dtype=torch.float64, device=device).index_add_(0, rows_index, picked)
    return sums.cpu().numpy()


def differing_spans(pair: MinimalPair) -> dict[str, tuple[int, int]]:
    """Character span [start, end) of each side's differing word: the one-prefix word, else the span of
    the word alignment. ValueError for an insertion (no word on one side)."""
    if pair.has_prefix:
        spans = {}
        for side in ("good", "bad"):
            continuation = pair.continuation(side)
            end = len(pair.prefix) + len(continuation)
            spans[side] = (end - len(continuation.lstrip()), end)
        return spans
    alignment = align_texts(pair.good, pair.bad)
    if alignment.kind != "substitution":
        raise ValueError("masked word scores need a differing word in both sentences; this pair is an insertion")
    spans = {}
    for side, sentence, (start, end) in (("good", pair.good, alignment.span_a), ("bad", pair.bad, alignment.span_b)):
        word_spans = split_words(sentence)
        spans[side] = (word_spans[start][0], word_spans[end - 1][1])
    return spans


MAX_MASKED_TOKENS = 8  # pseudo-log-likelihood passes per side: a differing word, not a whole sentence


def masked_word_logprob(model, sentence: str, span: tuple[int, int], head_mask=None):
    """Pseudo-log-likelihood of the tokens overlapping `span`: each masked in turn (see the module)."""
    if not effects.has_mlm_head(model):
        raise ValueError(NOT_AVAILABLE)
    enc = model.encode(sentence)
    if enc.overflowing:
        raise ValueError(f"the text is longer than this model's limit of {model.info.max_tokens} tokens")
    start, end = span
    positions = [i for i, ((s, e), special) in enumerate(zip(enc.offsets, enc.special_tokens_mask))
                 if not special and s < end and start < e]
    if not positions:
        raise ValueError("the differing word produced no tokens")
    if len(positions) > MAX_MASKED_TOKENS:  # one forward pass per token: bounded, since a visitor sets it
        raise ValueError(f"the differing part has {len(positions)} tokens; masked scores take at most "
                         f"{MAX_MASKED_TOKENS} (one forward pass each): make the two sentences differ in one word")
    total, per_token = 0.0, []
    for position in positions:
        value = effects.masked_token_logprob(model, enc.ids, position, head_mask)
        total += value
        per_token.append((model.tokenizer.decode([enc.ids[position]], skip_special_tokens=False), value))
    return total, per_token


# ---------------------------------------------------------------------------------------------------
# accuracy over files: the `blimp` command


@dataclass
class FileResult:
    name: str
    n: int
    correct: int
    margins: list[float]
    methods: dict[str, int]

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else float("nan")

    @property
    def mean_margin(self) -> float:
        return float(np.mean(self.margins)) if self.margins else float("nan")

    def to_json(self) -> dict:
        return {"n": self.n, "correct": self.correct, "accuracy": round(self.accuracy, 4),
                "mean_margin": round(self.mean_margin, 4), "methods": self.methods}


def score_pairs(model, name: str, pairs: list[MinimalPair], progress=None, batch: int = BATCH_PAIRS) -> FileResult:
    """Preference accuracy and mean margin (good - bad, nats) over `pairs`; `progress(done, total)`.
    Decoders score `batch` pairs in one padded pass (`continuation_batch`); the masked method goes pair by
    pair."""
    result = FileResult(name, 0, 0, [], {})
    step = batch if model.config.causal and model.module.lm_head is not None else 1
    for start in range(0, len(pairs), step):
        chunk = pairs[start : start + step]
        methods = [preference_method(model, pair) for pair in chunk]
        if methods[0] == "masked":
            margins = [pair_preference(model, chunk[0]).margin]
        else:
            rows = []
            for pair in chunk:
                (good, bad), _ = decoder_requests(model, pair)
                rows += [effects.continuation_ids(model, *good), effects.continuation_ids(model, *bad)]
            scores = continuation_batch(model, rows)
            margins = (scores[0::2] - scores[1::2]).tolist()
        for margin, method in zip(margins, methods):
            result.n += 1
            result.correct += margin > 0
            result.margins.append(margin)
            result.methods[method] = result.methods.get(method, 0) + 1
        if progress is not None:
            progress(result.n, len(pairs))
    return result


def default_data_dir() -> Path:
    """`$ATTNVIZ_DATA_DIR/blimp`, else `../shared/data/blimp` beside the repository (docs/formats.md, "Reference
    data")."""
    value = os.environ.get(DATA_ENV, "").strip()
    root = Path(value).expanduser() if value else Path(__file__).resolve().parents[3] / "shared" / "data"  # <repo>/..
    return root / "blimp"


def data_files(data: str | None) -> list[tuple[str, Path | None]]:
    """(name, path) of the files `--data` names: a folder's *.jsonl, one .jsonl file, or `builtin`
    (the built-in pairs, one group per language: path None)."""
    if data == "builtin":
        return [("builtin:en", None), ("builtin:zh", None)]
    path = Path(data) if data is not None else default_data_dir()
    if path.is_file():
        return [(path.name, path)]
    if not path.is_dir():
        raise FileNotFoundError(f"no BLiMP data at {path} (give --data DIR, or set {DATA_ENV})")
    files = sorted(path.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no *.jsonl files in {path}")
    return [(f.name, f) for f in files]
