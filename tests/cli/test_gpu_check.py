"""scripts/gpu_check.py stays runnable: its CPU dry run on the tiny random models passes, and asking for
CUDA where there is none is a clear exit 2 (the full check runs on a lent GPU machine, not in CI)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
import transformers

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def global_settings_restored():
    """main() turns TF32 off and quietens transformers' logging: give other tests their settings back."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision(), transformers.logging.get_verbosity(),
             transformers.utils.logging.is_progress_bar_enabled())
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[0], saved[1]
    torch.set_float32_matmul_precision(saved[2])
    transformers.logging.set_verbosity(saved[3])
    if saved[4]:
        transformers.utils.logging.enable_progress_bar()


def test_cpu_dry_run_on_tiny_models_passes(gpu_check, global_settings_restored, tmp_path, capsys):
    assert gpu_check.main(["--device", "cpu", "--quick", "--tiny-only", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("PASS")
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert result["passed"] and result["device"] == "cpu" and not result["failed"]
    families = {row["model"] for row in result["parity"]}
    assert {"tiny/bert", "tiny/roberta", "tiny/distilbert", "tiny/gpt2", "tiny/llama-gqa", "tiny/qwen2"} <= families
    assert any(row["input"].startswith("padded batch") for row in result["parity"])
    assert all(row["attention"] <= 1e-5 and row["hidden"] <= 1e-4 for row in result["parity"])
    for row in result["bfloat16"]:  # measured, finite, and bfloat16-sized: not 0 against float32
        assert all(math.isfinite(d) for key in ("ours16_hf16", "ours16_fp32", "hf16_fp32") for d in row[key])
        assert 0 < row["ours16_fp32"][0] < 0.1
    assert result["bench"] == []  # --tiny-only: no pretrained model, no benchmark
    assert [(r["model"], r["split"]) for r in result["split"]] == [("tiny/llama-gqa", "cpu+disk")]
    assert all(r["ok"] and r["attention"] <= 1e-6 and r["gathered_on"] == "cpu" for r in result["split"])
    # section 6 runs every piece of work on the tiny Llama (on a GPU: the device against the CPU)
    assert {r["what"] for r in result["interventions"]} >= {"patching heads", "patching residual",
                                                            "attribution heads", "exact check, top 10",
                                                            "circuit edge scores", "circuit faithfulness",
                                                            "atlas metrics"}
    assert all(r["ok"] and r["model"] == "tiny llama (GQA)" for r in result["interventions"])


def test_cuda_asked_without_cuda_exits_2(gpu_check, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err
