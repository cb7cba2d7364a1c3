"""The head atlas beyond one machine (issue 37, item 3): `atlas build --workers N [--ray-address ADDR]` measures
the texts on N Ray actors (a local Ray of N CPUs by default, or the cluster at ADDR) and stores the atlas exactly as
the one-process build does (attnviz.readouts.atlas).

- **Workers.** Each actor (`AtlasWorker`, one CPU) loads the model once, from the same source string
  (`attnviz.load(source)`: a folder, a file or a hub id that every worker can load), and measures the texts it is
  given with `atlas.measure_texts`, the one-process build's own tokenization, `seq_len` cut and forward pass,
  returning each text's HeadSums.
- **Driver.** This process reads the text stream and hands it to the actors in chunks of `chunk` texts, at most
  `IN_FLIGHT` chunks per actor at a time (one running, one queued), each chunk to the actor with the fewest in
  flight. It takes the results back in text order and gives them to `atlas.build`, which adds them, reports
  progress (`texts N/TOTAL`, advancing as the chunks come back), commits every `commit_every` texts and resumes as
  it does for one process: the stored sums, counts and SHA-256 chain are the same, so a build begun on one process
  resumes on N workers and back, and a build stopped on N workers loses at most what was in flight.
- **Exact.** The sums are added in text order, one text at a time, as one process adds them: N workers give the
  one-process numbers (the counts exactly, the float64 sums the same up to the order in which a worker's torch
  reduces a pass, checked within 1e-12 by tests/readouts/test_atlas_ray.py).
- **Examples** (atlas_examples). The driver's sampler decides, in text order, as for one process; a worker has
  to take a text's top-k rows before the driver sees the text, so it keeps a sampler of its own texts with the
  corpus's boundaries (`Samplers.for_shard`) and sends the rows of the heads that one keeps: both sampling rules
  (the top interval's largest max, the lower intervals' smallest hash priority) keep a sequence only if they
  would keep it among any subset of the sequences before it, so those heads include every head the driver keeps
  it for, and the driver's sample is the one-process sample. Until the warmup has fixed the boundaries a chunk
  goes out without them and comes back with every head's rows.

Ray is an extra (`pip install "attnviz[ray]"`, pyproject.toml): `import ray` happens only inside the functions here,
and a build on one process (`--workers 1`, no address) never reaches this module.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts import atlas
from attnviz.readouts.atlas_examples import Samplers, SequenceExamples
from attnviz.readouts.atlas_metrics import INDUCTION_THRESHOLD, HeadSums

RAY_PIN = "ray==2.60.0"  # pyproject.toml's [project.optional-dependencies] ray
INSTALL = f'pip install "attnviz[ray]" (or pip install "{RAY_PIN}")'
CHUNK = 4  # texts per call to a worker: the grain of the progress line and of the work handed out
IN_FLIGHT = 2  # chunks per worker at a time: one running, one queued behind it


def require_ray(what: str = "--workers"):
    """The `ray` module, or a ValueError in one line that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError(f"{what} runs the atlas on Ray, which is not installed: {INSTALL}") from None
    return ray


class AtlasWorker:
    """One worker, a Ray actor (`ray.remote(AtlasWorker)`): the model loaded once, the texts measured as the
    one-process build measures them. A model that fails to load is reported by `info`, as the error itself."""

    def __init__(self, source: str, dtype: str = "float32") -> None:
        import attnviz

        self.model, self.error = None, None
        self.shard: Samplers | None = None  # the sampler of this worker's texts, once the boundaries are known
        try:
            self.model = attnviz.load(source, dtype=dtype)
        except (ValueError, OSError) as error:
            self.error = error

    def info(self):
        """The loaded model's ModelInfo (what the build row records)."""
        if self.error is not None:
            raise self.error
        if not isinstance(self.model, LoadedModel):
            raise ValueError("the atlas takes a self-attention model (attnviz.load's LoadedModel), "
                             "not a translation model")
        return self.model.info

    def measure(self, texts: list[str], seq_len: int, threshold: float) -> list[HeadSums]:
        """Each text's HeadSums, in order (atlas.measure_texts)."""
        return [part for _, part in atlas.measure_texts(self.model, texts, seq_len, threshold)]

    def measure_examples(self, texts: list[str], seq_len: int, threshold: float, first_id: int, sampling: dict,
                         boundaries) -> list[tuple[HeadSums, SequenceExamples | None]]:
        """Each text's HeadSums and examples, the texts being the corpus's sequences `first_id`, `first_id + 1`,
        ...: with the corpus's interval `boundaries`, only the rows of the heads this worker's own sampler of its
        texts keeps (a superset of what the driver's keeps of them: Samplers.for_shard); before the driver knows
        its boundaries (the warmup), every head's rows."""
        if boundaries is not None and self.shard is None:
            self.shard = Samplers.for_shard(sampling, boundaries)
        sampler = None if boundaries is None else self.shard
        found = []
        for index, (_, sums, examples) in enumerate(atlas.measure_texts(
                self.model, texts, seq_len, threshold, examples=True, sampler=sampler, first_id=first_id)):
            if sampler is not None and examples is not None:
                sampler.add(first_id + index, examples)
                sampler.tokens.clear()  # the driver keeps the tokens; this sampler only decides
            found.append((sums, None if examples is None else examples.compacted()))
        return found


def _get(ray, ref):
    """ray.get, with a worker's ValueError or OSError raised as itself (a bad source, a bad text)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, (ValueError, OSError)):
            raise error.cause from None
        raise


class RayShards:
    """What `atlas.build` measures through: `info` (the workers' ModelInfo) and `measure`, the texts' HeadSums in
    text order, computed by the workers ahead of the sums added."""

    def __init__(self, ray, actors: list, info, chunk: int = CHUNK) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.ray, self.actors, self.info, self.chunk = ray, actors, info, chunk

    def measure(self, texts: Iterable[str], seq_len: int, threshold: float, sampler: Samplers | None = None,
                first_id: int = 0) -> Iterator[tuple]:
        """(text, HeadSums) in text order; with a `sampler` (the build's, its texts the sequences `first_id`, ...),
        (text, HeadSums, SequenceExamples or None), each chunk sent with the boundaries the sampler has then."""
        stream = iter(texts)
        busy = [0] * len(self.actors)  # chunks in flight per worker
        pending: deque = deque()  # (texts, worker, result ref), in text order
        next_id = first_id

        def send() -> bool:
            nonlocal next_id
            chunk = list(islice(stream, self.chunk))
            if not chunk:
                return False
            worker = min(range(len(busy)), key=busy.__getitem__)
            busy[worker] += 1
            actor = self.actors[worker]
            if sampler is None:
                ref = actor.measure.remote(chunk, seq_len, threshold)
            else:
                ref = actor.measure_examples.remote(chunk, seq_len, threshold, next_id, sampler.settings(),
                                                    sampler.boundaries)
            next_id += len(chunk)
            pending.append((chunk, worker, ref))
            return True

        more = True
        while more and len(pending) < IN_FLIGHT * len(self.actors):
            more = send()
        while pending:
            chunk, worker, ref = pending.popleft()
            parts = _get(self.ray, ref)
            busy[worker] -= 1
            if more:  # the next chunk goes out before these are added and saved
                more = send()
            if sampler is None:
                yield from zip(chunk, parts, strict=True)
            else:
                yield from ((text, *part) for text, part in zip(chunk, parts, strict=True))


def build(source: str, texts: Iterable[str], out_dir: str | Path, workers: int, address: str | None = None,
          seq_len: int = atlas.SEQ_LEN, progress: Callable[[int, int | None], None] | None = None,
          commit_every: int = atlas.COMMIT_EVERY, threshold: float = INDUCTION_THRESHOLD,
          chunk: int = CHUNK, examples: bool = False, warmup: int | None = None, dtype: str = "float32") -> dict:
    """`atlas.build` of the model `source` over `texts` in `out_dir`, measured by `workers` Ray actors: on the Ray
    this process is already connected to, else on the cluster at `address` (`ray.init(address=...)`), else on a
    local Ray of `workers` CPUs started here and stopped at the end. Returns `atlas.metrics(out_dir)`."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.WARNING)
    actors = []
    try:
        remote = ray.remote(num_cpus=1)(AtlasWorker)
        actors = [remote.remote(source, dtype) for _ in range(workers)]
        infos = [_get(ray, actor.info.remote()) for actor in actors]
        shapes = {(info.model_type, info.n_layers, info.n_heads) for info in infos}
        if len(shapes) > 1:
            raise ValueError(f"the workers loaded different models from {source!r}: {sorted(shapes)}")
        return atlas.build(RayShards(ray, actors, infos[0], chunk), texts, out_dir, seq_len=seq_len,
                           progress=progress, commit_every=commit_every, threshold=threshold,
                           examples=examples, warmup=warmup)
    finally:
        for actor in actors:
            ray.kill(actor)
        if started:
            ray.shutdown()
