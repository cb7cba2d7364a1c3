"""Shared fixtures, the reference-data rule and the test lanes.

Markers (README, "Run the tests"): `browser` (a real server and Chromium: tests/browser/), `apptest`
(Streamlit's AppTest: tests/ui/ and any test that builds one), `real_model` (a pretrained offline model:
MiniLM, SmolLM2 or Gemma 3, through a fixture or `require_offline`), `slow` (over about five seconds on 2
cores, marked by hand). The first three are set here from what a test uses, so a new test is marked
without anyone remembering to; the fast lane is `-m "not (browser or apptest or real_model or slow)"`.

A missing model package FAILS the test (require_offline). Reference data (UD treebanks, WinoBias,
BLiMP: not part of the repository) is read from one folder, `$ATTNVIZ_DATA_DIR`, default
`<repo>/../shared/data`. Where it is absent a test that needs it is skipped with the reason, and the
run ends with one line counting them; where the environment variable `CI` is set it fails instead.
Unit tests of the readers use the self-written files in tests/fixtures/ and always run.
"""

from __future__ import annotations

import inspect
import os
from functools import cache
from pathlib import Path

import pytest

import attnviz
from attnviz.analysis.reference_data import DATA_ENV, data_dir
from attnviz.loading.offline import install_hint, offline_path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
_NOT_FOUND = "reference data not found"  # how the summary hook recognises these skips


SHARED_DATA = data_dir()

# The app's memory budget is checked against this process's resident memory, and the test process also
# holds the session fixtures' models and every AppTest's: a public host's 2.5 GB would refuse models here
# that a real server has room for. Tests of the budget set their own; servers started by the browser
# tests get the app's default (tests/helpers/browser.py drops this setting from their environment).
TEST_PROCESS_BUDGET_GB = "16"
os.environ.setdefault("ATTNVIZ_MEMORY_BUDGET_GB", TEST_PROCESS_BUDGET_GB)
_absent: set[Path] = set()  # what this run looked for and did not find, for the summary line


def require_offline(model_id: str) -> Path:
    path = offline_path(model_id)
    if path is None:
        pytest.fail(f"model fixture {model_id} is not installed: {install_hint(model_id)}")
    return path


def require_data(relative: str = "") -> Path:
    """The path of `relative` inside the reference-data folder (the folder itself for ""). Skips the
    test when it is absent, or fails it when `CI` is set."""
    path = SHARED_DATA / relative if relative else SHARED_DATA
    if path.exists():
        return path
    missing = path if SHARED_DATA.is_dir() else SHARED_DATA
    reason = f"{_NOT_FOUND}: {missing} is absent (set {DATA_ENV})"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so missing reference data is a failure")
    _absent.add(missing)
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter):
    not_run = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and _NOT_FOUND in str(report.longrepr[-1])
    ]
    if not_run:
        paths = ", ".join(str(path) for path in sorted(_absent)) or str(SHARED_DATA)
        tests = "1 test that needs" if len(not_run) == 1 else f"{len(not_run)} tests that need"
        terminalreporter.write_line(
            f"{tests} the reference data were not run: {paths} absent (set {DATA_ENV})", yellow=True
        )


@pytest.fixture(scope="session")
def minilm():
    require_offline(MINILM)
    return attnviz.load(MINILM)


@pytest.fixture(scope="session")
def smollm():
    require_offline(SMOLLM)
    return attnviz.load(SMOLLM)


@pytest.fixture(scope="session")
def smollm_causal_reference(smollm):
    """HF's own eager causal LM on SmolLM2's weights (its GGUF dequantised by transformers: the slow part),
    loaded once for the parity, the sink and the patching tests."""
    import torch
    import transformers as tf

    path = Path(smollm.info.path)
    return tf.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager",
                                                   dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def smollm_reference(smollm_causal_reference):
    """HF's own eager base model on SmolLM2's weights (the causal LM's, without its head)."""
    return smollm_causal_reference.model


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    """A 4-layer random Llama (GQA, untied lm_head) with a byte-level BPE tokenizer, as from_pretrained saves it
    (the device-map and the reduced-views tests load it whole and split)."""
    import torch
    import transformers as tf

    from tests.helpers.tiny_tokenizers import bpe_tokenizer

    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = bpe_tokenizer(bos=True)
    config = tf.LlamaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=64, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                            max_position_embeddings=128, tie_word_embeddings=False, bos_token_id=0, pad_token_id=1)
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(config)
    with torch.no_grad():  # random init leaves norms at 1: make every tensor count
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    model.save_pretrained(folder, safe_serialization=True)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", pad_token="<pad>").save_pretrained(folder)
    return folder


# --- lanes ------------------------------------------------------------------------------------------------

# What in a test's source, or in the source of a fixture it uses, means it loads a pretrained offline model.
REAL_MODEL_SIGNS = ("require_offline(", "MINILM", "SMOLLM", "GEMMA", "all-MiniLM", "SmolLM2", "gemma-3")
APPTEST_SIGNS = ("AppTest",)


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # One torch thread per worker: the workers share the machine's cores, and two workers of two threads
        # each on two cores spend their time waiting on each other.
        import torch

        torch.set_num_threads(1)
    for name, what in (("browser", "starts a real server and drives Chromium"),
                       ("apptest", "runs app pages in Streamlit's AppTest"),
                       ("real_model", "loads a pretrained offline model (MiniLM, SmolLM2, Gemma 3)"),
                       ("slow", "takes more than about five seconds on 2 cores")):
        config.addinivalue_line("markers", f"{name}: {what}")


@cache
def _source(function) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def _uses(item, signs: tuple[str, ...]) -> bool:
    functions = [getattr(item, "function", None)]
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is not None:
        for name in fixtures.names_closure:
            functions += [definition.func for definition in fixtures.name2fixturedefs.get(name, ())]
    return any(sign in _source(function) for function in functions if function is not None for sign in signs)


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        if parts[0] == "browser":
            item.add_marker(pytest.mark.browser)
        if parts[0] == "ui" or _uses(item, APPTEST_SIGNS):
            item.add_marker(pytest.mark.apptest)
        if _uses(item, REAL_MODEL_SIGNS):
            item.add_marker(pytest.mark.real_model)
    # A parallel run (scripts/test.sh: -n 2 --dist loadfile) keeps a file on one worker, so its module fixtures
    # are built once. Files holding a slow test go first, so that the long ones overlap the many short ones
    # instead of running alone at the end (a stable sort: a file keeps its own order).
    slow_files = {item.fspath for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.fspath not in slow_files)
