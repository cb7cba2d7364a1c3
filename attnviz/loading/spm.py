"""Marian's tokenizer, read from its own files (source.spm, target.spm, vocab.json) with the `sentencepiece`
library, no transformers code: the same ids as HF's MarianTokenizer, plus the character span of every token,
taken from SentencePiece itself (`out_type="offset_mapping"`, code-point offsets into the text).

HF's MarianTokenizer (transformers/models/marian/tokenization_marian.py): a leading `>>lang<<` code is cut off
and kept as one token; the rest is split into SentencePiece pieces (the source model for source text, the
target model for `text_target`), each piece mapped through vocab.json (unknown pieces -> <unk>), and </s> is
appended. Not reproduced: its optional Moses punctuation normaliser, which it applies only where the
`sacremoses` package is installed (not a dependency here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SPIECE_UNDERLINE = "\u2581"


@dataclass
class SpmEncoding:
    ids: list[int]
    tokens: list[str]  # display labels: the token's own text from the input, or the piece / special string
    offsets: list[tuple[int, int]]  # code-point span in the text; (0, 0) for specials and bare "▁"
    special: list[bool]
    truncated: bool = False
    text: str = ""


class MarianSentencePiece:
    def __init__(self, source_model: bytes, target_model: bytes, vocab: dict[str, int],
                 target_vocab: dict[str, int] | None = None, eos: str = "</s>", unk: str = "<unk>",
                 pad: str = "<pad>", max_length: int | None = 512) -> None:
        import sentencepiece

        if unk not in vocab:
            raise ValueError("Marian vocab.json has no <unk> token")
        self.source_spm = sentencepiece.SentencePieceProcessor(model_proto=source_model)
        self.target_spm = sentencepiece.SentencePieceProcessor(model_proto=target_model)
        self.vocab = vocab
        self.target_vocab = target_vocab or vocab
        self.pieces = {i: p for p, i in self.target_vocab.items()}
        self.eos, self.unk, self.pad = eos, unk, pad
        self.specials = {eos, unk, pad}
        self.max_length = max_length
        # Multilingual-target models (opus-mt-en-zh) pick the output language with a leading >>code<< token.
        self.language_codes = sorted(k for k in vocab if k.startswith(">>") and k.endswith("<<")) if (
            target_vocab is None) else []

    @classmethod
    def from_folder(cls, path: str | Path) -> MarianSentencePiece:
        path = Path(path)
        settings = _json(path / "tokenizer_config.json") if (path / "tokenizer_config.json").is_file() else {}
        target_vocab = None
        if settings.get("separate_vocabs"):
            target_vocab = _json(path / (settings.get("target_vocab_file") or "target_vocab.json"))
        limit = settings.get("model_max_length")
        return cls(
            (path / "source.spm").read_bytes(), (path / "target.spm").read_bytes(), _json(path / "vocab.json"),
            target_vocab, str(settings.get("eos_token") or "</s>"), str(settings.get("unk_token") or "<unk>"),
            str(settings.get("pad_token") or "<pad>"),
            limit if isinstance(limit, int) and limit < 1_000_000 else None,
        )

    def token_id(self, token: str, target: bool = False) -> int:
        vocab = self.target_vocab if target else self.vocab
        return vocab.get(token, vocab[self.unk])

    @property
    def eos_id(self) -> int:
        return self.vocab[self.eos]

    def encode(self, text: str, target: bool = False, max_tokens: int | None = None,
               language_code: str | None = None) -> SpmEncoding:
        """`tokenizer(text)` (or `tokenizer(text_target=text)` with target=True): pieces + </s>, truncated
        to `max_tokens` with </s> kept last, as HF's truncation does. `language_code` (">>cmn_Hans<<") is put
        in front as a special token unless the text already starts with a code."""
        ids, tokens, offsets, special = [], [], [], []
        start = 0
        if text.startswith(">>") and (end := text.find("<<")) != -1:  # HF's remove_language_code
            code = text[: end + 2]
            ids.append(self.token_id(code, target))
            tokens.append(code)
            offsets.append((0, end + 2))
            special.append(False)
            start = end + 2
        elif language_code:
            if language_code not in self.language_codes:
                raise ValueError(f"{language_code!r} is not a target-language token of this model")
            ids.append(self.token_id(language_code, target))
            tokens.append(language_code)
            offsets.append((0, 0))
            special.append(True)
        rest = text[start:]
        processor = self.target_spm if target else self.source_spm
        mapping = processor.encode(rest, out_type="offset_mapping")
        for piece, (s, e) in zip(mapping["pieces"], mapping["offsets"]):
            s, e = start + s, start + e
            while s < e and text[s].isspace():  # "▁ca" covers " ca": the token's own text starts after it
                s += 1
            ids.append(self.token_id(piece, target))
            tokens.append(text[s:e] if s < e else piece)
            offsets.append((s, e) if s < e else (0, 0))
            special.append(False)
        truncated = max_tokens is not None and len(ids) + 1 > max_tokens
        if truncated:
            keep = max(max_tokens - 1, 0)
            ids, tokens, offsets, special = ids[:keep], tokens[:keep], offsets[:keep], special[:keep]
        ids.append(self.token_id(self.eos, target))
        tokens.append(self.eos)
        offsets.append((0, 0))
        special.append(True)
        return SpmEncoding(ids, tokens, offsets, special, truncated, text)

    def decode(self, ids: list[int]) -> SpmEncoding:
        """Target ids (a generated translation, without the start token) -> its text and each id's span in it.

        The text is HF's `decode(ids, skip_special_tokens=True)`: the pieces joined with "▁" read as a space,
        then stripped. HF runs them through a SentencePiece model's decode_pieces first, which leaves pieces
        it does not know as they are (their "▁" then replaced), so for Marian's vocabularies joining the
        pieces is the same text, and it gives each piece's span by construction. Specials (</s>, <unk>,
        <pad>) stay tokens of their own with an empty span, as HF drops them from the text."""
        pieces = [self.pieces.get(i, self.unk) for i in ids]
        surfaces = ["" if p in self.specials else p.replace(SPIECE_UNDERLINE, " ") for p in pieces]
        joined = "".join(surfaces)
        lead = len(joined) - len(joined.lstrip())
        text = joined.strip()
        tokens, offsets, special, position = [], [], [], -lead
        for piece, surface in zip(pieces, surfaces):
            s, e = max(position, 0), min(position + len(surface), len(text))
            position += len(surface)
            if piece in self.specials:
                tokens.append(piece)
                offsets.append((0, 0))
                special.append(True)
                continue
            while s < e and text[s].isspace():
                s += 1
            tokens.append(text[s:e] if s < e else piece)
            offsets.append((s, e) if s < e else (0, 0))
            special.append(False)
        return SpmEncoding(list(ids), tokens, offsets, special, False, text)

    def id_to_token(self, token_id: int) -> str | None:
        return self.pieces.get(token_id)


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
