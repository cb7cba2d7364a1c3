"""Tiny tokenizers trained here, offline, on a small English corpus: byte-level BPE as GPT-2's (optionally
with Llama's BOS), an encoder's ([CLS] ... [SEP]) and sentencepiece-style BPE with byte fallback (Llama's
and Gemma's)."""

from __future__ import annotations

import json

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

CORPUS = [
    "The cat sat on the mat. The keys to the cabinet are on the table.",
    "A dog ran in the park, and the cat watched the dog from the wall.",
    "The cabinet is old; the keys are new. Cats like mats and dogs like parks.",
] * 20


def bpe_tokenizer(bos: bool, corpus=CORPUS, vocab_size: int = 300) -> Tokenizer:
    """Byte-level BPE as GPT-2's (offsets trimmed as GPT-2's post-processor does), optionally with a
    BOS token added in front of every text as Llama's tokenizers do."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(corpus, trainer)
    steps = [processors.ByteLevel(trim_offsets=True)]
    if bos:
        steps.append(processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)]))
    tokenizer.post_processor = processors.Sequence(steps)
    return tokenizer


def encoder_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 0), ("[SEP]", 1)]),
    ])
    return tokenizer


def sentencepiece_tokenizer(corpus=CORPUS, vocab_size: int = 200) -> Tokenizer:
    """Sentencepiece-style BPE laid out as Llama's and Gemma's tokenizer.json are: spaces written as ▁, the
    256 byte tokens <0x00>..<0xFF> in the model's own vocabulary with byte_fallback on (a character the
    vocabulary lacks becomes its UTF-8 bytes), decoded by tokenizers' Replace, ByteFallback and Fuse."""
    trained = Tokenizer(models.BPE())
    trained.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trained.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>"],
                                                            show_progress=False))
    spec = json.loads(trained.to_str())
    vocab = spec["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["decoder"] = json.loads(decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                                    decoders.Fuse()]).__getstate__())
    return Tokenizer.from_str(json.dumps(spec))
