"""The head atlas on Ray workers (attnviz.readouts.atlas_ray; issue 37, item 3), on a real local Ray of 2 CPUs:
two workers give the one-process atlas (metrics within 1e-12, counts exactly, the same examples), texts done
counted as the chunks come back, a build stopped on Ray resumed by one process, the command line's `--workers 2`
and its JSON, and, without Ray, one line that says how to install it. The dispatch (text order, chunks to the
least busy worker, a bounded number in flight) is also checked with stand-in workers, without Ray.

Ray is the `ray` extra (`pip install "attnviz[ray]"`; `scripts/setup.sh --dev` installs it): where it is missing
the Ray tests are skipped with one line, except when `CI` is set, where they fail."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import duckdb
import numpy as np
import pytest

import attnviz
from attnviz.cli.main import main
from attnviz.readouts import atlas, atlas_examples, atlas_ray
from attnviz.readouts.atlas_metrics import COUNTS, METRICS, SUMS, HeadSums

HAVE_RAY = importlib.util.find_spec("ray") is not None
pytestmark = pytest.mark.skipif(not HAVE_RAY and not os.environ.get("CI"),
                                reason='ray is not installed (the ray extra: pip install "attnviz[ray]"; '
                                       "bash scripts/setup.sh --dev installs it)")

# 12 texts of different lengths (1 to about 60 tokens with BOS), repeated tokens for the induction score.
TEXTS = [
    "The cat sat on the mat. The cat sat on the mat. The cat",
    "a",
    "The keys to the cabinet are on the table.",
    "the the the the the",
    "A dog ran in the park, and the cat watched the dog from the wall.",
    "Hello.",
    "one two three four five six seven eight nine ten one two three four five six seven eight nine ten",
    "The authors that the critic praises write well.",
    "x y",
    "Colourless green ideas sleep furiously, and the green ideas sleep again and again and again.",
    "She said that she would come, and she came.",
    "The report that the committee published last year was long, and the report was read by few.",
]
TOLERANCE = 1e-12
WARMUP = atlas_examples.warmup_size(len(TEXTS))  # the command line's, for 12 texts


@pytest.fixture(scope="module")
def local_ray():
    if not HAVE_RAY:
        pytest.fail("ray is not installed and CI is set: scripts/setup.sh --dev must install the ray extra")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def one_process(tiny_llama, tmp_path_factory):
    """(the model folder, the one-process atlas's folder, its metrics, the model)."""
    out, model = tmp_path_factory.mktemp("one-process"), attnviz.load(str(tiny_llama))
    return tiny_llama, out, atlas.build(model, TEXTS, out, examples=True, warmup=WARMUP), model


def stored(out) -> tuple[dict, dict]:
    """The stored float64 sums ({name: [L, H]}) and the counts of an atlas folder."""
    con = duckdb.connect(str(atlas.atlas_path(out)), read_only=True)
    try:
        table = con.execute(f"SELECT {', '.join(SUMS)} FROM sums ORDER BY layer, head").fetchnumpy()
        counts = con.execute(f"SELECT texts_done, {', '.join(COUNTS)} FROM progress").fetchall()[0]
    finally:
        con.close()
    return {name: np.asarray(table[name]) for name in SUMS}, dict(zip(("texts_done", *COUNTS), counts))


def stored_examples(out) -> dict:
    """The examples' tables of an atlas folder: each kept example in its slot's order, the tokens of the sequences
    kept, the histograms of the max, the distance mass and the samplers' state."""
    con = duckdb.connect(str(atlas.atlas_path(out)), read_only=True)
    try:
        return {
            "examples": con.execute("SELECT layer, head, interval, position, sequence_id, max, attention_indices, "
                                    "attention_values, seq_len FROM examples ORDER BY ALL").fetchall(),
            "sequences": con.execute("SELECT id, tokens FROM sequences ORDER BY id").fetchall(),
            "max_histogram": con.execute("SELECT layer, head, bin_values, n_sequences FROM max_histogram "
                                         "ORDER BY ALL").fetchall(),
            "qk_distance_mass": con.execute("SELECT layer, head, bin_values FROM qk_distance_mass "
                                            "ORDER BY ALL").fetchall(),
            "example_state": con.execute("SELECT layer, head, boundaries, n_seen FROM example_state "
                                         "ORDER BY ALL").fetchall(),
        }
    finally:
        con.close()


def assert_same_examples(got_out, want_out) -> None:
    """The same sequences kept in the same slots, with the same rows (max within 1e-6, weights within 1e-4: the
    workers' passes may add in another order)."""
    got, want = stored_examples(got_out), stored_examples(want_out)
    assert len(want["examples"]) > 50  # a sample was drawn (12 texts, warmup 1)
    assert [row[:5] for row in got["examples"]] == [row[:5] for row in want["examples"]]
    for got_row, want_row in zip(got["examples"], want["examples"]):
        assert got_row[5] == pytest.approx(want_row[5], abs=1e-6)
        assert got_row[6] == want_row[6] and got_row[8] == want_row[8]
        np.testing.assert_allclose(got_row[7], want_row[7], atol=1.01e-4, rtol=0)
    for table in ("sequences", "max_histogram", "example_state"):
        assert got[table] == want[table], table
    np.testing.assert_allclose([v for *_, values in got["qk_distance_mass"] for v in values],
                               [v for *_, values in want["qk_distance_mass"] for v in values], atol=1e-9, rtol=0)


def assert_same_atlas(got: dict, want: dict, got_out, want_out) -> None:
    assert {k: v for k, v in got.items() if k != "metrics"} == {k: v for k, v in want.items() if k != "metrics"}
    for name in METRICS:
        np.testing.assert_allclose(np.array(got["metrics"][name], dtype=np.float64),
                                   np.array(want["metrics"][name], dtype=np.float64), atol=TOLERANCE, rtol=0,
                                   err_msg=name)
    got_sums, got_counts = stored(got_out)
    want_sums, want_counts = stored(want_out)
    assert got_counts == want_counts  # exactly
    for name in SUMS:
        np.testing.assert_allclose(got_sums[name], want_sums[name], atol=TOLERANCE, rtol=0, err_msg=name)


class Stop(Exception):
    pass


@pytest.mark.slow
def test_two_workers_stopped_and_resumed_on_one_process_equal_one_process(local_ray, one_process, tmp_path):
    """Texts counted in order as the workers' chunks come back; a build stopped on Ray keeps what it added, and
    one process finishes it: the one-process atlas (the command line's test below runs two workers through)."""
    folder, one_out, one, model = one_process
    assert one["n_texts"] == len(TEXTS) and np.nanmax(np.array(one["metrics"]["induction_score"], float)) > 0
    calls = []

    def stop_at_seven(done, total):
        calls.append((done, total))
        if done == 7:
            raise Stop

    with pytest.raises(Stop):  # committed every 3 texts, kept at 7 when stopped; the workers are let go
        atlas_ray.build(str(folder), TEXTS, tmp_path, workers=2, chunk=2, commit_every=3, progress=stop_at_seven,
                        examples=True, warmup=WARMUP)
    assert calls == [(done, len(TEXTS)) for done in range(1, 8)]
    assert local_ray.is_initialized()  # a Ray this process had joined is left running
    partial = atlas.metrics(tmp_path)
    assert (partial["n_texts"], partial["complete"]) == (7, False)
    resumed = []
    finished = atlas.build(model, TEXTS, tmp_path, progress=lambda done, _: resumed.append(done), examples=True,
                           warmup=WARMUP)
    assert resumed == list(range(8, len(TEXTS) + 1))  # only the remaining texts ran
    assert_same_atlas(finished, one, tmp_path, one_out)
    assert_same_examples(tmp_path, one_out)


@pytest.mark.slow
def test_two_workers_sample_the_one_process_examples(local_ray, one_process, tmp_path):
    """Examples on the workers, a chunk of one text each (most chunks go out before the warmup has fixed the
    boundaries in the driver, the rest with them): the one-process sample, sequence for sequence."""
    folder, one_out, _, _ = one_process
    atlas_ray.build(str(folder), TEXTS, tmp_path, workers=2, chunk=1, examples=True, warmup=WARMUP)
    assert_same_examples(tmp_path, one_out)


@pytest.mark.slow
def test_the_command_line_with_two_workers_prints_the_same_json(local_ray, one_process, tmp_path, capsys):
    folder, one_out, _, _ = one_process
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    argv = ["atlas", "build", "--model", str(folder), "--texts", str(texts), "--out", str(tmp_path / "two"),
            "--workers", "2", "--no-detectors"]  # the one-process atlas compared with has none
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "2 workers on a local Ray" in err and f"texts {len(TEXTS)}/{len(TEXTS)}" in err
    assert main(["atlas", "metrics", "--atlas", str(tmp_path / "two"), "--json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert main(["atlas", "metrics", "--atlas", str(one_out), "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert_same_atlas(two, one, tmp_path / "two", one_out)
    assert_same_examples(tmp_path / "two", one_out)  # the command line samples examples on the workers too


@pytest.mark.slow
def test_a_source_the_workers_cannot_load_is_one_error(local_ray, tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a model directory") as caught:
        atlas_ray.build(str(tmp_path / "no-such-model"), TEXTS, tmp_path / "out", workers=1)
    assert "Traceback" not in str(caught.value)  # the worker's own error, not Ray's wrapper of it


def test_without_ray_workers_say_how_to_install_it(monkeypatch, tiny_llama, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    for flags in (["--workers", "2"], ["--ray-address", "127.0.0.1:6379"]):
        argv = ["atlas", "build", "--model", str(tiny_llama), "--texts", str(texts), "--out", str(tmp_path / "out"),
                *flags]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and 'pip install "attnviz[ray]"' in err, err
    assert not (tmp_path / "out").exists()  # refused before anything ran
    assert main(["atlas", "build", "--model", str(tiny_llama), "--texts", str(texts), "--out",
                 str(tmp_path / "one"), "--workers", "1"]) == 0  # one machine needs no Ray


class FakeWorker:
    """Answers at once: a text's sums are its length, so the order they come back in can be read."""

    def __init__(self, number: int, log: list) -> None:
        self.number, self.log, self.measure = number, log, self

    def remote(self, texts, seq_len, threshold):
        self.log.append(("sent", self.number, list(texts)))
        return [HeadSums(*(np.full((1, 1), float(len(t))) for _ in SUMS), positions=len(t)) for t in texts]


class FakeRay:
    class exceptions:  # noqa: N801 - ray's own spelling
        class RayTaskError(Exception):
            pass

    @staticmethod
    def get(ref):
        return ref


def test_chunks_go_to_the_least_busy_worker_and_come_back_in_text_order():
    """Without Ray: stand-in workers; the dispatch is what is checked."""
    log: list = []
    texts = [f"text {i}" * (i + 1) for i in range(11)]
    shards = atlas_ray.RayShards(FakeRay, [FakeWorker(k, log) for k in range(2)], info=None, chunk=2)
    got = []
    for text, part in shards.measure(iter(texts), 16, 0.01):
        log.append(("took", text))
        got.append((text, part))
    assert [text for text, _ in got] == texts  # text order, every text once
    assert [part.positions for _, part in got] == [len(t) for t in texts]
    sent = [entry for entry in log if entry[0] == "sent"]
    assert [worker for _, worker, _ in sent] == [0, 1, 0, 1, 0, 1]  # 6 chunks of at most 2, to the least busy
    assert [text for _, _, chunk in sent for text in chunk] == texts
    # 2 chunks per worker in flight, and the next one sent as the first comes back, before its texts are taken
    assert [entry[0] for entry in log[:6]] == ["sent"] * 5 + ["took"]
    with pytest.raises(ValueError, match="chunk"):
        atlas_ray.RayShards(FakeRay, [], info=None, chunk=0)


def test_the_ray_pin_is_one_pin():
    """pyproject.toml's ray extra, requirements-dev.txt (what the tests install) and the install hint agree."""
    import tomllib

    from tests.conftest import ROOT

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ray"]
    dev = [line.strip() for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
           if line.strip().startswith("ray")]
    assert extra == dev == [atlas_ray.RAY_PIN]
    app = [re.split(r"[\s=<>!~@;\[]", line.strip())[0].lower()
           for line in (ROOT / "requirements.txt").read_text().splitlines() if line.strip()[:1] not in ("", "#")]
    assert "torch" in app and "ray" not in app  # the app's install has no Ray
