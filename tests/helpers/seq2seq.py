"""Tiny random T5 and BART models (HF eager) with their tiny fast tokenizers, built here offline, and
our `EncoderDecoder` built from them."""

from __future__ import annotations

import math

import torch

from attnviz.loading import build_module
from attnviz.transformer.seq2seq import EncoderDecoder

VOCAB = 61
T5_PAD, T5_EOS = 0, 1
BART_BOS, BART_PAD, BART_EOS = 0, 1, 2


def _widen(model, std: float):
    with torch.no_grad():  # wider than the init, so attention is far from uniform and every tensor counts
        for p in model.parameters():
            p.normal_(0, std) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.1)
    model.set_attn_implementation("eager")  # every stack's config, not only the top one
    return model.eval()


def hf_t5(gated: bool = True, seed: int = 0, vocab: int = VOCAB, **overrides):
    """gated: T5 v1.1 / Flan (gated-gelu, its own head, no rescale); else T5 1.0 (relu, tied head * d^-0.5)."""
    from transformers import T5Config, T5ForConditionalGeneration

    settings = dict(vocab_size=vocab, d_model=32, d_kv=6, num_heads=4, d_ff=40, num_layers=2,
                    num_decoder_layers=3, relative_attention_num_buckets=8, relative_attention_max_distance=10,
                    feed_forward_proj="gated-gelu" if gated else "relu", tie_word_embeddings=not gated,
                    pad_token_id=T5_PAD, eos_token_id=T5_EOS, decoder_start_token_id=T5_PAD)
    settings.update(overrides)
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(T5Config(**settings))
    if gated:  # transformers 5 ties every T5 head at init; v1.1 checkpoints ship their own
        model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.lm_head.weight))
    return _widen(model, 0.25)


def hf_bart(seed: int = 0, vocab: int = VOCAB, **overrides):
    from transformers import BartConfig, BartForConditionalGeneration

    settings = dict(vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=40, decoder_ffn_dim=40, max_position_embeddings=40,
                    bos_token_id=BART_BOS, pad_token_id=BART_PAD, eos_token_id=BART_EOS,
                    decoder_start_token_id=BART_EOS, forced_eos_token_id=BART_EOS, forced_bos_token_id=BART_BOS,
                    scale_embedding=False, activation_function="gelu")
    settings.update(overrides)
    torch.manual_seed(seed)
    model = BartForConditionalGeneration(BartConfig(**settings))
    model = _widen(model, 0.3)
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.5)  # HF's zeros: make it count
    return model


def ours_from(hf) -> EncoderDecoder:
    return build_module(hf.config.to_dict(), dict(hf.state_dict())).eval()


EN = ["translate English to German: The keys to the cabinet are on the table.",
      "translate English to German: A dog ran into the garden yesterday.",
      "Der Schlüssel zum Schrank liegt auf dem Tisch.", "Ein Hund lief gestern in den Garten.",
      "Zebras quickly vexed Jim's wizard, in 1999!", "summarize: She said that he would come back soon."]


def t5_tokenizer():
    """A tiny SentencePiece (Unigram) tokenizer as T5's: Metaspace pieces, </s> appended. Its vocabulary is
    written out, not trained: the Unigram trainer gave another vocabulary in each process (so other ids and
    a parity margin that moved from run to run). Words of up to five letters are one piece, longer ones two
    (their first three letters after the space mark, then the rest), every character of EN a fallback."""
    from collections import Counter

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import T5TokenizerFast

    counts = Counter()
    for text in EN:
        for word in text.split():
            counts.update(["\u2581" + word] if len(word) <= 5 else ["\u2581" + word[:3], word[3:]])
    characters = sorted({c for text in EN for c in text if not c.isspace()} | {"\u2581"})
    total = sum(counts.values())
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(piece, math.log(n / total)) for piece, n in sorted(counts.items())]
    vocab += [(c, -20.0) for c in characters if c not in counts]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", 1)])
    return T5TokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>", extra_ids=0)


def bart_tokenizer():
    """A tiny byte-level BPE as BART's (GPT-2's bytes, <s> ... </s> around each text)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import BartTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(EN * 3, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    return BartTokenizerFast(tokenizer_object=tok)
