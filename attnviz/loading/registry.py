"""Which converter handles which HF `model_type`: one pure function pair per family."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from attnviz.loading.converters import (
    albert_config,
    bart_config,
    bert_config,
    bloom_config,
    convert_albert,
    convert_bart,
    convert_bert,
    convert_bloom,
    convert_deberta_v2,
    convert_deepseek,
    convert_distilbert,
    convert_electra,
    convert_gemma,
    convert_gpt2,
    convert_gpt_neo,
    convert_gpt_neox,
    convert_gpt_oss,
    convert_llama,
    convert_marian,
    convert_mixtral,
    convert_modernbert,
    convert_olmo2,
    convert_opt,
    convert_phi,
    convert_phi3,
    convert_qwen3,
    convert_smollm3,
    convert_t5,
    deberta_v2_config,
    deepseek_config,
    distilbert_config,
    electra_config,
    gemma_config,
    gpt2_config,
    gpt_neo_config,
    gpt_neox_config,
    gpt_oss_config,
    llama_config,
    marian_config,
    mixtral_config,
    modernbert_config,
    olmo2_config,
    opt_config,
    phi3_config,
    phi_config,
    qwen3_config,
    smollm3_config,
    t5_config,
)
from attnviz.loading.families import supported_list
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.model import Transformer
from attnviz.transformer.seq2seq import EncoderDecoder


class Converter(NamedTuple):
    config: Callable[[dict], ModelConfig]  # HF config dict -> ours
    weights: Callable  # (HF config dict, checkpoint dict, our model) -> our state dict
    module: Callable = Transformer  # our config -> our module (EncoderDecoder for translation models)


CONVERTERS: dict[str, Converter] = {
    "bert": Converter(bert_config, convert_bert),
    "roberta": Converter(bert_config, convert_bert),
    "xlm-roberta": Converter(bert_config, convert_bert),
    "distilbert": Converter(distilbert_config, convert_distilbert),
    "modernbert": Converter(modernbert_config, convert_modernbert),
    "deberta": Converter(deberta_v2_config, convert_deberta_v2),
    "deberta-v2": Converter(deberta_v2_config, convert_deberta_v2),
    "electra": Converter(electra_config, convert_electra),
    "albert": Converter(albert_config, convert_albert),
    "gpt2": Converter(gpt2_config, convert_gpt2),
    "llama": Converter(llama_config, convert_llama),
    "mistral": Converter(llama_config, convert_llama),
    "qwen2": Converter(llama_config, convert_llama),
    "gemma": Converter(gemma_config, convert_gemma),
    "gemma2": Converter(gemma_config, convert_gemma),
    "gemma3_text": Converter(gemma_config, convert_gemma),
    "gemma3": Converter(gemma_config, convert_gemma),  # the multimodal wrapper, read as its text part
    "qwen3": Converter(qwen3_config, convert_qwen3),
    "olmo2": Converter(olmo2_config, convert_olmo2),
    "smollm3": Converter(smollm3_config, convert_smollm3),
    "phi3": Converter(phi3_config, convert_phi3),
    "mixtral": Converter(mixtral_config, convert_mixtral),
    "gpt_oss": Converter(gpt_oss_config, convert_gpt_oss),
    "deepseek_v2": Converter(deepseek_config, convert_deepseek),
    "deepseek_v3": Converter(deepseek_config, convert_deepseek),
    "marian": Converter(marian_config, convert_marian, EncoderDecoder),
    "t5": Converter(t5_config, convert_t5, EncoderDecoder),
    "bart": Converter(bart_config, convert_bart, EncoderDecoder),
    "gpt_neox": Converter(gpt_neox_config, convert_gpt_neox),
    "gpt_neo": Converter(gpt_neo_config, convert_gpt_neo),
    "opt": Converter(opt_config, convert_opt),
    "bloom": Converter(bloom_config, convert_bloom),
    "phi": Converter(phi_config, convert_phi),
}


class UnsupportedArchitecture(ValueError):
    """A checkpoint whose model_type no converter handles (raised before any weight is read)."""


def converter_for(hf_config: dict) -> Converter:
    model_type = hf_config.get("model_type")
    if model_type not in CONVERTERS:
        architectures = ", ".join(hf_config.get("architectures") or []) or "no architectures listed"
        raise UnsupportedArchitecture(
            f"unsupported architecture {model_type!r} ({architectures}); attnviz supports: {supported_list()}"
        )
    return CONVERTERS[model_type]
