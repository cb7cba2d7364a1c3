"""Retrieval heads (Wu et al. 2024) for the Head Finder page: the layers x heads grid of retrieval scores on
the built-in needle prompts, and whether the needles are still retrieved with the top heads switched off;
computed once per (model, haystack length, needles) and shared, under the memory budget."""

from __future__ import annotations

from attnviz.models import batch_bytes
from attnviz.probesets.needles import NEEDLES
from attnviz.readouts import retrieval as needle_work
from attnviz.workbench.shared import Workbench

# SmolLM2-135M answers 3 to 6 of the 6 built-in needles at each of these lengths (docs/views/retrieval.md,
# "Retrieval heads"); the page offers 200 first: the longer ones cost more prefill on a shared CPU.
DEFAULT_HAYSTACK_TOKENS = 200
HAYSTACK_CHOICES = (0, 100, 200, 400, 800, 1600)
N_NEEDLES = len(NEEDLES)


def prompts(model, haystack_tokens: int, n_needles: int) -> list[needle_work.NeedlePrompt]:
    return needle_work.prompts_for(model, haystack_tokens, NEEDLES[:n_needles])


def decoding_bytes(model, n_tokens: int) -> int:
    """Transient bytes of decoding one prompt: the prompt pass (one layer's scores and probabilities, the
    hidden states, the MLP), the KV cache of every layer, and a step's logits and attention rows."""
    c = model.config
    itemsize = next(model.module.parameters()).element_size()
    cache = 2 * c.n_layers * c.kv_heads * n_tokens * c.dim_per_head * itemsize
    rows = c.n_layers * c.n_heads * n_tokens * 4
    return batch_bytes.scan_bytes(model, n_tokens, 1, scored=1) + cache + rows


def job_bytes(model, batch) -> int:
    return decoding_bytes(model, max(p.n_tokens for p in batch) + needle_work.EXTRA_TOKENS + 32)


def grid_result(bench: Workbench, name: str, haystack_tokens: int, n_needles: int):
    """The RetrievalResult of these inputs, if some visitor has computed it."""
    return bench.views.get(("retrieval", name, haystack_tokens, n_needles))


def retrieval_grid(bench: Workbench, model, name: str, haystack_tokens: int, n_needles: int, progress=None):
    """Every head's retrieval score on the first n_needles built-in needles in haystack_tokens of filler
    (readouts.retrieval.retrieval_heads); the caller holds the heavy-work slot."""
    key = ("retrieval", name, haystack_tokens, n_needles)
    done = bench.views.get(key)
    if done is not None:  # another visitor's identical run finished while this one waited for the slot
        return done
    batch = prompts(model, haystack_tokens, n_needles)
    need = job_bytes(model, batch)
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        result = needle_work.retrieval_heads(model, batch, progress=progress)
    if result.grid is not None:
        result.grid.setflags(write=False)
    bench.views.put(key, result, _result_bytes(result))
    return result


def ablation_result(bench: Workbench, name: str, haystack_tokens: int, n_needles: int, n_off: int):
    return bench.views.get(("retrieval_off", name, haystack_tokens, n_needles, n_off))


def ablation(bench: Workbench, model, name: str, haystack_tokens: int, n_needles: int, n_off: int, grid,
             progress=None):
    """The needles with the n_off best retrieval heads of `grid` off, against as many random heads off
    (readouts.retrieval.ablation_comparison); the caller holds the heavy-work slot."""
    key = ("retrieval_off", name, haystack_tokens, n_needles, n_off)
    done = bench.views.get(key)
    if done is not None:
        return done
    batch = prompts(model, haystack_tokens, n_needles)
    need = job_bytes(model, batch)
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        result = needle_work.ablation_comparison(model, batch, grid, n_off, progress=progress)
    bench.views.put(key, result, 4096)
    return result


def _result_bytes(result) -> int:
    grid = 0 if result.grid is None else result.grid.nbytes
    return grid + sum(run.scores.nbytes + 8 * (len(run.generated) + run.prompt.n_tokens) for run in result.runs)
