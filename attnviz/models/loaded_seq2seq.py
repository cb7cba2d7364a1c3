"""A loaded translation model: our encoder-decoder (attnviz.transformer.seq2seq) plus its tokenizer (Marian's
SentencePiece files, or T5's and BART's fast tokenizers: attnviz.loading.fast_seq2seq).

`run(source_text, target_text=None)` gives a `Seq2SeqTrace`: the source side in the usual fields (so every existing
view, the Head Finder and the probe work on it) and the decoder and cross attentions beside them. The
decoder's inputs are Hugging Face's: the target encoded as labels (`tokenizer(text_target=...)`: target
pieces + </s>) shifted right behind decoder_start_token_id. Without a target the model first translates
greedily (bounded by `max_new_tokens`) and the trace is of its own translation.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.models.loaded_model import ModelInfo
from attnviz.trace import AttentionTrace, Seq2SeqTrace, align_tokens_to_words, split_words
from attnviz.transformer.record import Recorder
from attnviz.transformer.seq2seq import EncoderDecoder

MAX_NEW_TOKENS = 128


class LoadedSeq2Seq:
    def __init__(self, module: EncoderDecoder, tokenizer, info: ModelInfo, untrained: bool = False) -> None:
        self.module = module
        self.tokenizer = tokenizer  # loading.spm.MarianSentencePiece or loading.fast_seq2seq.FastSeq2SeqTokenizer
        self.info = info
        self.untrained = untrained

    @property
    def config(self):
        return self.module.config

    @property
    def language_codes(self) -> list[str]:
        """Target-language tokens (">>cmn_Hans<<") a multilingual-target model needs in front of the source."""
        return self.tokenizer.language_codes

    def __repr__(self) -> str:
        c = self.config
        return (f"LoadedSeq2Seq({self.info.name!r}, {c.encoder_layers}+{c.decoder_layers} layers x {c.n_heads} "
                f"heads, {self.info.device})")

    def encode(self, text: str, language_code: str | None = None, max_tokens: int | None = None):
        limit = self.info.max_tokens if max_tokens is None else min(max_tokens, self.info.max_tokens)
        return self.tokenizer.encode(text, max_tokens=limit, language_code=language_code)

    @torch.inference_mode()
    def translate_ids(self, source_ids: list[int], max_new_tokens: int = MAX_NEW_TOKENS) -> list[int]:
        """Greedy decoding with the KV cache: the generated ids after the start token (ending in </s>
        unless cut off). At most max_new_tokens, and never beyond the decoder's positions."""
        limit = max(1, min(max_new_tokens, self.config.max_positions - 1))
        ids = torch.tensor([source_ids], device=self.info.device)
        out = self.module.greedy(ids, limit)
        return out[0, 1:].tolist()

    def translate(self, text: str, language_code: str | None = None, max_new_tokens: int = MAX_NEW_TOKENS) -> str:
        enc = self.encode(self._check(text), language_code)
        return self.tokenizer.decode(self.translate_ids(enc.ids, max_new_tokens)).text

    def run(self, source_text: str, target_text: str | None = None, language_code: str | None = None,
            max_new_tokens: int = MAX_NEW_TOKENS, max_tokens: int | None = None) -> Seq2SeqTrace:
        """One teacher-forced pass over the source and the target (the greedy translation when no target
        is given). `max_tokens` caps source and target tokens below the model's own limit (the app's bound)."""
        limit = self.info.max_tokens if max_tokens is None else min(max_tokens, self.info.max_tokens)
        source = self.encode(self._check(source_text), language_code, limit)
        if target_text is None or not target_text.strip():
            target = self.tokenizer.decode(self.translate_ids(source.ids, max_new_tokens))
            labels = list(target.ids)
            if not labels or labels[-1] != self.config.eos_token_id:
                labels.append(self.config.eos_token_id)  # cut off by the limit: </s> would have come later
            generated = True
        else:
            target = self.tokenizer.encode(target_text, target=True, max_tokens=limit)
            labels, generated = list(target.ids), False
        # decoder_input_ids = shift_tokens_right(labels): the start token, then labels without the last
        # (the final </s> is predicted, never read). Its display tokens are the target's, shifted alike.
        n = len(labels)
        decoder_ids = [self.config.decoder_start_token_id, *labels[: n - 1]]
        start = self.config.decoder_start_token_id
        start_label = self.tokenizer.id_to_token(start) or str(start)
        tokens = [start_label, *target.tokens[: n - 1]]
        offsets = [(0, 0), *target.offsets[: n - 1]]
        special = [True, *target.special[: n - 1]]
        # One label per decoder position: an </s> appended above has no span in the text.
        label_offsets = [*target.offsets[:n], *[(0, 0)] * (n - len(target.offsets[:n]))]
        label_special = [*target.special[:n], *[True] * (n - len(target.special[:n]))]
        out = self._forward(source.ids, decoder_ids)
        trace = self._source_trace(source, out.encoder_attentions[:, 0], out.encoder_hidden[0])
        spans = split_words(target.text)
        seq = [None if s else 0 for s in special]
        return Seq2SeqTrace(
            **{f: getattr(trace, f) for f in trace.__dataclass_fields__},
            decoder_attentions=out.decoder_attentions[:, 0].float().cpu().numpy(),
            cross_attentions=out.cross_attentions[:, 0].float().cpu().numpy(),
            target_text=target.text,
            target_tokens=tokens,
            target_offsets=offsets,
            target_input_ids=decoder_ids,
            labels=labels,
            target_special_mask=special,
            target_words=[target.text[s:e] for s, e in spans],
            target_word_spans=spans,
            target_word_of_token=align_tokens_to_words(offsets, seq, spans),
            label_word_of_token=align_tokens_to_words(label_offsets, [None if x else 0 for x in label_special], spans),
            target_truncated=target.truncated or (generated and target.ids[-1:] != [self.config.eos_token_id]),
            generated=generated,
        )

    def run_batch(self, texts: list[str], text_pairs: list[str] | None = None) -> list[AttentionTrace]:
        """The source side only (the encoder), for the probe and the Head Finder: one pass per text."""
        if text_pairs is not None:
            raise ValueError("text_pair is for encoder models (BERT family); this is a translation model")
        traces = []
        for text in texts:
            enc = self.encode(self._check(text))
            ids = torch.tensor([enc.ids], device=self.info.device)
            with torch.inference_mode():
                record = Recorder("attentions")
                hidden = self.module.encode(ids, record=record)
            traces.append(self._source_trace(enc, record.stacked("attentions")[:, 0], hidden[0]))
        return traces

    @torch.inference_mode()
    def run_ids(self, ids: list[list[int]]) -> np.ndarray:
        """Encoder attentions float32 [B, L, H, T, T] for source ids fed as given (the head detectors)."""
        lengths = {len(seq) for seq in ids}
        if not ids or lengths == {0} or len(lengths) > 1:
            raise ValueError("run_ids takes one or more sequences of one non-zero length")
        tensor = torch.tensor(ids, dtype=torch.long)
        if lengths.pop() > self.info.max_tokens:
            raise ValueError(f"more tokens than this model's limit of {self.info.max_tokens}")
        if bool(((tensor < 0) | (tensor >= self.config.vocab_size)).any()):
            raise ValueError(f"token ids must lie in 0..{self.config.vocab_size - 1}")
        record = Recorder("attentions")
        self.module.encode(tensor.to(self.info.device), record=record)
        return record.stacked("attentions").transpose(0, 1).float().cpu().numpy()

    def score_setup(self, layer: int, head: int, kind: str) -> dict:
        """How `kind`'s ("encoder", "decoder" or "cross") layer `layer`, head `head` turns q.k into a score,
        as analysis.query_key's keyword arguments: its scale (T5: 1, unscaled) and causality."""
        blocks = self.module.encoder_blocks if kind == "encoder" else self.module.decoder_blocks
        attn = blocks[layer].self_attn if kind != "cross" else blocks[layer].cross_attn
        return {"causal": kind == "decoder", "scale": attn.scale}

    @torch.inference_mode()
    def score_terms(self, head: int, kind: str, query: int, n_queries: int, n_keys: int) -> dict:
        """name -> [S] float32: the terms query `query`'s score adds to q.k in `kind`'s self-attention, for
        analysis.query_key's `terms`: T5's relative-position bias of head `head` ("bucket_bias", the same in
        every layer of a stack); {} for cross-attention and for models without one."""
        if kind == "cross":
            return {}
        past = n_keys - n_queries  # a decoder query's real position behind cached keys
        bias = self.module.position_bias(kind, n_queries, n_keys, past)
        return {} if bias is None else {"bucket_bias": bias[0, head, query].float().cpu().numpy()}

    @torch.inference_mode()
    def _forward(self, source_ids: list[int], decoder_ids: list[int]):
        device = self.info.device
        return self.module(torch.tensor([source_ids], device=device), torch.tensor([decoder_ids], device=device),
                           with_logits=False)

    def _source_trace(self, enc, attentions, hidden) -> AttentionTrace:
        spans = split_words(enc.text)
        seq = [None if s else 0 for s in enc.special]
        return AttentionTrace(
            tokens=list(enc.tokens), offsets=list(enc.offsets), sequence_ids=seq, input_ids=list(enc.ids),
            attentions=attentions.float().cpu().numpy(), kv_group=self.module.kv_group,
            words=[enc.text[s:e] for s, e in spans], word_of_token=align_tokens_to_words(enc.offsets, seq, spans),
            truncated=enc.truncated, texts=(enc.text,), word_spans=spans, word_sequence=[0] * len(spans),
            special_mask=list(enc.special),
            metadata={"model": self.info.name, "causal": False, "untrained": self.untrained},
            hidden=hidden.float().cpu().numpy(),
        )

    @staticmethod
    def _check(text) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the text is empty: type a sentence")
        return text


def seq2seq_info(module: EncoderDecoder, name: str, path: str, model_type: str, max_tokens: int) -> ModelInfo:
    """ModelInfo of the source side (n_layers = encoder layers), as the existing views read it."""
    c, weight = module.config, next(module.parameters())
    return ModelInfo(
        name=name, path=path, model_type=model_type, n_layers=c.encoder_layers, n_heads=c.n_heads,
        n_kv_heads=c.n_heads, attention_kind="MHA", n_parameters=sum(p.numel() for p in module.parameters()),
        device=weight.device.type, dtype=str(weight.dtype).removeprefix("torch."),
        max_tokens=min(max_tokens, c.max_positions), causal=False,
    )


__all__ = ["LoadedSeq2Seq", "seq2seq_info", "MAX_NEW_TOKENS"]
