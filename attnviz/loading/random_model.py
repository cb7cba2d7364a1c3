"""A randomly initialised model with a byte-level tokenizer: the last resort when no pretrained model
can be had (always labelled as such in the app), and the BERT-base-sized model of the speed benchmark."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.model import Transformer

SPECIALS = ["[CLS]", "[SEP]", "[PAD]"]
RANDOM_MODEL_NAME = "random BERT-base-sized model (untrained)"


def byte_tokenizer() -> Tokenizer:
    """One token per UTF-8 byte (no vocabulary to download), [CLS] ... [SEP] around the text."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: i for i, char in enumerate(alphabet)}
    vocab.update({token: len(alphabet) + i for i, token in enumerate(SPECIALS)})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIALS)
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
        ),
    ])
    return tokenizer


def random_config(n_layers: int = 12, n_heads: int = 12, d_model: int = 768) -> ModelConfig:
    return ModelConfig(
        family="bert", vocab_size=256 + len(SPECIALS), d_model=d_model, n_layers=n_layers, n_heads=n_heads,
        d_ff=4 * d_model, max_positions=512, type_vocab_size=2, embedding_norm=True,
    )


def untrained(module: torch.nn.Module) -> torch.nn.Module:
    """`module` in eval mode with its matrices drawn from N(0, 0.05): wider than BERT's and Marian's std
    0.02, so untrained heads differ visibly."""
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.05)
    return module.eval()


def random_model(config: ModelConfig | None = None, seed: int = 0, max_tokens: int = 512) -> LoadedModel:
    config = config or random_config()
    torch.manual_seed(seed)
    module = untrained(Transformer(config))
    info = ModelInfo.describe(module, RANDOM_MODEL_NAME, "(random)", "bert", min(max_tokens, config.max_positions))
    return LoadedModel(module, byte_tokenizer(), info, {"pad_token": "[PAD]"})
