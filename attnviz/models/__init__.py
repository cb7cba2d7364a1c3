"""A pretrained model behind one facade: tokenize with the Rust tokenizer, run the from-scratch model, and
return an AttentionTrace (`LoadedModel.run`, `LoadedSeq2Seq.run`); the inputs every reading starts from
(`inputs`), the reduced pass of a long text (`reduced_pass`, with the views it reduces: `view_poolings`,
`view_reductions`) and a batch's transient bytes (`batch_bytes`)."""

from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.models.loaded_seq2seq import LoadedSeq2Seq

__all__ = ["LoadedModel", "LoadedSeq2Seq", "ModelInfo"]
