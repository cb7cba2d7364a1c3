"""One head's queries and keys across a corpus in one joint 2-D map (AttentionViz, Yeh et al. 2023).

Each sentence runs once (right-padded batches; only its own positions count) and the head's query vectors
and its key/value head's key vectors (after rotary: the vectors whose dot product is the score) are kept,
one of each per token. Before the projection they are normalised as AttentionViz does, in two steps that
leave every attention weight unchanged:
- translation: the keys are shifted so that their mean is the queries' mean. For one query q, adding a
  vector v to every key adds q.v to every score of its row, which the softmax ignores;
- scaling (after the translation, as AttentionViz orders them): the queries are multiplied by c and the
  keys divided by c, c = sqrt(mean ||k|| / mean ||q||), so both clouds have the same mean norm; q.k is
  unchanged (the centroids, equal after the translation, then differ by the factor c^2).
With equal norms, ||q - k||^2 = ||q||^2 + ||k||^2 - 2 q.k, so near in the map means (roughly) a high dot
product. The projection is PCA over both clouds together (an SVD of the centred [2N, D] matrix: numpy only,
no new dependency; t-SNE or UMAP would add one and a seed-dependent layout, and PCA's axes are linear, so
the map keeps the normalisation's meaning).

Bounded: at most `max_sentences` sentences and `max_tokens` tokens in all (the budget of a map); each
sentence is cut at `sentence_tokens`. `progress(done, total)` is called after each batch and may raise to
cancel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.analysis.conllu import sentence_text
from attnviz.analysis.reference_data import data_path
from attnviz.memory import ceiling
from attnviz.models.loaded_model import LoadedModel
from attnviz.probesets import builtin_items
from attnviz.transformer.record import NOTHING, Recorder

MAX_SENTENCES = 400
MAX_TOKENS = 16_384  # query + key points are twice this
SENTENCE_TOKENS = 64
BATCH_SIZE = 16


@dataclass(frozen=True)
class CorpusSentence:
    """A sentence and, for a treebank, each word's character span and part of speech (UPOS)."""

    text: str
    spans: tuple[tuple[int, int], ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class QKMap:
    """Per token of the corpus (N of them), its query's and its key's 2-D points and what they came from."""

    query_points: np.ndarray  # N, 2 float32
    key_points: np.ndarray  # N, 2
    sentence: np.ndarray  # N int: index into `sentences`
    position: np.ndarray  # N int: token position in its sentence (special tokens included)
    relative: np.ndarray  # N float: position / (n - 1) (0 for a one-token sentence)
    tokens: tuple[str, ...]  # N labels (the token's text in its sentence)
    spans: np.ndarray  # N, 2 int: the token's characters in its sentence ((0, 0) for a special token)
    tags: tuple[str, ...]  # N parts of speech ("" where the corpus has none, or a special token)
    sentences: tuple[str, ...]
    layer: int
    head: int
    scale: float  # c of the scaling step
    explained: tuple[float, float]  # share of the variance along each axis

    @property
    def n_points(self) -> int:
        return len(self.tokens)


class _Reached(Exception):
    """Raised as the block after the wanted layer starts: the rest of the forward pass is not needed."""


class _UpToLayer(Recorder):
    """Keeps the queries and keys of one layer, records nothing elsewhere, and ends the forward pass once that
    layer is done (a map of layer 3 of 30 costs 4 blocks, not 30)."""

    def __init__(self, layer: int) -> None:
        super().__init__("queries", "keys")
        self.layer = layer

    def at(self, layer: int):
        if layer > self.layer:
            raise _Reached
        return super().at(layer) if layer == self.layer else NOTHING


def map_bytes(model: LoadedModel, n_tokens: int, batch_size: int = BATCH_SIZE) -> int:
    """Transient bytes of one batch (every layer's queries and keys of B x T tokens, float32) plus the kept
    points of n_tokens tokens."""
    c = model.config
    width = SENTENCE_TOKENS
    batch = 4 * c.n_layers * batch_size * width * (c.n_heads + c.kv_heads) * c.dim_per_head
    return batch + n_tokens * 4 * (2 * c.dim_per_head + 16)


def normalise(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """AttentionViz's normalisation (module docstring): keys translated to the queries' mean, then both
    scaled to the same mean norm; every row's attention stays as it was. Returns (q', k', c)."""
    q, k = np.asarray(queries, np.float64), np.asarray(keys, np.float64)
    k = k - k.mean(axis=0) + q.mean(axis=0)
    q_norm, k_norm = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean()
    c = float(np.sqrt(k_norm / q_norm)) if q_norm > 0 and k_norm > 0 else 1.0
    return q * c, k / c, c


def project(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    """PCA of both clouds together: their points on the first two principal axes, and each axis's share of
    the variance."""
    both = np.concatenate([queries, keys])
    centred = both - both.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2] if vt.shape[0] >= 2 else np.vstack([vt, np.zeros_like(vt)])[:2]
    points = (centred @ axes.T).astype(np.float32)
    var = s ** 2
    total = float(var.sum()) or 1.0
    explained = tuple(float(v / total) for v in (list(var[:2]) + [0.0, 0.0])[:2])
    n = len(queries)
    return points[:n], points[n:], explained


def corpus_vectors(model: LoadedModel, sentences: Sequence[CorpusSentence], layer: int, head: int,
                   sentence_tokens: int = SENTENCE_TOKENS, max_sentences: int = MAX_SENTENCES,
                   max_tokens: int = MAX_TOKENS, batch_size: int = BATCH_SIZE,
                   progress: Callable[[int, int], None] | None = None):
    """(queries [N, D], keys [N, D], encodings, sentences kept): the head's raw vectors, one of each per token."""
    info = model.info
    if not 0 <= layer < info.n_layers or not 0 <= head < info.n_heads:
        raise ValueError(f"no head L{layer} H{head}: this model has {info.n_layers} layers x {info.n_heads} heads")
    kept = [s for s in sentences if s.text.strip()]
    if not kept:
        raise ValueError("no sentences")
    if len(kept) > max_sentences:
        raise ValueError(f"{len(kept)} sentences: a map takes at most {max_sentences}")
    cut = min(sentence_tokens, model.context_tokens)
    encodings = [model.encode(s.text, max_tokens=cut) for s in kept]
    total = sum(len(e.ids) for e in encodings)
    if total > max_tokens:
        raise ValueError(f"{total} tokens: a map takes at most {max_tokens}")
    kv = model.module.kv_group[head]
    queries, keys = [], []
    per_text = map_bytes(model, total, 2) - map_bytes(model, total, 1)  # what a batch's row adds
    start = 0
    while start < len(encodings):
        batch = encodings[start:start + ceiling.fit(per_text, batch_size, map_bytes(model, total, 0))]
        recorder = _UpToLayer(layer)
        try:
            model.forward_encodings(batch, with_logits=False, record=recorder)
        except _Reached:
            pass
        q = recorder.layers[layer]["queries"][:, head].float().cpu().numpy()  # B, T, D
        k = recorder.layers[layer]["keys"][:, kv].float().cpu().numpy()
        for b, enc in enumerate(batch):
            queries.append(q[b, :len(enc.ids)])
            keys.append(k[b, :len(enc.ids)])
        start += len(batch)
        if progress is not None:
            progress(start, len(encodings))
    return np.concatenate(queries), np.concatenate(keys), encodings, kept


def _tag_of(sentence: CorpusSentence, start: int, end: int, special: bool) -> str:
    if special or not sentence.tags:
        return ""
    for (a, b), tag in zip(sentence.spans, sentence.tags):
        if a <= start < b or (start == end and a <= start <= b):
            return tag
    return ""


def qk_map(model: LoadedModel, sentences: Sequence[CorpusSentence], layer: int, head: int, **bounds) -> QKMap:
    """The joint 2-D map of head (layer, head)'s queries and keys over `sentences` (module docstring);
    `bounds`: corpus_vectors' sentence_tokens, max_sentences, max_tokens, batch_size, progress."""
    queries, keys, encodings, kept = corpus_vectors(model, sentences, layer, head, **bounds)
    q, k, scale = normalise(queries, keys)
    query_points, key_points, explained = project(q, k)
    sentence_index, position, relative, tokens, tags, spans = [], [], [], [], [], []
    for i, (enc, sentence) in enumerate(zip(encodings, kept)):
        n = len(enc.ids)
        for p, ((start, end), special, token) in enumerate(zip(enc.offsets, enc.special_tokens_mask, enc.tokens)):
            sentence_index.append(i)
            position.append(p)
            relative.append(p / (n - 1) if n > 1 else 0.0)
            # a token with no characters of its own (a lone space BPE trims away) is shown decoded
            label = sentence.text[start:end] if not special and start < end else (
                token if special else model.tokenizer.decode([enc.ids[p]], skip_special_tokens=False))
            tokens.append(label)
            spans.append((0, 0) if special else (start, end))
            tags.append(_tag_of(sentence, start, end, bool(special)))
    return QKMap(query_points, key_points, np.array(sentence_index), np.array(position), np.array(relative),
                 tuple(tokens), np.array(spans, dtype=np.int64).reshape(-1, 2), tuple(tags),
                 tuple(s.text for s in kept), layer, head, scale, explained)


def builtin_corpus(name: str = "en") -> list[CorpusSentence]:
    """The sentences of a built-in probe set (attnviz/probesets: "en" or "zh"), each once, in file order."""
    texts = [item.own_text or item.sep.join(item.words) for item in builtin_items(f"builtin:{name}")]
    return [CorpusSentence(text) for text in dict.fromkeys(texts)]


def text_corpus(text: str) -> list[CorpusSentence]:
    """A text file's non-empty lines, one sentence each."""
    return [CorpusSentence(line.strip()) for line in text.splitlines() if line.strip()]


def treebank_corpus(sentences) -> list[CorpusSentence]:
    """CoNLL-U sentences (attnviz.analysis.conllu) read from their own text, each word's span and UPOS kept."""
    corpus = []
    for sentence in sentences:
        text, spans, _ = sentence_text(sentence)
        corpus.append(CorpusSentence(text, tuple(spans), tuple(sentence.upos)))
    return corpus


def data_treebanks() -> list[Path]:
    """The UD treebanks (*.conllu) in the reference-data folder's ud/
    (attnviz.analysis.reference_data); [] where there is none."""
    folder = data_path("ud")
    return sorted(folder.glob("*.conllu")) if folder.is_dir() else []
