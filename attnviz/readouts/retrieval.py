"""Retrieval heads (Wu et al. 2024) on a decoder: needle-in-a-haystack prompts, greedy decoding that records
every head's strongest key at each step, the scores (attnviz.analysis.retrieval), and the heads switched off.

Decoding follows Wu et al.'s detector: the prompt but its last token fills the KV cache in one pass that
records nothing; then each step feeds one token (the prompt's last, then each generated one) and records only
that query's attention row, [L, H, S] per step, so a step keeps one argmax per head and the prompt's T x T
maps are never held. Generation stops at a special token, at a line break after some text (their detector
stops at a line break; SmolLM2 often starts its reply on a new line), or after `max_new_tokens`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.analysis import retrieval as scoring
from attnviz.models.loaded_model import LoadedModel
from attnviz.probesets.needles import HAYSTACK, NEEDLES, Needle
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.record import Recorder

# The question follows the haystack as Wu et al. ask it ("Based on the content of the book, Question: ...
# Answer:"). A chat model gets it as one user turn of its template, as Wu et al. prompt the chat models they
# test; ChatML (SmolLM2, Qwen) is the template recognised here, by its two special tokens.
QUESTION_FORMAT = "\n\nBased on the content of the text above, answer the question.\nQuestion: {question}\nAnswer:"
CHATML = ("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")
TEMPLATES = ("auto", "plain", "chatml")
EXTRA_TOKENS = 4  # generated beyond the needle's own length (a reply may restate the question first)
RANDOM_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class NeedlePrompt:
    ids: tuple[int, ...]
    span: tuple[int, int]  # the needle sentence's tokens [start, end): k of the score
    needle: Needle
    haystack_tokens: int  # filler tokens around the needle

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


@dataclass
class NeedleRun:
    prompt: NeedlePrompt
    generated: list[int]
    continuation: str
    answered: bool
    scores: np.ndarray | None  # float64 [L, H]; None when decoding did not record attention


@dataclass
class RetrievalResult:
    grid: np.ndarray | None  # mean [L, H] over the answered prompts; None when none was answered
    runs: list[NeedleRun]

    @property
    def n_answered(self) -> int:
        return sum(run.answered for run in self.runs)


@dataclass
class AblationComparison:
    n_off: int
    top: list[tuple[int, int]]  # the heads switched off, best retrieval score first
    answered_all_on: list[bool]  # per prompt
    answered_top_off: list[bool]
    random: list[list[tuple[int, int]]] = field(default_factory=list)  # one draw per seed
    answered_random_off: list[list[bool]] = field(default_factory=list)  # [seed][prompt]

    @property
    def random_rate(self) -> float:
        cells = [ok for row in self.answered_random_off for ok in row]
        return sum(cells) / len(cells) if cells else float("nan")


# --- prompts ----------------------------------------------------------------------------------------------


def _piece(model: LoadedModel, text: str) -> list[int]:
    """Token ids of a text fragment, without the tokenizer's special tokens. Prompts are assembled from such
    fragments so that the needle's tokens, and so its span, are known exactly."""
    return model.encode(text, add_special_tokens=False).ids


def _leading_specials(model: LoadedModel) -> list[int]:
    """The special tokens the tokenizer puts before a text (a BOS where the model has one; SmolLM2 none)."""
    enc = model.encode("x")
    lead = []
    for token_id, special in zip(enc.ids, enc.special_tokens_mask, strict=True):
        if not special:
            break
        lead.append(token_id)
    return lead


def has_chatml(model: LoadedModel) -> bool:
    return all(model.tokenizer.token_to_id(token) is not None for token in ("<|im_start|>", "<|im_end|>"))


def build_prompt(model: LoadedModel, needle: Needle, haystack_tokens: int, depth: float = 0.5,
                 haystack: Sequence[str] = HAYSTACK, template: str = "auto") -> NeedlePrompt:
    """Filler sentences (cycled) up to `haystack_tokens` tokens, the needle put between two of them at
    `depth` (0 first, 1 last), then the question; in a ChatML user turn when `template` is "chatml", or
    "auto" and the vocabulary has ChatML's tokens. Fails if the prompt passes the model's limit."""
    if haystack_tokens < 0 or not 0.0 <= depth <= 1.0:
        raise ValueError(f"need haystack_tokens >= 0 and 0 <= depth <= 1, got {haystack_tokens}, {depth}")
    if template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; choose one of {', '.join(TEMPLATES)}")
    chat = template == "chatml" or (template == "auto" and has_chatml(model))
    sentences: list[list[int]] = []
    total, i = 0, 0
    while haystack and total < haystack_tokens:
        ids = _piece(model, " " + haystack[i % len(haystack)])
        if sentences and total + len(ids) > haystack_tokens:
            break
        sentences.append(ids)
        total += len(ids)
        i += 1
    cut = round(depth * len(sentences))
    before = [t for s in sentences[:cut] for t in s]
    after = [t for s in sentences[cut:] for t in s]
    lead = _leading_specials(model)
    question = QUESTION_FORMAT.format(question=needle.question)
    if chat:
        lead, question = lead + _piece(model, CHATML[0]), question.removesuffix("\nAnswer:") + CHATML[1]
    needle_ids = _piece(model, (" " if before else "") + needle.sentence)
    ids = lead + before + needle_ids + after + _piece(model, question)
    limit = model.config.max_positions  # learned positions; a rotary model's own context is not recorded
    if limit is not None and len(ids) > limit:
        raise ValueError(f"the prompt has {len(ids)} tokens; this model takes at most {limit}")
    start = len(lead) + len(before)
    return NeedlePrompt(tuple(ids), (start, start + len(needle_ids)), needle, total)


def prompts_for(model: LoadedModel, haystack_tokens: int, needles: Sequence[Needle] = NEEDLES,
                depth: float = 0.5, template: str = "auto") -> list[NeedlePrompt]:
    return [build_prompt(model, needle, haystack_tokens, depth, template=template) for needle in needles]


# --- decoding ---------------------------------------------------------------------------------------------


def _stopper(model: LoadedModel) -> Callable[[int, list[int]], bool]:
    """stop(token, generated so far): a special token, or a line break after some text."""
    specials = {i for i, token in model.tokenizer.get_added_tokens_decoder().items() if token.special}

    def stop(token_id: int, generated: list[int]) -> bool:
        if token_id in specials:
            return True
        # a line break before any text (a reply that starts on the next line) does not end it
        return "\n" in model.tokenizer.decode([token_id]) and bool(model.tokenizer.decode(generated).strip())

    return stop


@torch.inference_mode()
def decode_recording_argmax(model: LoadedModel, ids: Sequence[int], max_new_tokens: int, head_mask=None,
                            record: bool = True) -> tuple[list[int], np.ndarray | None]:
    """Greedy continuation of `ids` with the KV cache, and for each generated token the key position of
    every head's largest attention probability at the query that produced it: int64 [steps, L, H]
    (first position on ties, as torch.argmax); None when `record` is False. head_mask [L, H]: 0 switches
    a head off (Transformer.forward)."""
    module = model.module
    if not module.config.causal or module.lm_head is None:
        raise ValueError("retrieval heads need a decoder with an LM head")
    if not ids:
        raise ValueError("the prompt is empty")
    weight = next(module.parameters())
    mask = None if head_mask is None else torch.as_tensor(np.asarray(head_mask), dtype=weight.dtype,
                                                          device=weight.device)
    prompt = torch.tensor([list(ids)], device=weight.device)
    cache = KVCache(len(module.blocks))
    if prompt.shape[1] > 1:
        module(prompt[:, :-1], head_mask=mask, with_logits=False, record=Recorder(), cache=cache)
    stop = _stopper(model)
    step_input, generated, keys = prompt[:, -1:], [], []
    for _ in range(max_new_tokens):
        out = module(step_input, head_mask=mask, record=Recorder("attentions") if record else Recorder(),
                     cache=cache)
        if record:
            keys.append(out.attentions[:, 0, :, -1].argmax(dim=-1).cpu().numpy())  # L, H
        next_id = int(out.logits[0, -1].argmax())
        generated.append(next_id)
        if stop(next_id, generated):
            break
        step_input = torch.tensor([[next_id]], device=weight.device)
    if not record:
        return generated, None
    n_layers, n_heads = module.config.n_layers, module.config.n_heads
    return generated, np.stack(keys) if keys else np.zeros((0, n_layers, n_heads), dtype=np.int64)


def max_new_tokens_for(prompt: NeedlePrompt) -> int:
    return prompt.span[1] - prompt.span[0] + EXTRA_TOKENS


def run_needle(model: LoadedModel, prompt: NeedlePrompt, head_mask=None, record: bool = True) -> NeedleRun:
    generated, keys = decode_recording_argmax(model, prompt.ids, max_new_tokens_for(prompt), head_mask, record)
    continuation = model.tokenizer.decode(generated, skip_special_tokens=True)
    scores = None if keys is None else scoring.retrieval_scores(keys, generated, prompt.ids, prompt.span)
    return NeedleRun(prompt, generated, continuation, scoring.answer_found(prompt.needle.answer, continuation),
                     scores)


def retrieval_heads(model: LoadedModel, prompts: Sequence[NeedlePrompt], progress=None) -> RetrievalResult:
    """Every head's retrieval score, averaged over the prompts the model answered (Wu et al. keep only the
    successful retrievals). progress(done, total) after each prompt."""
    runs = []
    for i, prompt in enumerate(prompts):
        runs.append(run_needle(model, prompt))
        if progress is not None:
            progress(i + 1, len(prompts))
    grid = scoring.mean_scores([run.scores for run in runs], [run.answered for run in runs])
    return RetrievalResult(grid, runs)


# --- switching heads off ----------------------------------------------------------------------------------


def random_heads(n_layers: int, n_heads: int, n: int, seed: int, exclude=()) -> list[tuple[int, int]]:
    """n heads drawn without replacement from those not in `exclude`, with numpy's default_rng(seed)."""
    pool = [(layer, head) for layer in range(n_layers) for head in range(n_heads) if (layer, head) not in set(exclude)]
    if n > len(pool):
        raise ValueError(f"cannot draw {n} heads from {len(pool)}")
    picks = np.random.default_rng(seed).choice(len(pool), size=n, replace=False)
    return sorted(pool[int(i)] for i in picks)


def _mask(model: LoadedModel, off) -> np.ndarray:
    mask = np.ones((model.config.n_layers, model.config.n_heads), dtype=np.float32)
    for layer, head in off:
        mask[layer, head] = 0.0
    return mask


def ablation_comparison(model: LoadedModel, prompts: Sequence[NeedlePrompt], grid, n_off: int,
                        seeds: Sequence[int] = RANDOM_SEEDS, progress=None) -> AblationComparison:
    """Whether each prompt is still answered with the n_off best retrieval heads off, against as many random
    other heads off (one draw per seed; Wu et al. compare with random non-retrieval heads)."""
    c = model.config
    if not 0 < n_off < c.n_layers * c.n_heads:
        raise ValueError(f"switch off between 1 and {c.n_layers * c.n_heads - 1} heads, not {n_off}")
    top = scoring.top_heads(grid, n_off)
    draws = [random_heads(c.n_layers, c.n_heads, n_off, seed, exclude=top) for seed in seeds]
    total, done = len(prompts) * (2 + len(draws)), 0

    def answered(off) -> list[bool]:
        nonlocal done
        row = []
        for prompt in prompts:
            row.append(run_needle(model, prompt, _mask(model, off) if off else None, record=False).answered)
            done += 1
            if progress is not None:
                progress(done, total)
        return row

    result = AblationComparison(n_off, top, answered(()), answered(top), draws)
    result.answered_random_off = [answered(off) for off in draws]
    return result
