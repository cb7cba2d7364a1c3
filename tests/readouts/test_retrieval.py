"""Retrieval heads (Wu et al. 2024): the score's definition on hand-made argmax records, a hand-built decoder
whose layer-0 head 0 provably copies the needle while head 1 attends inside the needle to the wrong token
(scores exactly 1 and 0), and SmolLM2 on one short needle prompt."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from attnviz.analysis.retrieval import answer_found, copy_events, mean_scores, retrieval_scores, top_heads
from attnviz.attention_kinds.decoding import greedy_decode
from attnviz.loading.random_model import byte_tokenizer
from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.probesets.needles import NEEDLES, Needle
from attnviz.readouts import retrieval as needle_work
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.model import Transformer

# Filler tokens of the SmolLM2 test: it answers the vault number's needle there (benchmarks/retrieval_heads.py).
SMOLLM_FILLER = 100


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: on a shared 2-core host two threads spin against each other (the hand-built model's
    decoding took 25 s with two, 1.9 s with one); the app does the same (workbench/shelf.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- the definition on recorded argmax positions ---------------------------------------------------------

PROMPT = np.array([5, 6, 7, 8, 9, 6, 3])  # the needle is [1, 4): tokens 6, 7, 8; token 6 also at 5


def test_copy_needs_the_key_inside_the_needle_and_holding_the_generated_token():
    generated = np.array([6, 7, 8])
    keys = np.zeros((3, 1, 4), dtype=np.int64)
    keys[:, 0, 0] = [1, 2, 3]  # head 0: on the needle token being generated, each step
    keys[:, 0, 1] = [5, 5, 5]  # head 1: token 6 outside the needle (step 0 generates 6: still no copy)
    keys[:, 0, 2] = [2, 3, 1]  # head 2: inside the needle, always the wrong token
    keys[:, 0, 3] = [1, 1, 3]  # head 3: copies 6 at step 0 and 8 at step 2
    copied = copy_events(keys, generated, PROMPT, (1, 4))
    assert copied[:, 0].tolist() == [[True, False, False, True], [True, False, False, False],
                                     [True, False, False, True]]
    np.testing.assert_array_equal(retrieval_scores(keys, generated, PROMPT, (1, 4)), [[1.0, 0.0, 0.0, 2 / 3]])


def test_a_needle_position_copied_twice_counts_once():
    """|g_h ∩ k| / |k| counts needle tokens, not steps: a reply that repeats a token does not pass 1."""
    generated = np.array([6, 6, 6, 7, 8])
    keys = np.array([1, 1, 1, 2, 3]).reshape(5, 1, 1)
    assert retrieval_scores(keys, generated, PROMPT, (1, 4)).tolist() == [[1.0]]
    assert retrieval_scores(keys[:3], generated[:3], PROMPT, (1, 4)).tolist() == [[pytest.approx(1 / 3)]]


def test_no_steps_and_bad_inputs():
    assert retrieval_scores(np.zeros((0, 2, 3), dtype=int), np.zeros(0, dtype=int), PROMPT, (1, 4)).shape == (2, 3)
    with pytest.raises(ValueError):
        retrieval_scores(np.zeros((2, 1, 1), dtype=int), np.zeros(3, dtype=int), PROMPT, (1, 4))
    for span in ((3, 3), (-1, 2), (2, 8)):
        with pytest.raises(ValueError):
            retrieval_scores(np.zeros((1, 1, 1), dtype=int), np.zeros(1, dtype=int), PROMPT, span)


def test_mean_over_answered_prompts_and_top_heads():
    grids = [np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[0.5, 0.5]])]
    np.testing.assert_array_equal(mean_scores(grids, [True, False, True]), [[0.75, 0.25]])
    assert mean_scores(grids, [False] * 3) is None
    assert top_heads(np.array([[0.1, 0.9, 0.5], [0.9, 0.0, 0.2]]), 3) == [(0, 1), (1, 0), (0, 2)]


def test_answer_found_is_exact_up_to_case_and_spacing():
    assert answer_found("blue pineapple", " The password is Blue  pineapple.")
    assert not answer_found("blue pineapple", " blue apple")
    assert not answer_found("  ", "anything")


# --- a hand-built copying head ---------------------------------------------------------------------------

VOCAB = 259  # the byte tokenizer: 256 bytes and three specials
HAND_NEEDLE = Needle("The code is QWERTY.", "Code?", "QWERTY")  # no byte follows itself: see head 1


def hand_built_copier(prompt_len: int, needle_start: int, positions: int) -> LoadedModel:
    """A 1-layer GPT-2-style decoder (pre-norm, learned positions), every weight 0 but these (norm gains 1):

    - the residual stream is [token one-hot (VOCAB) | position one-hot (positions) | copy slot (VOCAB)];
    - head 0's query at position p reads the one-hot of p - D, D = prompt_len - 1 - needle_start, and its
      key the one-hot of the key's own position, so its largest score is at key p - D exactly (LayerNorm
      shifts every one-hot entry by the same constant, which moves q.k by at most 2/width elsewhere);
      its value reads the token one-hot and the output writes it into the copy slot;
    - the LM head reads the copy slot, so the model generates x[p - D]: from the prompt's last position on,
      the needle, token by token, while head 0 attends to that very token;
    - head 1's query reads p - D + 1 (the needle's next token: inside the needle, a different byte) and its
      value and output are 0: it attends into the needle but never copies."""
    width = 2 * VOCAB + positions
    config = ModelConfig(family="gpt2", vocab_size=VOCAB, d_model=width, n_layers=1, n_heads=2, d_ff=8,
                         causal=True, norm_eps=1e-5, norm_placement="pre", activation="gelu_tanh",
                         max_positions=positions, lm_head=True)
    module = Transformer(config)
    head_dim = width // 2
    offset = prompt_len - 1 - needle_start
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.fill_(1.0 if "norm" in name and name.endswith("weight") else 0.0)
        module.token_embedding.weight[:, :VOCAB] = torch.eye(VOCAB)
        module.position_embedding.weight[:, VOCAB:VOCAB + positions] = torch.eye(positions)
        attn = module.blocks[0].attn
        for head, shift in ((0, offset), (1, offset - 1)):
            rows = torch.arange(positions - shift) + head * head_dim  # q[d] = position one-hot[d + shift]
            attn.q_proj.weight[rows, VOCAB + shift + torch.arange(positions - shift)] = 4.0
            attn.k_proj.weight[head * head_dim + torch.arange(positions), VOCAB + torch.arange(positions)] = 1.0
        attn.v_proj.weight[torch.arange(VOCAB), torch.arange(VOCAB)] = 1.0  # head 0's value: the token
        attn.o_proj.weight[VOCAB + positions + torch.arange(VOCAB), torch.arange(VOCAB)] = 10.0
        module.lm_head.weight[torch.arange(VOCAB), VOCAB + positions + torch.arange(VOCAB)] = 1.0
    module.eval()
    info = ModelInfo.describe(module, "hand-built copier", "(test)", "gpt2", positions)
    return LoadedModel(module, byte_tokenizer(), info, {"pad_token": "[PAD]"})


def test_hand_built_copying_head_scores_one_and_the_other_zero():
    positions = 256
    probe = hand_built_copier(8, 0, positions)  # only its tokenizer, to lay out the prompt
    prompt = needle_work.build_prompt(probe, HAND_NEEDLE, haystack_tokens=30, depth=0.5,
                                      haystack=("Filler text.", "More of it!"))
    start, end = prompt.span
    assert prompt.ids[0] == 256 and start > 1  # the tokenizer's [CLS] first, filler before the needle
    assert probe.tokenizer.decode(list(prompt.ids[start:end])) == " " + HAND_NEEDLE.sentence
    model = hand_built_copier(prompt.n_tokens, start, positions)
    run = needle_work.run_needle(model, prompt)
    needle_len = end - start
    assert run.generated[:needle_len] == list(prompt.ids[start:end])  # the model copies the needle
    assert run.answered and run.continuation.startswith(" " + HAND_NEEDLE.sentence)
    assert run.scores.shape == (1, 2)
    assert run.scores[0].tolist() == [1.0, 0.0]
    # head 1's strongest key does lie inside the needle while the needle is generated: only the token differs
    _, keys = needle_work.decode_recording_argmax(model, prompt.ids, needle_len)
    assert ((keys[: needle_len - 1, 0, 1] >= start) & (keys[: needle_len - 1, 0, 1] < end)).all()
    assert keys[:, 0, 0].tolist() == list(range(start, end))
    plain = greedy_decode(model.module, torch.tensor([list(prompt.ids)]), len(run.generated), use_cache=False)
    assert plain[0, prompt.n_tokens:].tolist() == run.generated  # the same tokens as decoding without a cache
    result = needle_work.retrieval_heads(model, [prompt, prompt])
    assert result.n_answered == 2 and result.grid.tolist() == [[1.0, 0.0]]


def test_switching_the_copying_head_off_loses_the_needle():
    positions = 256
    probe = hand_built_copier(8, 0, positions)
    prompt = needle_work.build_prompt(probe, HAND_NEEDLE, haystack_tokens=0)
    model = hand_built_copier(prompt.n_tokens, prompt.span[0], positions)
    comparison = needle_work.ablation_comparison(model, [prompt], np.array([[1.0, 0.0]]), 1, seeds=(0,))
    assert comparison.top == [(0, 0)] and comparison.random == [[(0, 1)]]
    assert comparison.answered_all_on == [True] and comparison.answered_top_off == [False]
    assert comparison.answered_random_off == [[True]] and comparison.random_rate == 1.0


def test_random_heads_are_seeded_and_exclude_the_top():
    a = needle_work.random_heads(30, 9, 5, seed=3, exclude=[(0, 0), (1, 1)])
    assert a == needle_work.random_heads(30, 9, 5, seed=3, exclude=[(0, 0), (1, 1)])
    assert len(set(a)) == 5 and not {(0, 0), (1, 1)} & set(a)
    assert a != needle_work.random_heads(30, 9, 5, seed=4, exclude=[(0, 0), (1, 1)])
    with pytest.raises(ValueError):
        needle_work.random_heads(1, 2, 2, seed=0, exclude=[(0, 0)])


# --- SmolLM2 ---------------------------------------------------------------------------------------------


def test_smollm2_retrieval_grid_on_one_short_needle(smollm):
    """The vault number's needle in a short haystack: SmolLM2 answers it, few heads copy from the needle, and
    the argmax keys recorded step by step with the KV cache are those of one full pass over the same tokens."""
    prompt = needle_work.build_prompt(smollm, NEEDLES[2], haystack_tokens=SMOLLM_FILLER)
    started = time.process_time()
    generated, keys = needle_work.decode_recording_argmax(smollm, prompt.ids, needle_work.max_new_tokens_for(prompt))
    assert time.process_time() - started < 60  # a few seconds alone; a shared 2-core host is slower
    continuation = smollm.tokenizer.decode(generated, skip_special_tokens=True)
    assert answer_found(NEEDLES[2].answer, continuation), continuation
    grid = retrieval_scores(keys, generated, prompt.ids, prompt.span)
    assert grid.shape == (30, 9) and ((grid >= 0) & (grid <= 1)).all()
    assert grid.max() > 0.2  # the answer's tokens are copied by some head
    assert (grid > 0.1).mean() < 0.2  # ... by few of them (Wu et al.: under 5% of heads are retrieval heads)

    with torch.inference_mode():
        full = smollm.module(torch.tensor([list(prompt.ids) + generated[:-1]]))
    rows = full.attentions[:, 0, :, prompt.n_tokens - 1:].argmax(-1).permute(2, 0, 1).numpy()  # steps, L, H
    assert rows.shape == keys.shape
    assert (rows == keys).mean() > 0.99  # a near tie may flip between the two summation orders
    assert full.logits[0, prompt.n_tokens - 1:].argmax(-1).tolist() == generated
