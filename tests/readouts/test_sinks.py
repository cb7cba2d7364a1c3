"""attnviz.readouts.sinks against an independent computation from Hugging Face eager's
`output_attentions=True`, one text at a time (no padding): a tiny random Llama with BOS, a tiny GPT-2 without,
and SmolLM2 offline; the key geometry against numpy on our own unbatched records; the CLI's JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnviz.__main__ import main
from attnviz.readouts import sinks
from tests.helpers import tiny_hf
from tests.helpers.tiny_tokenizers import bpe_tokenizer

TEXTS = [  # different lengths, so a batch is padded
    "The cat sat on the mat.",
    "A dog ran in the park, and the cat watched the dog from the wall. The keys are new.",
    "The cabinet is old.",
    "Cats like mats and dogs like parks; the cabinet is old and the keys to it are on the table.",
]


def hf_means(hf, model, texts, max_tokens=None):
    """[L, H] float64: for each text alone, HF eager's weight on position 0 averaged over rows 1.., then over
    the texts."""
    per_text = []
    for text in texts:
        ids = model.encode(text, max_tokens=max_tokens).ids
        with torch.no_grad():
            out = hf(input_ids=torch.tensor([ids]), output_attentions=True)
        a = torch.stack(out.attentions)[:, 0].double()  # L, H, T, T
        per_text.append(a[:, :, 1:, 0].mean(-1).numpy())
    return np.mean(per_text, axis=0)


def reference_ratio(means, epsilon):
    return sum(v >= epsilon for v in means.ravel()) / means.size


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def decoder(request):
    return tiny_hf.tiny_decoder(request.param, bpe_tokenizer(bos=request.param == "llama"), seed=3,
                                intermediate_size=37, max_position_embeddings=128)


def test_means_and_ratio_equal_hf_eager_on_tiny_decoders(decoder):
    model, hf = decoder
    means = sinks.first_token_means(model, TEXTS, batch_size=3)  # two batches, both padded
    reference = hf_means(hf, model, TEXTS)
    np.testing.assert_allclose(means, reference, atol=1e-5, rtol=0)
    for epsilon in (0.1, 0.3, float(np.median(reference))):
        assert sinks.sink_ratio(means, epsilon) == reference_ratio(reference, epsilon)


def test_key_geometry_equals_unbatched_records(decoder):
    model, _ = decoder
    anatomy = sinks.sink_anatomy(model, TEXTS, batch_size=4)
    kv = model.module.kv_group
    first, other, cosine, mass = [], [], [], []
    for text in TEXTS:
        rec = model.record(text, names=("queries", "keys", "attentions"))
        q, k = rec["queries"].astype(np.float64), rec["keys"][:, kv].astype(np.float64)  # L, H, T, D
        norms = np.linalg.norm(k, axis=-1)
        first.append(norms[..., 0])
        other.append(norms[..., 1:].mean(-1))
        dots = (q[:, :, 1:] * k[:, :, :1]).sum(-1)
        cosine.append((dots / (np.linalg.norm(q[:, :, 1:], axis=-1) * norms[..., :1])).mean(-1))
        mass.append((1 - rec["attentions"][:, :, 1:].astype(np.float64).sum(-1)).mean(-1))
    for got, want in [(anatomy.first_key_norm, first), (anatomy.other_key_norm, other),
                      (anatomy.query_cosine, cosine)]:
        np.testing.assert_allclose(got, np.mean(want, axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(anatomy.sink_mass, np.mean(mass, axis=0), atol=1e-6)
    assert np.abs(anatomy.sink_mass).max() < 1e-5  # no learned sink in these families
    assert (anatomy.n_texts, anatomy.skipped) == (len(TEXTS), 0)


def test_smollm_means_equal_hf_eager(smollm, smollm_reference):
    reference_model = smollm_reference  # HF eager from the offline GGUF, shared with the parity tests
    texts = [*TEXTS[:2], sinks.builtin_texts()[0]]
    means = sinks.first_token_means(smollm, texts, max_tokens=sinks.TEXT_TOKENS)
    reference = hf_means(reference_model, smollm, texts, max_tokens=sinks.TEXT_TOKENS)
    np.testing.assert_allclose(means, reference, atol=1e-5, rtol=0)
    assert sinks.sink_ratio(means) == reference_ratio(reference, 0.3)
    assert 0 < sinks.sink_ratio(means) < 1  # SmolLM2 has sink heads and others


def test_one_token_texts_are_left_out_and_bad_input_refused(decoder):
    model, _ = decoder
    single = len(model.encode("a").ids) == 1  # GPT-2's tokenizer adds no BOS: "a" is one token
    anatomy = sinks.sink_anatomy(model, ["a", TEXTS[0]])
    assert (anatomy.n_texts, anatomy.skipped) == ((1, 1) if single else (2, 0))
    if single:
        with pytest.raises(ValueError, match="single token"):
            sinks.first_token_means(model, ["a"])
    with pytest.raises(ValueError, match="empty"):
        sinks.first_token_means(model, ["ok", "  "])
    with pytest.raises(ValueError, match="epsilon"):
        sinks.sink_ratio(np.zeros((2, 2)), 1.5)


def test_builtin_texts_reach_64_tokens(smollm):
    lengths = [len(e.ids) for e in sinks.encode_texts(smollm, sinks.builtin_texts())]
    assert len(lengths) >= 20 and min(lengths) >= sinks.TEXT_TOKENS - 8


def test_cli_json_has_the_interface_fields(decoder, monkeypatch, tmp_path, capsys):
    model, hf = decoder
    monkeypatch.setattr("attnviz.load", lambda source: model)
    path = tmp_path / "texts.txt"
    path.write_text(TEXTS[0] + "\n\n" + TEXTS[1] + "\n", encoding="utf-8")
    assert main(["sinks", "--model", "tiny", "--texts", str(path), "--epsilon", "0.25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    reference = hf_means(hf, model, [TEXTS[0], TEXTS[1]])
    assert out["epsilon"] == 0.25 and out["n_texts"] == 2
    np.testing.assert_allclose(out["heads"], reference, atol=1e-5)
    assert out["ratio"] == sinks.sink_ratio(np.array(out["heads"]), 0.25)
    for name in ("first_key_norm", "other_key_norm", "query_cosine", "sink_mass"):
        assert np.shape(out[name]) == (2, 4)
