"""attnviz.readouts.qkmap: the head's queries and keys, normalised as AttentionViz does, still give Hugging
Face eager's attention weights for that head (so the right vectors were taken and the normalisation changes no
weight); the 2-D map is the joint PCA (checked against numpy's eigendecomposition); a treebank's parts of speech
follow its words; the bounds refuse."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.analysis.conllu import parse_conllu_sentences
from attnviz.readouts import qkmap
from tests.helpers import tiny_hf
from tests.helpers.tiny_tokenizers import bpe_tokenizer

SENTENCES = ["The cat sat on the mat.", "A dog ran in the park, and the cat watched the dog.", "The keys are new."]
LAYER, HEAD = 1, 3  # head 3 reads key/value head 1 of 2


@pytest.fixture(scope="module")
def llama():
    return tiny_hf.tiny_decoder("llama", bpe_tokenizer(bos=True), seed=5, intermediate_size=37,
                                max_position_embeddings=128)


def test_normalised_vectors_give_hf_eager_weights(llama):
    model, hf = llama
    corpus = [qkmap.CorpusSentence(s) for s in SENTENCES]
    queries, keys, encodings, _ = qkmap.corpus_vectors(model, corpus, LAYER, HEAD, batch_size=2)
    q, k, scale = qkmap.normalise(queries, keys)
    assert scale != 1.0
    np.testing.assert_allclose((k * scale).mean(0), (q / scale).mean(0), atol=1e-9)  # translated, then scaled
    np.testing.assert_allclose(np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean(), rtol=1e-9)
    start = 0
    for enc in encodings:
        n = len(enc.ids)
        with torch.no_grad():
            ref = hf(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions[LAYER][0, HEAD].numpy()
        scores = q[start:start + n] @ k[start:start + n].T / np.sqrt(q.shape[1])
        scores[np.triu_indices(n, 1)] = -np.inf
        weights = np.exp(scores - scores.max(1, keepdims=True))
        weights /= weights.sum(1, keepdims=True)
        np.testing.assert_allclose(weights, ref, atol=1e-5)
        start += n
    assert start == len(queries)


def test_the_map_is_the_joint_pca(llama):
    model, _ = llama
    result = qkmap.qk_map(model, [qkmap.CorpusSentence(s) for s in SENTENCES], LAYER, HEAD)
    queries, keys, _, _ = qkmap.corpus_vectors(model, [qkmap.CorpusSentence(s) for s in SENTENCES], LAYER, HEAD)
    q, k, _ = qkmap.normalise(queries, keys)
    both = np.concatenate([q, k])
    values, vectors = np.linalg.eigh(np.cov(both.T, bias=True))
    top = vectors[:, ::-1][:, :2]
    expected = (both - both.mean(0)) @ top
    points = np.concatenate([result.query_points, result.key_points])
    np.testing.assert_allclose(np.abs(points), np.abs(expected), atol=1e-4)  # an axis's sign is free
    np.testing.assert_allclose(result.explained, values[::-1][:2] / values.sum(), rtol=1e-5)
    n = result.n_points
    assert result.query_points.shape == (n, 2) and n == len(result.tokens) == len(result.sentence)
    assert result.tokens[0] == "<s>" and result.position[0] == 0 and result.relative[0] == 0.0
    first = [i for i in range(n) if result.sentence[i] == 0]
    assert "".join(result.tokens[i] for i in first[1:]).replace(" ", "") == SENTENCES[0].replace(" ", "")
    assert result.relative[first[-1]] == 1.0


CONLLU = """# text = The cat sat.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

"""


def test_a_treebank_colours_tokens_by_their_words_part_of_speech(llama):
    model, _ = llama
    corpus = qkmap.treebank_corpus(parse_conllu_sentences(CONLLU))
    assert corpus[0].text == "The cat sat." and corpus[0].tags == ("DET", "NOUN", "VERB", "PUNCT")
    result = qkmap.qk_map(model, corpus, 0, 0)
    by_token = dict(zip(result.tokens, result.tags))
    assert by_token["<s>"] == "" and by_token["."] == "PUNCT"
    assert {by_token[t] for t in result.tokens if t.strip() in ("cat", "sat")} <= {"NOUN", "VERB"}


def test_bounds_and_bad_heads_are_refused(llama):
    model, _ = llama
    corpus = [qkmap.CorpusSentence(s) for s in SENTENCES]
    with pytest.raises(ValueError, match="at most 2"):
        qkmap.qk_map(model, corpus, 0, 0, max_sentences=2)
    with pytest.raises(ValueError, match="tokens: a map takes at most 5"):
        qkmap.qk_map(model, corpus, 0, 0, max_tokens=5)
    with pytest.raises(ValueError, match="no head"):
        qkmap.qk_map(model, corpus, 2, 0)
    assert len(qkmap.builtin_corpus("en")) >= 200  # the map the brief asks for: 200 built-in sentences


def test_the_figure_escapes_every_hover_and_colours_by_part_of_speech(llama):
    from attnviz import plots

    model, _ = llama
    corpus = [*qkmap.treebank_corpus(parse_conllu_sentences(CONLLU)), qkmap.CorpusSentence("<b>cat</b> & <i>x")]
    result = qkmap.qk_map(model, corpus, 0, 1)
    figure = plots.qk_map_figure(result, "pos")
    hovers = [h for trace in figure.data for h in trace.text]
    assert len(hovers) == 2 * result.n_points
    assert any("&lt;b&gt;" in h and "&amp;" in h for h in hovers)  # the sentence's own tags, shown as text
    for hover in hovers:  # the only markup left is the figure's own: the token in bold, the line break
        bare = hover.replace("<b>", "").replace("</b>", "").replace("<br>", "")
        assert "<" not in bare and ">" not in bare, hover
    assert {trace.name for trace in figure.data} >= {"query · NOUN", "key · NOUN", "query · –"}


def test_cli_json_gives_the_points_of_the_map(llama, monkeypatch, capsys):
    import json

    from attnviz.__main__ import main

    model, _ = llama
    monkeypatch.setattr("attnviz.load", lambda source: model)
    assert main(["qkmap", "--model", "tiny", "--layer", "1", "--head", "2", "--sentences", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = qkmap.qk_map(model, qkmap.builtin_corpus("en")[:4], 1, 2)
    assert len(out["sentences"]) == 4 and len(out["points"]) == expected.n_points
    np.testing.assert_allclose([p["query"] for p in out["points"]], expected.query_points, atol=1e-6)
    np.testing.assert_allclose([p["key"] for p in out["points"]], expected.key_points, atol=1e-6)
    assert [p["token"] for p in out["points"]] == list(expected.tokens)
