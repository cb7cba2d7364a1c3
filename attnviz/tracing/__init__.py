"""A pretrained model behind one facade: tokenize with the Rust tokenizer, run the from-scratch model, and
return an AttentionTrace (`LoadedModel.run`, `LoadedSeq2Seq.run`)."""

from attnviz.tracing.model import LoadedModel, ModelInfo
from attnviz.tracing.seq2seq import LoadedSeq2Seq

__all__ = ["LoadedModel", "LoadedSeq2Seq", "ModelInfo"]
