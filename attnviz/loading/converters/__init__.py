"""One converter per family, as TransformerLens's pretrained/weight_conversions/: each file holds its
family's pair, HF config -> `ModelConfig` and HF tensors -> our state dict, and says only what is special
about that family. What several families share is written once in a module named for what it holds:
`llama_like.py` (the Llama-shaped decoder: sizes, q/k/v/o, gated MLP, norms), `bert_like.py` (the BERT-layout
encoders: embeddings, BertLayer, the masked-LM head), `rotary.py` (rotary settings), `activations.py` (HF
activation names). The registry (attnviz.loading.registry) maps each `model_type` to its pair."""

from attnviz.loading.converters.albert import albert_config, convert_albert
from attnviz.loading.converters.bart import bart_config, convert_bart
from attnviz.loading.converters.bert import bert_config, convert_bert
from attnviz.loading.converters.bloom import bloom_config, convert_bloom
from attnviz.loading.converters.deberta import convert_deberta_v2, deberta_v2_config
from attnviz.loading.converters.deepseek import convert_deepseek, deepseek_config
from attnviz.loading.converters.distilbert import convert_distilbert, distilbert_config
from attnviz.loading.converters.electra import convert_electra, electra_config
from attnviz.loading.converters.gemma import convert_gemma, gemma_config
from attnviz.loading.converters.gpt2 import convert_gpt2, gpt2_config
from attnviz.loading.converters.gpt_neo import convert_gpt_neo, gpt_neo_config
from attnviz.loading.converters.gpt_neox import convert_gpt_neox, gpt_neox_config
from attnviz.loading.converters.gpt_oss import convert_gpt_oss, gpt_oss_config
from attnviz.loading.converters.llama import convert_llama, llama_config
from attnviz.loading.converters.marian import convert_marian, marian_config
from attnviz.loading.converters.mixtral import convert_mixtral, mixtral_config
from attnviz.loading.converters.modernbert import convert_modernbert, modernbert_config
from attnviz.loading.converters.olmo2 import convert_olmo2, olmo2_config
from attnviz.loading.converters.opt import convert_opt, opt_config
from attnviz.loading.converters.phi import convert_phi, phi_config
from attnviz.loading.converters.phi3 import convert_phi3, phi3_config
from attnviz.loading.converters.qwen3 import convert_qwen3, qwen3_config
from attnviz.loading.converters.smollm3 import convert_smollm3, smollm3_config
from attnviz.loading.converters.t5 import convert_t5, t5_config

__all__ = [
    "albert_config",
    "bart_config",
    "bert_config",
    "bloom_config",
    "convert_albert",
    "convert_bart",
    "convert_bert",
    "convert_bloom",
    "convert_deberta_v2",
    "convert_deepseek",
    "convert_distilbert",
    "convert_electra",
    "convert_gemma",
    "convert_gpt2",
    "convert_gpt_neo",
    "convert_gpt_neox",
    "convert_gpt_oss",
    "convert_llama",
    "convert_marian",
    "convert_mixtral",
    "convert_modernbert",
    "convert_olmo2",
    "convert_opt",
    "convert_phi",
    "convert_phi3",
    "convert_qwen3",
    "convert_smollm3",
    "convert_t5",
    "deberta_v2_config",
    "deepseek_config",
    "distilbert_config",
    "electra_config",
    "gemma_config",
    "gpt2_config",
    "gpt_neo_config",
    "gpt_neox_config",
    "gpt_oss_config",
    "llama_config",
    "marian_config",
    "mixtral_config",
    "modernbert_config",
    "olmo2_config",
    "opt_config",
    "phi3_config",
    "phi_config",
    "qwen3_config",
    "smollm3_config",
    "t5_config",
]
