"""What the logit lens, direct logit attribution and information-flow routes share: one recorded forward pass
of a text, the position they read (default: the last token of a decoder, the mask of a masked-LM encoder),
the model's own head that turns a state into logits, and a target given as text or as a token id.

A model with no head that gives logits (a sentence-embedding encoder such as all-MiniLM-L6-v2) has nothing
to read the stream through: `require_head` says so plainly."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import torch

from attnviz.models import inputs
from attnviz.models.loaded_model import LoadedModel
from attnviz.transformer.model import ForwardOutput
from attnviz.transformer.record import Recorder

NO_HEAD = ("this model has no head that gives logits (a sentence-embedding checkpoint): the logit lens, direct "
           "logit attribution and information-flow routes read the residual stream through the model's own "
           "unembedding or masked-LM head; load a decoder or an encoder with its masked-LM head")


@dataclass
class Run:
    """One recorded forward pass of a text: ids [1, T] (on the model's device), its token texts, the
    position read and the output (`record` holds what was asked for)."""

    ids: torch.Tensor
    tokens: list[str]
    position: int
    out: ForwardOutput

    def at(self, position: int | None) -> Run:
        """The same pass read at `position` (a token index, negative from the end; None: this run's own)."""
        if position is None:
            return self
        return replace(self, position=resolve_position(len(self.tokens), position, self.position))

    @property
    def nbytes(self) -> int:
        """What holding this run costs: its ids, final hidden states and every recorded tensor."""
        record = self.out.record
        tensors = [self.ids, self.out.hidden, *(t for layer in record.layers for t in layer.values())]
        if record.attentions is not None:
            tensors.append(record.attentions)
        return sum(t.element_size() * t.numel() for t in tensors)


def require_head(module) -> None:
    if module.lm_head is None and getattr(module, "mlm_head", None) is None:
        raise ValueError(NO_HEAD)


def head_logits(module, hidden: torch.Tensor, capped: bool = True) -> torch.Tensor:
    """Final hidden states [..., C] (after `module.finish`) -> logits [..., V] through the model's own head:
    the LM head (with Gemma 2's final soft-cap when `capped`) or the masked-LM head."""
    if module.lm_head is None:
        return module.mlm_head(hidden)
    return module.unembed(hidden) if capped else module.lm_head(hidden)


def token_texts(model: LoadedModel, ids: list[int]) -> list[str]:
    """Each id decoded alone (a leading space shows as one), specials as their own text."""
    return model.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)


def default_position(model: LoadedModel, enc) -> int:
    """A decoder's last token (its next-token prediction); a masked-LM encoder's first mask token, else its
    last token that is not a special one (the [SEP] predicts nothing worth reading)."""
    ids = list(enc.ids)
    if model.module.lm_head is not None:
        return len(ids) - 1
    for spelling in inputs.MASK_SPELLINGS:
        mask_id = model.tokenizer.token_to_id(spelling)
        if mask_id is not None and mask_id in ids:
            return ids.index(mask_id)
    ordinary = [i for i, special in enumerate(enc.special_tokens_mask) if not special]
    return ordinary[-1] if ordinary else len(ids) - 1


def resolve_position(n_tokens: int, position: int | None, default: int) -> int:
    if position is None:
        return default
    if isinstance(position, bool) or not isinstance(position, numbers.Integral):
        raise ValueError(f"position must be a whole number (a token index), got {position!r}")
    position = int(position)
    if not -n_tokens <= position < n_tokens:
        raise ValueError(f"position {position} is outside the text's {n_tokens} tokens (0..{n_tokens - 1}, or "
                         "negative from the end)")
    return position % n_tokens


def token_id(model: LoadedModel, target: int | str | None) -> int | None:
    """A target token as an id: an int is taken as is (checked against the vocabulary); a text must be
    exactly one token of this tokenizer (" are" with its space), else ValueError naming its pieces."""
    if target is None:
        return None
    vocab = model.config.vocab_size
    if isinstance(target, int):
        if not 0 <= target < vocab:
            raise ValueError(f"token id {target} is outside this vocabulary (0..{vocab - 1})")
        return target
    if not isinstance(target, str) or target == "":
        raise ValueError("the target token is empty: type one token, e.g. ' are' with its leading space")
    ids = list(model.encode(target, add_special_tokens=False).ids)
    if len(ids) != 1:
        pieces = " + ".join(model.piece_texts(ids)) or "nothing"
        raise ValueError(f"{target!r} is {len(ids)} tokens for this tokenizer ({pieces}), not one: choose a "
                         "single token")
    return ids[0]


def encode_text(model: LoadedModel, text: str):
    """The encoding of a text the views read (its special-tokens mask gives the default position)."""
    inputs.text_ids(model, text)  # refuses an empty text, one without tokens, one past the model's limit
    return model.encode(text)


@torch.inference_mode()
def recorded_run(model: LoadedModel, text: str, names: tuple[str, ...], position: int | None = None) -> Run:
    """One forward pass of `text` recording `names` (attnviz.transformer.record), at the position read."""
    require_head(model.module)
    enc = encode_text(model, text)
    ids = list(enc.ids)
    where = resolve_position(len(ids), position, default_position(model, enc))
    tensor = torch.tensor([ids], device=model.info.device)
    out = model.module(tensor, record=Recorder(*names), with_logits=False)
    return Run(tensor, token_texts(model, ids), where, out)
