"""Tiny tokenizers trained here, offline, on a small English corpus: byte-level BPE as GPT-2's (optionally
with Llama's BOS) and an encoder's ([CLS] ... [SEP])."""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

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
