"""What every reading of a loaded model starts from: a text's token ids (refused when empty, past the model's
limit or without tokens), the model's mask token whatever a visitor types for it, and whether the model has a
masked-LM head. The readouts, the interventions and the cards share these, so they live below all three."""

from __future__ import annotations

from attnviz.models.loaded_model import LoadedModel

MASK_SPELLINGS = ("[MASK]", "<mask>")  # what a user may type for the mask token, whatever the model's


def text_ids(model: LoadedModel, text: str) -> list[int]:
    """The token ids of `text` as the model sees it (special tokens included)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the text is empty: type a sentence")
    enc = model.encode(text)
    if enc.overflowing:
        raise ValueError(f"the text is longer than this model's limit of {model.info.max_tokens} tokens")
    if not enc.ids:
        raise ValueError("the text produced no tokens")
    return list(enc.ids)


def mask_token(model: LoadedModel) -> str:
    """The mask token's spelling in this tokenizer's vocabulary."""
    for spelling in MASK_SPELLINGS:
        if model.tokenizer.token_to_id(spelling) is not None:
            return spelling
    raise ValueError("this tokenizer has no mask token ([MASK] or <mask>)")


def has_mlm_head(model: LoadedModel) -> bool:
    """Whether the model can fill a mask: an encoder loaded with its masked-LM head (ModelInfo.mlm_head)."""
    return getattr(model.module, "mlm_head", None) is not None
