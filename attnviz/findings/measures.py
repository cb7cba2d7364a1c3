"""Our numbers for each replication card (findings.cards): one function a card, each computed the way
the rest of attnviz computes it, so a card's number is the number the app shows elsewhere.

- clark2019: the Head Finder's treebank scoring (analysis.score_model, to_json), relation by relation;
- michel2019: the importance scan (ablation.importance_scan), then heads switched off together in its order;
- wu2024: the Head Finder's retrieval scores (readouts.retrieval);
- olsson2022: the head detectors' induction score (analysis.detectors) and the loss at two places of a text;
- gu2024: the sinks command's sink ratio (readouts.sinks);
- wang2022: activation patching of every head on IOI prompts (interventions.patching).

Every function takes `progress(done, total)`: the app's jobs raise Cancelled from it, so it is called
between steps and a card stops at its next step."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attnviz.analysis import DIRECTIONS, score_model, to_json
from attnviz.analysis.detectors import detect_heads, top_heads
from attnviz.findings.cards import CARD_DIR, Card
from attnviz.interventions import ablation, patching
from attnviz.models import batch_bytes
from attnviz.models.loaded_model import LoadedModel
from attnviz.probesets.needles import NEEDLES
from attnviz.readouts import predictions, sinks
from attnviz.readouts import retrieval as needle_work
from attnviz.transformer.record import Recorder

Progress = Callable[[int, int], None] | None
TOP = 5  # heads listed beside a card's number


def is_decoder(model: LoadedModel) -> bool:
    return bool(model.config.causal) and model.module.lm_head is not None


def _tick(progress: Progress, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def _top(grid: np.ndarray) -> list[list]:
    return [[layer, head, round(score, 4)] for layer, head, score in top_heads(grid, TOP)]


# --- clark2019 -------------------------------------------------------------------------------------------


def clark2019(card: Card, model: LoadedModel, name: str, items, progress: Progress = None,
              batch_size: int = 32) -> dict:
    """Per Stanford label of the card: the UD relation's best head over both directions, its accuracy, and
    that direction's best fixed-offset baseline, from the Head Finder's JSON of the treebank's items of
    those relations (labels without a UD equivalent: None)."""
    wanted = {ud for ud in card.labels.values() if ud}
    chosen = [item for item in items if item.relation in wanted]
    if not chosen:
        raise ValueError(f"the treebank has none of the relations {', '.join(sorted(wanted))}")
    blocks = to_json(name, score_model(model, chosen, batch_size=batch_size, progress=progress))["relations"]
    return {stanford: _best_of_both(blocks.get(ud), ud) if ud else None for stanford, ud in card.labels.items()}


def _best_of_both(block: dict | None, ud: str) -> dict | None:
    """The better direction's best head (the first direction on a tie), as the card's keys, among the
    directions in which at least half of the relation's items can be read. An encoder reads every item both
    ways (Clark et al.'s rule: the better of the two); a decoder's word sees only earlier words, so the
    direction against the relation's usual order holds a handful of items, whose accuracy (aux:pass read
    from the auxiliary: 1 item of 162, 1.0) says nothing."""
    if block is None:
        return None
    readable = [d for d in DIRECTIONS if 2 * block["n_scorable"][d] >= block["n"]]
    found = [(block["best"][d]["accuracy"], -i, d) for i, d in enumerate(DIRECTIONS)
             if block["best"][d] and d in readable]
    if not found:
        return {"ud": ud, "n": block["n"], "best_head": None, "accuracy": None, "baseline": None}
    _, _, direction = max(found)
    best, base = block["best"][direction], block["baselines"][direction]
    return {"ud": ud, "n": block["n"], "n_scored": block["n_scorable"][direction], "direction": direction,
            "best_head": [best["layer"], best["head"]], "accuracy": best["accuracy"],
            "baseline": base["best_offset_accuracy"], "offset": base["best_offset"]}


# --- michel2019 ------------------------------------------------------------------------------------------


def michel2019(card: Card, model: LoadedModel, texts: list[str] | None = None, progress: Progress = None) -> dict:
    """The importance scan on each text (decoders: the drop of the top next token's log-probability;
    encoders: the embedding's cosine change), averaged; then 0%, 10%, ..., 100% of the heads switched off
    together, least important first, and the metric of the card's rule at each step."""
    texts = list(texts or card.inputs["texts"])
    decoder = is_decoder(model)
    quantity = "next_token" if decoder else "embedding"
    levels = np.linspace(0.0, 1.0, 11)
    total = len(texts) + len(levels)
    importance = np.zeros((model.config.n_layers, model.config.n_heads))
    for done, text in enumerate(texts, start=1):
        importance += ablation.importance_scan(model, text, quantity=quantity) / len(texts)
        _tick(progress, done, total)
    order = np.argsort(importance, axis=None, kind="stable")  # least important first
    plain = [predictions.next_token_top_k(model, text, k=1)[0].id for text in texts] if decoder else None
    curve = []
    for step, share in enumerate(levels, start=1):
        mask = np.ones(importance.size, dtype=np.float32)
        mask[order[: round(share * importance.size)]] = 0.0
        mask = mask.reshape(importance.shape)
        if decoder:
            kept = [predictions.next_token_top_k(model, text, mask, k=1)[0].id == top
                    for text, top in zip(texts, plain)]
            metric = float(np.mean(kept))
        else:
            metric = float(np.mean([1.0 - predictions.embedding_cosine_change(model, text, mask) for text in texts]))
        curve.append([round(float(share), 2), round(metric, 4)])
        _tick(progress, len(texts) + step, total)
    floor = card.numbers["metric_floor"]
    prunable = 0.0
    for share, metric in curve:
        if metric < floor:
            break
        prunable = share
    return {"share_prunable": prunable, "curve": curve,
            "metric": "top next token unchanged (share of texts)" if decoder else "embedding cosine similarity",
            "importance": "drop of the top token's log-probability (nats)" if decoder else "1 - cosine",
            "importance_max": round(float(importance.max()), 4),
            "importance_median": round(float(np.median(importance)), 4),
            "most_important": _top(importance), "n_heads": int(importance.size)}


# --- wu2024 ----------------------------------------------------------------------------------------------


def wu2024(card: Card, model: LoadedModel, progress: Progress = None, grid_of=None) -> dict:
    """The share of heads whose retrieval score reaches the card's threshold, on the Head Finder's prompts.
    `grid_of(haystack_tokens, n_needles, progress)` gives the RetrievalResult (the app's shared one); by
    default it is computed here (readouts.retrieval.retrieval_heads)."""
    haystack, n_needles = card.inputs["haystack_tokens"], card.inputs["needles"]
    if grid_of is None:
        prompts = needle_work.prompts_for(model, haystack, NEEDLES[:n_needles])
        result = needle_work.retrieval_heads(model, prompts, progress=progress)
    else:
        result = grid_of(haystack, n_needles, progress)
    ours = {"answered": result.n_answered, "prompts": len(result.runs), "share": None}
    if result.grid is None:  # no prompt answered: no head copied anything to score
        return ours
    grid = np.asarray(result.grid, dtype=np.float64)
    above = grid >= card.numbers["threshold"]
    return {**ours, "share": round(float(above.mean()), 4), "n_retrieval": int(above.sum()),
            "n_heads": int(grid.size), "top": _top(grid)}


# --- olsson2022 ------------------------------------------------------------------------------------------


def builtin_text(card: Card) -> str:
    return (CARD_DIR / card.inputs["text_file"]).read_text(encoding="utf-8")


def olsson2022(card: Card, model: LoadedModel, texts: list[str] | None = None, progress: Progress = None) -> dict:
    """Each head's prefix-matching (induction) score on repeated random tokens, and the in-context-learning
    score: the mean loss in the card's late window minus the mean loss in its early window, over the texts
    long enough (the card's essay when none are given)."""
    inputs = card.inputs
    texts = list(texts or [builtin_text(card)])
    total = inputs["sequences"] + len(texts)
    prefix = detect_heads(model, n=inputs["random_tokens"], sequences=inputs["sequences"], seed=0,
                          progress=lambda done, _: _tick(progress, done, total))["induction"]
    early, late = (np.arange(*inputs[window]) for window in ("early", "late"))
    early_losses, late_losses = [], []
    for done, text in enumerate(texts, start=1):
        losses = token_losses(model, text, inputs["late"][1], np.concatenate([early, late]))
        if losses is not None:
            early_losses.append(losses[: len(early)].mean())
            late_losses.append(losses[len(early):].mean())
        _tick(progress, inputs["sequences"] + done, total)
    used = len(early_losses)
    ours = {"prefix_matching_max": round(float(prefix.max()), 4), "prefix_matching_top": _top(prefix),
            "texts_used": used, "texts_given": len(texts), "icl_score": None}
    if used:
        ours.update(icl_score=round(float(np.mean(late_losses) - np.mean(early_losses)), 4),
                    loss_early=round(float(np.mean(early_losses)), 4), loss_late=round(float(np.mean(late_losses)), 4))
    return ours


@torch.inference_mode()
def token_losses(model: LoadedModel, text: str, n_tokens: int, positions: np.ndarray) -> np.ndarray | None:
    """float64 [len(positions)]: -log P(token p | the tokens before it) at each position p (>= 1) of the
    text's first n_tokens tokens (with the tokenizer's special tokens); None when the text is shorter. Only
    those positions are unembedded: a 262k-word vocabulary at every position would take a gigabyte."""
    if n_tokens > model.context_tokens:
        raise ValueError(f"the card reads {n_tokens} tokens; this model reads at most {model.context_tokens}")
    ids = list(model.encode(text, max_tokens=n_tokens).ids)
    if len(ids) < n_tokens:
        return None
    tensor = torch.tensor([ids], dtype=torch.long, device=model.info.device)
    out = model.module(tensor, None, torch.zeros_like(tensor), with_logits=False, record=Recorder())
    rows = torch.as_tensor(positions, dtype=torch.long, device=tensor.device)
    logprobs = torch.log_softmax(model.module.unembed(out.hidden[0, rows - 1]).double(), dim=-1)
    return -logprobs.gather(-1, tensor[0, rows, None])[:, 0].cpu().numpy()


# --- gu2024 ----------------------------------------------------------------------------------------------


def gu2024(card: Card, model: LoadedModel, texts: list[str] | None = None, progress: Progress = None) -> dict:
    """The sink ratio at the card's epsilon exactly as `python -m attnviz sinks` computes it: the built-in
    texts cut at sinks.TEXT_TOKENS, or the given texts as run tokenizes them."""
    max_tokens = None if texts else sinks.TEXT_TOKENS
    texts = list(texts or sinks.builtin_texts())
    means = sinks.first_token_means(model, texts, max_tokens=max_tokens, progress=progress)
    epsilon = card.numbers["epsilon"]
    return {"ratio": sinks.sink_ratio(means, epsilon), "epsilon": epsilon, "n_texts": len(texts),
            "max_tokens": max_tokens, "n_heads": int(means.size), "n_sinks": int((means >= epsilon).sum())}


# --- wang2022 --------------------------------------------------------------------------------------------


def ioi_prompts(card: Card) -> list[tuple[str, str, str, str]]:
    """(clean, corrupted, indirect object, subject) per template and pair of names: the corrupted prompt is
    the clean one with the two names swapped, so the answer flips."""
    out = []
    for template in card.inputs["templates"]:
        for io, s in card.inputs["names"]:
            out.append((template.format(A=io, B=s), template.format(A=s, B=io), " " + io, " " + s))
    return out


def wang2022(card: Card, model: LoadedModel, name: str, prompts=None, progress: Progress = None) -> dict:
    """Each head's output patched from the clean run into the corrupted one (patching.heads, denoising:
    the share of the logit difference it restores), averaged over the prompts; our strongest heads beside
    the paper's, and what the paper's heads (on GPT-2 small; else our strongest) restore patched together."""
    prompts = prompts or ioi_prompts(card)
    c = model.config
    listed = [tuple(h) for group in ("name_movers", "negative_name_movers", "s_inhibition")
              for h in card.numbers[group]]
    same = card.is_paper_model(name)
    if same and any(layer >= c.n_layers or head >= c.n_heads for layer, head in listed):
        raise ValueError("this model has fewer heads than the paper's GPT-2 small")
    prepared = [patching.prepare(model.module, patching.patch_pair(model, clean, corrupt, io, s))
                for clean, corrupt, io, s in prompts]
    grid = np.zeros((c.n_layers, c.n_heads))
    for done, runs in enumerate(prepared, start=1):
        grid += patching.heads(runs) / len(prepared)
        _tick(progress, done, len(prepared) + 1)
    order = np.argsort(-np.abs(grid), axis=None, kind="stable")[: len(listed)]
    strongest = [(int(i // c.n_heads), int(i % c.n_heads)) for i in order]
    together = listed if same else strongest
    recovered = float(np.mean([_patched_together(runs, together) for runs in prepared]))
    _tick(progress, len(prepared) + 1, len(prepared) + 1)
    return {"overlap": round(len(set(listed) & set(strongest)) / len(listed), 4) if same else None,
            "recovered": round(recovered, 4), "recovered_by": "the paper's heads" if same else "our strongest heads",
            "strongest": [[layer, head, round(float(grid[layer, head]), 4)] for layer, head in strongest],
            "prompts": len(prompts)}


def _patched_together(runs, heads) -> float:
    """The normalised effect of patching all of `heads` at once, in one row (patching's edit points)."""
    edits = {}
    for layer, head in heads:
        edits.setdefault((layer, "head_outputs"), []).append(head)
    edits = {key: (torch.zeros(len(h), dtype=torch.long), torch.tensor(h)) for key, h in edits.items()}
    first = min(layer for layer, _ in heads)
    return float(runs.normalised(runs.run_from(first, edits, 1))[0])


def compute(card: Card, model: LoadedModel, name: str, items=None, texts: list[str] | None = None,
            progress: Progress = None, grid_of=None) -> dict:
    """The card's `ours`: clark2019 scores `items` (a treebank's), michel2019 and olsson2022 read `texts`
    (their own when None), wu2024 takes `grid_of` (see `wu2024`)."""
    if card.id == "clark2019":
        if not items:
            raise ValueError("clark2019 needs a treebank: give a CoNLL-U file (--conllu)")
        return clark2019(card, model, name, items, progress=progress)
    if card.decoders_only and not is_decoder(model):
        raise ValueError(f"{card.id} needs a decoder with a language-model head (GPT-2, Llama family); "
                         "this model is an encoder")
    if card.id == "michel2019":
        return michel2019(card, model, texts, progress=progress)
    if card.id == "olsson2022":
        return olsson2022(card, model, texts, progress=progress)
    if card.id == "wu2024":
        return wu2024(card, model, progress=progress, grid_of=grid_of)
    if card.id == "gu2024":
        return gu2024(card, model, texts, progress=progress)
    if card.id == "wang2022":
        return wang2022(card, model, name, progress=progress)
    raise ValueError(f"no computation for card {card.id!r}")


def run_bytes(model: LoadedModel, card: Card) -> int:
    """Transient bytes of the card's largest step on this model (the workbench reserves them; a card
    whose need passes the host's budget says so before it starts). clark2019 is sized by its treebank
    (workbench.findings) and wu2024 by the retrieval decoding (workbench.retrieval)."""
    if card.id == "michel2019":
        return batch_bytes.scan_bytes(model, 32, batch_bytes.scan_batch_size(model, 32))
    if card.id == "olsson2022":
        n = card.inputs["late"][1]
        scored = sum(b - a for a, b in (card.inputs["early"], card.inputs["late"]))
        return batch_bytes.scan_bytes(model, n, 1, scored=2 * scored)  # the log-softmax in float64
    if card.id == "gu2024":
        return sinks.anatomy_bytes(model, sinks.TEXT_TOKENS)
    if card.id == "wang2022":  # a batch of patched runs, and both runs recorded at every edit point per prompt
        n = 24
        return batch_bytes.scan_bytes(model, n, patching.patch_batch_size(model.module, n), scored=1) + 6 * 2 * 4 * (
            3 * model.config.n_layers * n * model.config.d_model)
    return 0
