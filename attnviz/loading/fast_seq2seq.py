"""The tokenizer of T5 and BART translation/summarisation checkpoints, from their Rust backend
(`tokenizers.Tokenizer`, HF's fast tokenizer: SentencePiece Unigram for T5, byte-level BPE for BART), with
the interface LoadedSeq2Seq reads (Marian's `MarianSentencePiece`: encode, decode, language_codes).

Ids and offsets are the backend's, so they equal HF's `tokenizer(text, return_offsets_mapping=True)`;
special tokens (T5's </s>, BART's <s> and </s>) come from the backend's post-processor, and truncation
keeps them as HF's does. A target is encoded the same way as a source (`text_target` in both families).
"""

from __future__ import annotations

import threading

from attnviz.loading.spm import SpmEncoding


class FastSeq2SeqTokenizer:
    language_codes: list[str] = []  # T5 names the task in the text ("translate English to German: ")

    def __init__(self, backend, max_length: int | None = None) -> None:
        self.backend = backend
        self.max_length = max_length
        self.vocab = backend.get_vocab(with_added_tokens=True)
        self._truncating: dict[int, object] = {}  # max_tokens -> a copy of the backend that truncates there
        self._lock = threading.Lock()

    def encode(self, text: str, target: bool = False, max_tokens: int | None = None,
               language_code: str | None = None) -> SpmEncoding:
        if language_code:
            raise ValueError("this model takes no target-language token")
        enc = self.backend.encode(text)
        truncated = max_tokens is not None and len(enc.ids) > max_tokens
        if truncated:  # the backend's own truncation keeps the specials, as HF's does
            enc = self._truncator(max_tokens).encode(text)
        special = [bool(s) for s in enc.special_tokens_mask]
        offsets = [(0, 0) if sp else (int(s), int(e)) for sp, (s, e) in zip(special, enc.offsets)]
        tokens = [tok if sp or s == e else text[s:e].strip() or tok
                  for tok, sp, (s, e) in zip(enc.tokens, special, offsets)]
        return SpmEncoding(list(enc.ids), tokens, offsets, special, truncated, text)

    def decode(self, ids: list[int]) -> SpmEncoding:
        """Generated ids -> HF's decode(ids, skip_special_tokens=True) and each id's span in that text, read
        from the decodings of growing prefixes (a byte-level token that ends inside a character gets the
        span the character completes in)."""
        ids = list(ids)
        text = self.backend.decode(ids, skip_special_tokens=True)
        specials = {i for i in ids if self._is_special(i)}
        tokens, offsets, special, previous = [], [], [], 0
        for n, token_id in enumerate(ids):
            if token_id in specials:
                tokens.append(self.backend.id_to_token(token_id) or str(token_id))
                offsets.append((0, 0))
                special.append(True)
                continue
            prefix = self.backend.decode(ids[: n + 1], skip_special_tokens=True)
            end = len(prefix) if text.startswith(prefix) else previous
            s, e = previous, max(end, previous)
            previous = e
            while s < e and text[s].isspace():
                s += 1
            tokens.append(text[s:e] if s < e else self.backend.id_to_token(token_id) or str(token_id))
            offsets.append((s, e) if s < e else (0, 0))
            special.append(False)
        return SpmEncoding(ids, tokens, offsets, special, False, text)

    def _truncator(self, max_tokens: int):
        """A copy of the backend truncating at max_tokens. Truncating a special-free encoding and post-processing
        it would trim byte-level offsets twice (RobertaProcessing's trim_offsets), so the backend does it."""
        with self._lock:
            if max_tokens not in self._truncating:
                copy = type(self.backend).from_str(self.backend.to_str())
                copy.enable_truncation(max(max_tokens, self.backend.num_special_tokens_to_add(False)))
                self._truncating[max_tokens] = copy
            return self._truncating[max_tokens]

    def id_to_token(self, token_id: int) -> str | None:
        return self.backend.id_to_token(token_id)

    def _is_special(self, token_id: int) -> bool:
        return self.backend.decode([token_id], skip_special_tokens=True) == "" and self.backend.decode(
            [token_id], skip_special_tokens=False) != ""
