"""A loaded model: our transformer plus its tokenizer. `run(text)` turns text into an AttentionTrace.

Nothing here calls transformers: tokenizing uses the tokenizer's Rust backend (`tokenizers`), and
the forward pass is ours.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import models

from attnviz.memory import ceiling
from attnviz.memory.ceiling import kept
from attnviz.models.reduced_pass import reduced_trace
from attnviz.trace import AttentionTrace, ReducedTrace, align_tokens_to_words, split_words
from attnviz.transformer.deberta import TERMS
from attnviz.transformer.model import ForwardOutput, Transformer
from attnviz.transformer.record import Recorder
from attnviz.transformer.reducer import CHUNK_ROWS

TOP_K = 5
FULL_MAPS_LIMIT = 2 * 2**30


def _byte_of_char() -> dict[str, int]:
    """GPT-2's bytes_to_unicode, reversed: byte-level BPE writes each byte as a printable character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    chars |= {b: chr(256 + n) for n, b in enumerate(shifted)}
    return {c: b for b, c in chars.items()}


_BYTE_OF_CHAR = _byte_of_char()
_FALLBACK_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a sentencepiece byte-fallback token, e.g. <0xE4>
_SPACE_MARK = "\u2581"  # sentencepiece's word-boundary mark, ▁, stands for a space


@dataclass(frozen=True)
class ModelInfo:
    name: str  # the source as the user gave it
    path: str  # where the weights were read from
    model_type: str  # HF model_type, e.g. "bert", "llama"
    n_layers: int
    n_heads: int
    n_kv_heads: int
    attention_kind: str  # MHA / MQA / GQA
    n_parameters: int
    device: str
    dtype: str
    max_tokens: int
    causal: bool
    mlm_head: bool = False  # an encoder with a masked-LM head (mask filling, attnviz.interventions.ablation)

    @classmethod
    def describe(cls, module: Transformer, name: str, path: str, model_type: str, max_tokens: int) -> ModelInfo:
        """The facts of a built module (device and dtype read from its parameters)."""
        config, weight = module.config, next(module.parameters())
        return cls(
            name=name, path=path, model_type=model_type, n_layers=config.n_layers, n_heads=config.n_heads,
            n_kv_heads=config.kv_heads, attention_kind=config.attention_kind,
            n_parameters=sum(p.numel() for p in module.parameters()), device=weight.device.type,
            dtype=str(weight.dtype).removeprefix("torch."), max_tokens=max_tokens, causal=config.causal,
            mlm_head=getattr(module, "mlm_head", None) is not None,
        )


class _OneLayer(Recorder):
    """A recorder that keeps its names for one layer only; the other layers report to a record that
    wants nothing, so they compute nothing extra (the queries of one layer, not of thirty)."""

    _NOTHING = Recorder()

    def __init__(self, layer: int, *names: str) -> None:
        super().__init__(*names)
        self.layer = layer

    def at(self, layer: int):
        return super().at(layer) if layer == self.layer else self._NOTHING.at(layer)


class LoadedModel:
    def __init__(self, module: Transformer, tokenizer, info: ModelInfo, special_tokens: dict,
                 context_tokens: int | None = None) -> None:
        self.module = module
        self.tokenizer = tokenizer  # tokenizers.Tokenizer, truncation set to info.max_tokens
        self.info = info
        # The longest input the model itself takes (its positions, its tokenizer's limit): `max_tokens` of an
        # encode or a run_reduced may go up to it, past info.max_tokens (the default cut).
        self.context_tokens = max(info.max_tokens, context_tokens or info.max_tokens)
        self.tokenizer.enable_truncation(max_length=info.max_tokens)
        # Held around every encoding: one of `max_tokens` sets the tokenizer's cut for its own call, and no other
        # encoding may run meanwhile. (A copy of the tokenizer per cut would cost its whole size again: 372 MB of
        # RSS and 2 s for Gemma 3's 262k-token vocabulary.)
        self._encoding = threading.Lock()
        pad = special_tokens.get("pad_token") or special_tokens.get("eos_token")
        self.pad_id = (tokenizer.token_to_id(pad) if pad else None) or 0

    @property
    def config(self):
        return self.module.config

    def __repr__(self) -> str:
        i = self.info
        return f"LoadedModel({i.name!r}, {i.n_layers} layers x {i.n_heads} heads, {i.device}, {i.dtype})"

    def run(self, text: str, text_pair: str | None = None) -> AttentionTrace:
        """One forward pass of our model on `text` (and `text_pair`, encoders only): every head's full
        float32 map. A text whose maps would pass `full_maps_limit` bytes (per text, in `run_batch` too)
        raises ValueError: `run_reduced` gives its views in bounded memory."""
        return self.run_batch([text], None if text_pair is None else [text_pair])[0]

    # The most bytes of float32 maps `run` builds (2 GiB: SmolLM2's 30 x 9 heads at 1,024 tokens take 1.1 GB,
    # at 4,096 tokens 18 GB); an instance may set its own.
    full_maps_limit = FULL_MAPS_LIMIT

    def full_maps_bytes(self, n_tokens: int, n_texts: int = 1) -> int:
        """Bytes of the float32 [L, H, T, T] maps of `n_texts` texts of `n_tokens` tokens."""
        return 4 * n_texts * self.info.n_layers * self.info.n_heads * n_tokens * n_tokens

    def run_reduced(self, text: str, text_pair: str | None = None, tile: int = 64, *,
                    chunk_rows: int = CHUNK_ROWS, keep_dtype=torch.float16, progress=None,
                    max_tokens: int | None = None) -> ReducedTrace:
        """The views of a long text without its full maps (docs/performance.md, "Long contexts"): pooled
        mosaic tiles of at most `tile` cells a side (the token view, with special tokens hidden, the word
        view), the head profile statistics, and the queries and keys in `keep_dtype` from which
        `ReducedTrace.head_window` recomputes any head's map over a window. The forward pass runs `chunk_rows`
        query rows at a time, so its transient is [H, chunk_rows, T], not [H, T, T]; `progress(layer,
        n_layers)` is called as each layer finishes; `max_tokens` cuts the text there instead of at
        info.max_tokens (up to the model's own context, `context_tokens`). Self-attention models only (not the
        translation models)."""
        if text_pair is not None and self.config.causal:
            raise ValueError("text_pair is for encoder models (BERT family); this model is a decoder")
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the text is empty: type a sentence")
        enc = self.encode(text, text_pair, max_tokens)
        if len(enc.ids) == 0:
            raise ValueError("the text produced no tokens")
        fields = self._token_fields(enc, text, text_pair)
        return reduced_trace(self.module, fields, self.info.device, tile, chunk_rows, keep_dtype, progress)

    def texts_that_fit(self, texts: list[str]) -> int:
        """How many of `texts`, from the first, `run_batch` can run together in what the memory ceiling has free
        now (attnviz.memory.ceiling): per text its maps twice (the batch's, then its own copy), at the batch's
        longest text. At least 1, at most all."""
        if len(texts) <= 1:
            return len(texts)
        longest = max(len(self.encode(text).ids) for text in texts)
        return ceiling.fit(2 * self.full_maps_bytes(longest), len(texts))

    def run_batch(self, texts: list[str], text_pairs: list[str] | None = None) -> list[AttentionTrace]:
        """Several texts in one padded forward pass; each trace is sliced back to its own tokens."""
        if text_pairs is not None and self.config.causal:
            raise ValueError("text_pair is for encoder models (BERT family); this model is a decoder")
        pairs = text_pairs or [None] * len(texts)
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                raise ValueError("the text is empty: type a sentence")
        encodings = [self.encode(t, p) for t, p in zip(texts, pairs)]
        if any(len(e.ids) == 0 for e in encodings):
            raise ValueError("the text produced no tokens")
        # Per text: a batch's size is the caller's choice (score_model's batch_size), one text's length is not.
        need = self.full_maps_bytes(max(len(e.ids) for e in encodings))
        if need > self.full_maps_limit:
            raise ValueError(
                f"the full attention maps of {max(len(e.ids) for e in encodings)} tokens need {need / 1e9:.1f} GB "
                f"(float32 [{self.info.n_layers} layers, {self.info.n_heads} heads, T, T] per text), more than "
                f"run's limit of {self.full_maps_limit / 1e9:.1f} GB: use model.run_reduced(text), which gives the "
                "pooled mosaic, the head profiles and any head's map over a window in bounded memory")
        # No unembedding here: it would cost ~15 GFLOP at 256 tokens for SmolLM2, and the app needs
        # predictions at one position at a time (`next_tokens`), from the hidden state kept in the trace.
        out = self.forward_encodings(encodings, with_logits=False)
        traces = []
        for b, (enc, text, pair) in enumerate(zip(encodings, texts, pairs)):
            n = len(enc.ids)
            attentions = out.attentions[:, b, :, :n, :n]  # L, H, T, T
            if len(encodings) > 1:  # a copy, so the batch's buffer can be freed
                attentions = kept(self.full_maps_bytes(n), "a text's attention maps", attentions.clone)
            traces.append(self._trace(enc, text, pair, attentions, out.hidden[b, :n]))
        return traces

    @torch.inference_mode()
    def next_tokens(self, trace: AttentionTrace, position: int, k: int = TOP_K) -> list[tuple[str, float, int]]:
        """The k likeliest next tokens after `position` of a decoder trace, as (text, probability, id)."""
        if self.module.lm_head is None:
            raise ValueError("this model has no language-model head (encoders do not predict next tokens)")
        weight = self.module.lm_head.weight
        # A copy: the app's traces are shared read-only arrays, which torch will not wrap. The input device is
        # the model's (info.device): in a split model the weight itself may be offloaded (on "meta").
        hidden = torch.tensor(trace.hidden[position], device=self.info.device, dtype=weight.dtype)
        probs = torch.softmax(self.module.unembed(hidden).float(), dim=-1)  # V
        top = probs.topk(k)
        ids = top.indices.tolist()
        texts = self.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)
        return list(zip(texts, top.values.tolist(), ids))

    def token_bytes(self, token_id: int) -> bytes | None:
        """The bytes a token stands for, in the two vocabularies that split a character into bytes: byte-level
        BPE (GPT-2's byte-to-character map, reversed) and sentencepiece with byte fallback (Llama, Gemma:
        <0xE4> is the byte E4, any other token its text with ▁ as a space); None for a token of another
        kind of vocabulary (WordPiece, a special token's text is read as text)."""
        token = self.tokenizer.id_to_token(token_id)
        if token is None or isinstance(self.tokenizer.model, (models.WordPiece, models.WordLevel)):
            return None  # "##ing" is no byte string: WordPiece never splits a character
        if getattr(self.tokenizer.model, "byte_fallback", False):
            byte = _FALLBACK_BYTE.fullmatch(token)
            return bytes([int(byte.group(1), 16)]) if byte else token.replace(_SPACE_MARK, " ").encode("utf-8")
        if any(c not in _BYTE_OF_CHAR for c in token):
            return None
        return bytes(_BYTE_OF_CHAR[c] for c in token)

    def piece_texts(self, ids) -> list[str]:
        """Each token decoded alone for a message ("' are'"), a piece of a character as its bytes ("⟨f0 9f⟩")
        instead of U+FFFD (an emoji is four byte-level pieces, each undecodable alone)."""
        texts = self.tokenizer.decode_batch([[int(i)] for i in ids], skip_special_tokens=False)
        return [repr(text) if "\ufffd" not in text or self.token_bytes(int(i)) is None else
                "⟨" + " ".join(f"{b:02x}" for b in self.token_bytes(int(i))) + "⟩" for i, text in zip(ids, texts)]

    def encode(self, text: str, text_pair: str | None = None, max_tokens: int | None = None,
               add_special_tokens: bool = True):
        """The tokenizer's encoding (ids, offsets, specials), truncated to info.max_tokens, or to `max_tokens`
        (at most `context_tokens`) when given. Pages encode through here (or `encode_batch`), not through
        `self.tokenizer`, so that no encoding sees another call's cut."""
        cut = max_tokens is not None and max_tokens != self.info.max_tokens
        if cut and not 2 <= max_tokens <= self.context_tokens:
            raise ValueError(f"max_tokens must be between 2 and this model's {self.context_tokens} tokens, "
                             f"got {max_tokens}")
        with self._encoding:
            if cut:
                self.tokenizer.enable_truncation(max_length=max_tokens)
            try:
                return self.tokenizer.encode(text, text_pair, add_special_tokens=add_special_tokens)
            finally:
                if cut:
                    self.tokenizer.enable_truncation(max_length=self.info.max_tokens)

    def encode_batch(self, texts: list[str]) -> list:
        """`encode` of several texts at once, at info.max_tokens."""
        with self._encoding:
            return self.tokenizer.encode_batch(texts)

    @torch.inference_mode()
    def record(self, text: str, text_pair: str | None = None, names=("value_norms",),
               layer: int | None = None) -> dict[str, np.ndarray]:
        """What the views beyond raw weights need (attnviz.transformer.record names), from one more forward pass of
        `text`: e.g. value_norms [L, H, S], queries [L, H, T, D], keys [L, K, S, D] (after rotary);
        with `layer`, that layer's only ([H, S], [H, T, D], ...), the other layers recording nothing.
        float32 numpy, batch dimension dropped. `run` stays as it is: it records attentions only."""
        if layer is not None and not 0 <= layer < self.info.n_layers:
            raise ValueError(f"layer {layer} outside 0..{self.info.n_layers - 1}")
        recorder = Recorder(*names) if layer is None else _OneLayer(layer, *names)
        out = self.forward_encodings([self.encode(text, text_pair)], with_logits=False, record=recorder)
        if layer is None:
            tensors = {name: recorder.stacked(name)[:, 0] for name in names}  # L, ...
        else:
            tensors = {name: out.attentions[layer, 0] if name == "attentions" else recorder.layers[layer][name][0]
                       for name in names}
        return {name: tensor.float().cpu().numpy() for name, tensor in tensors.items()}

    def score_setup(self, layer: int, head: int) -> dict:
        """How a head turns q.k into a score (Transformer.score_setup), for the query-key view."""
        return self.module.score_setup(layer, head)

    def score_term_names(self, layer: int) -> tuple[str, ...]:
        """The named terms layer `layer`'s score is the sum of, where it has several: DeBERTa's ("c2c",
        "c2p", "p2c"), recorded as "score_terms"; () for a single q.k (plus the setup's bias)."""
        return TERMS if getattr(self.module.blocks[layer].attn, "terms", ()) else ()

    def score_terms(self, text: str, layer: int, head: int, query: int, text_pair: str | None = None) -> dict:
        """name -> [S] float32: query `query`'s score terms for head `head` of layer `layer`, from one
        recorded forward pass; they sum to the pre-softmax score (less the mask). {} where the model has
        no separate terms (score_term_names)."""
        names = self.score_term_names(layer)
        if not names:
            return {}
        terms = self.record(text, text_pair, names=("score_terms",), layer=layer)["score_terms"]  # N, H, T, S
        return {name: terms[i, head, query] for i, name in enumerate(names)}

    @torch.inference_mode()
    def forward_encodings(self, encodings, with_logits: bool = True, record: Recorder | None = None) -> ForwardOutput:
        width = max(len(e.ids) for e in encodings)
        ids = torch.full((len(encodings), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        types = torch.zeros_like(ids)
        for b, e in enumerate(encodings):  # right padding: positions stay 0..n-1 as in an unpadded run
            ids[b, : len(e.ids)] = torch.tensor(e.ids)
            mask[b, : len(e.ids)] = 1
            types[b, : len(e.ids)] = torch.tensor(e.type_ids)
        device = self.info.device
        return self.module(ids.to(device), mask.to(device), types.to(device), with_logits=with_logits, record=record)

    @torch.inference_mode()
    def run_ids(self, ids: list[list[int]]) -> np.ndarray:
        """Attentions float32 [B, L, H, T, T] for token ids fed as given: no tokenizer, no special tokens
        added, no padding (every sequence has the same length T <= info.max_tokens). Used by the head
        detectors (`attnviz.analysis.detectors`)."""
        lengths = {len(seq) for seq in ids}
        if not ids or lengths == {0}:
            raise ValueError("no token ids to run")
        if len(lengths) > 1:
            raise ValueError(f"run_ids takes sequences of one length, got lengths {sorted(lengths)}")
        width = lengths.pop()
        if width > self.info.max_tokens:
            raise ValueError(f"{width} tokens exceed this model's limit of {self.info.max_tokens}")
        tensor = torch.tensor(ids, dtype=torch.long)
        vocab = self.config.vocab_size
        if bool(((tensor < 0) | (tensor >= vocab)).any()):
            raise ValueError(f"token ids must lie in 0..{vocab - 1}")
        device = self.info.device
        mask, types = torch.ones_like(tensor), torch.zeros_like(tensor)  # as forward_encodings, unpadded
        out = self.module(tensor.to(device), mask.to(device), types.to(device), with_logits=False)
        return out.attentions.transpose(0, 1).float().cpu().numpy()  # L, B, H, T, T -> B, L, H, T, T

    def _trace(self, enc, text, pair, attentions, hidden) -> AttentionTrace:
        return AttentionTrace(**self._token_fields(enc, text, pair), attentions=attentions.float().cpu().numpy(),
                              kv_group=self.module.kv_group, hidden=hidden.float().cpu().numpy())

    def _token_fields(self, enc, text, pair) -> dict:
        """The trace's token and word fields (everything but the attention) of one encoding."""
        texts = (text,) if pair is None else (text, pair)
        sequence_ids = list(enc.sequence_ids)
        special = [bool(s) or q is None for s, q in zip(enc.special_tokens_mask, sequence_ids)]
        tokens = [
            enc.tokens[i] if special[i] or start == end else texts[sequence_ids[i]][start:end]
            for i, (start, end) in enumerate(enc.offsets)
        ]
        offsets = [(0, 0) if special[i] else tuple(o) for i, o in enumerate(enc.offsets)]
        sequence_ids = [None if special[i] else q for i, q in enumerate(sequence_ids)]
        word_spans, word_sequence, words = [], [], []
        for seq, t in enumerate(texts):
            for start, end in split_words(t):
                word_spans.append((start, end))
                word_sequence.append(seq)
                words.append(t[start:end])
        return dict(
            tokens=tokens,
            offsets=offsets,
            sequence_ids=sequence_ids,
            input_ids=list(enc.ids),
            words=words,
            word_of_token=align_tokens_to_words(offsets, sequence_ids, word_spans, word_sequence),
            truncated=bool(enc.overflowing),
            texts=texts,
            word_spans=word_spans,
            word_sequence=word_sequence,
            special_mask=special,
            metadata={"model": self.info.name, "causal": self.config.causal,
                      "layer_kinds": [self.config.layer_kind(layer) for layer in range(self.config.n_layers)]},
        )
