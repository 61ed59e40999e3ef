"""vLLM itself runs pikv's connector (its scheduler, its workers, its CPU
attention backend), two engines on two nodes of a secure pikv cluster:
engine 1 precomputes the chunks of a RAG prompt and answers; engine 2
answers the same documents in another order, every chunk pulled P2P, and
computes only the question. In each reuse mode its answers are checked
against an independent float32 reference (transformers, the same
safetensors, the mode's mask and positions: tests/vllm/reference.py), and
against vLLM alone on the ordinary causal prompt and the other mode's
reference (real differences, so the check is no no-op)."""

import zlib

import pytest

from conftest import engine_settings, node_chunks, rag_prompt, run_engine
from reference import Reference, worst_difference

STEPS = 4
# vLLM's float32 CPU kernels against transformers' eager float32: the same
# math in another order.
F32_TOLERANCE = 1e-3


def answer_task(segments, max_tokens=STEPS):
    return {"op": "generate", "prompt": sum(segments, []),
            "segments": [len(s) for s in segments], "max_tokens": max_tokens}


def reordered(segments):
    """The documents in another order (system first, question last)."""
    return [segments[0]] + segments[-2:0:-1] + [segments[-1]]


# Each mode on a seeded geometry here and on real weights (SmolLM2, a
# Llama: test_vllm_real_weights.py); prefixed, the default, on two.
CASES = [("llama", "float32", "prefixed"), ("qwen3", "float32", "isolated"),
         ("gemma3", "float32", "prefixed"), ("llama", "bfloat16", "prefixed")]


@pytest.mark.parametrize("family,dtype,mode", CASES, ids=["-".join(c) for c in CASES])
def test_two_vllm_engines_share_chunks_and_answer_as_the_mode_reference(
        cluster, make_model, tmp_path, family, dtype, mode):
    model = make_model(family, dtype)
    segments = rag_prompt(seed=zlib.crc32(f"{family}{mode}".encode()), vocab=2048)
    other = reordered(segments)
    chunk_tokens = sum(len(s) for s in other[:-1])
    held_before = node_chunks(cluster, 1)

    one = run_engine(tmp_path, "engine1", model, dtype, engine_settings(cluster, 0, mode), [
        {"op": "precompute", "segments": segments},
        answer_task(segments),
        {"op": "generate", "prompt": sum(segments, []), "segments": None,
         "max_tokens": STEPS}])  # not chunked: vLLM alone, the ordinary causal prompt
    assert one["answers"][0]["computed"] == len(segments) - 1
    assert one["answers"][1]["num_cached_tokens"] == chunk_tokens
    assert one["answers"][2]["num_cached_tokens"] == 0

    two = run_engine(tmp_path, "engine2", model, dtype, engine_settings(cluster, 1, mode),
                     [answer_task(other)])
    answer = two["answers"][0]
    # vLLM's own counter: every token but the question's came from pikv.
    assert answer["num_cached_tokens"] == chunk_tokens
    # Every chunk came P2P (no Redis here) and node 2 keeps a copy.
    assert node_chunks(cluster, 1) - held_before == len(other) - 1

    ref = Reference(model)
    prompt = sum(other, [])
    lengths = [len(s) for s in other[:-1]]
    tokens, ref_lp = ref.greedy(prompt, lengths, chunk_tokens, STEPS, mode=mode)
    worst, compared = worst_difference(answer, ref_lp, len(prompt))
    print(f"\nexactness {family} {dtype} {mode} P2P: worst |dlogprob| {worst:.3g} over "
          f"{compared} values; greedy {answer['tokens']} vs reference {tokens}")
    assert compared >= STEPS * 5
    if dtype == "float32":
        assert worst < F32_TOLERANCE
        assert answer["tokens"] == tokens
    else:
        # bf16: vLLM computes in bf16 throughout; its distance from the fp32
        # reference is bounded by its distance on a prompt with no pikv in it.
        causal_lp = ref.logprobs(sum(segments, []) + one["answers"][2]["tokens"], [], 0)
        alone, _ = worst_difference(one["answers"][2], causal_lp, len(prompt))
        print(f"bf16: vLLM alone vs the reference on the causal prompt: {alone:.3g}")
        assert worst < max(2 * alone, 0.05)

    # Not a no-op: the causal prompt answers differently, and so does the
    # other mode's reference.
    full = sum(segments, []) + one["answers"][2]["tokens"]
    causal_worst, _ = worst_difference(one["answers"][2], ref.logprobs(full, [], 0), len(prompt))
    mode_lp = ref.logprobs(full, [len(s) for s in segments[:-1]], chunk_tokens, mode=mode)
    differs, _ = worst_difference(one["answers"][2], mode_lp, len(prompt))
    print(f"vLLM alone, causal prompt: vs causal reference {causal_worst:.3g}, vs the {mode} "
          f"reference {differs:.3g}")
    assert differs > 10 * max(causal_worst, F32_TOLERANCE if dtype == "float32" else 0.05)
    other_mode = "isolated" if mode == "prefixed" else "prefixed"
    if dtype == "float32":
        elsewise, _ = worst_difference(answer, ref.logprobs(
            prompt + answer["tokens"], lengths, chunk_tokens, mode=other_mode), len(prompt))
        assert elsewise > 10 * F32_TOLERANCE, f"the {other_mode} reference answers alike"


def test_a_salt_reuses_its_own_chunks_across_engines_and_no_other_salts(
        cluster, make_model, tmp_path):
    """vLLM's cache_salt inside vLLM itself (issue 55): under the engines'
    shared salt key, the chunks one engine precomputed for a salt are loaded
    by the other engine for that salt (P2P, the documents reordered), and by
    no request with another salt or none; what a salted request computes
    is stored in its own salt's scope."""
    model = make_model("llama", "float32")
    key = tmp_path / "salt.key"
    key.write_bytes(b"one salt key for these engines")
    segments = rag_prompt(seed=55, vocab=2048)
    other = reordered(segments)
    chunk_tokens = sum(len(s) for s in segments[:-1])

    def settings(node):
        return dict(engine_settings(cluster, node), **{"salt-key-file": str(key)})

    def salted(segs, salt):
        return dict(answer_task(segs), cache_salt=salt) if salt else answer_task(segs)

    one = run_engine(tmp_path, "salt1", model, "float32", settings(0), [
        {"op": "precompute", "segments": segments, "cache_salt": "alice"},
        salted(segments, "alice"), salted(segments, "bob"), salted(segments, None)])
    assert one["answers"][0]["computed"] == len(segments) - 1
    assert [a["num_cached_tokens"] for a in one["answers"][1:]] == [chunk_tokens, 0, 0]

    two = run_engine(tmp_path, "salt2", model, "float32", settings(1), [
        salted(other, "alice"), salted(other, "bob"), salted(other, "carol")])
    # alice: every chunk, pulled from engine 1's node; bob: the system prompt
    # bob's request stored on engine 1 (its next chunk, in this order, it
    # never computed); carol: nothing.
    assert [a["num_cached_tokens"] for a in two["answers"]] == [chunk_tokens, len(segments[0]),
                                                                0]
