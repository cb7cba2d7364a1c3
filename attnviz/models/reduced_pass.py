"""A reduced trace from a module and a text's token fields: the forward pass with a `Reducer` as its record
(attnviz.transformer.reducer), given the Explore page's reductions (attnviz.models.view_reductions), so no
[L, H, T, T] map is ever held."""

from __future__ import annotations

import numpy as np
import torch

from attnviz.models.view_poolings import view_poolings
from attnviz.models.view_reductions import HeadProfileSums, MosaicTiles, RowArgmax
from attnviz.trace import ReducedTrace, punctuation_token_mask, special_token_mask
from attnviz.transformer.model import Transformer
from attnviz.transformer.reducer import CHUNK_ROWS, Reducer


@torch.inference_mode()
def reduced_trace(module: Transformer, fields: dict, device="cpu", tile: int = 64, chunk_rows: int = CHUNK_ROWS,
                  keep_dtype=torch.float16, progress=None) -> ReducedTrace:
    """`fields`: an AttentionTrace's token and word fields (tokens, input_ids, special_mask, word_of_token, ...)
    of one unpadded sequence. Returns the ReducedTrace of one forward pass of `module` on fields["input_ids"]."""
    if tile < 1:
        raise ValueError(f"tile must be >= 1, got {tile}")
    if any(getattr(block.attn, "terms", ()) for block in module.blocks):
        # DeBERTa adds relative-position terms that score_setup does not describe: head_window could not
        # recompute its maps from queries and keys alone.
        raise ValueError("run_reduced does not take DeBERTa's disentangled attention yet; use run on shorter texts")
    special = special_token_mask(fields.get("special_mask", []), fields["sequence_ids"])
    punctuation = punctuation_token_mask(fields["tokens"], special)
    n = len(fields["input_ids"])
    poolings = view_poolings(n, tile, special, fields["word_of_token"], first_aside=module.config.causal)
    # Named as the ReducedTrace's fields; the tiles first, as their matmul gives the profile its column sums.
    reductions = {"tiles": MosaicTiles(poolings), "statistics": HeadProfileSums(special, punctuation),
                  "argmax": RowArgmax()}
    reducer = Reducer(reductions, n, chunk_rows=chunk_rows, keep_dtype=keep_dtype, progress=progress)
    ids = torch.tensor([fields["input_ids"]], dtype=torch.long, device=device)
    ones, types = torch.ones_like(ids), torch.zeros_like(ids)  # as LoadedModel.forward_encodings, unpadded
    out = module(ids, ones, types, with_logits=False, record=reducer)
    result = reducer.result()
    setups = [[module.score_setup(layer, head) for head in range(module.config.n_heads)]
              for layer in range(module.config.n_layers)]
    for array in (result["argmax"], result["queries"], result["keys"], *result["tiles"].values(),
                  *result["statistics"].values()):
        array.setflags(write=False)  # shared read-only, as the app's traces
    hidden = out.hidden[0].float().cpu().numpy()
    return ReducedTrace(**fields, kv_group=module.kv_group, tile=tile, tiles=result["tiles"],
                        statistics=result["statistics"], argmax=result["argmax"], queries=result["queries"],
                        keys=result["keys"], score_setups=setups, hidden=np.asarray(hidden))
