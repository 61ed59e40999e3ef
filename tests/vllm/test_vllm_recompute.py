"""Recompute in place at load, inside vLLM itself (pikv.recompute): after
a request's documents are loaded, the policy's positions are computed
again with vLLM's own modules (the model handed over by pikv's plugin,
which vLLM starts) before vLLM computes the question. Checked against the
independent reference given the same positions (tests/vllm/reference.py),
beside the plain load's reference (a real difference); the reference
itself is checked at its two ends (nothing recomputed: the mode; every
document token recomputed: full prefill). A model recompute does not
drive, or a worker without the plugin, gets the plain load, counted by
reason on vLLM's metrics."""

import gc
import math

import torch

from pikv import vllm_plugin

from conftest import engine_settings, rag_prompt, run_engine
from reference import Reference, assert_exact
from test_vllm_e2e import F32_TOLERANCE, STEPS, answer_task, reordered


def first_positions(segments, ratio):
    """`first` from its definition: the first ceil(ratio * n) tokens (at
    least one) of each document."""
    out, at = [], len(segments[0])
    for seg in segments[1:-1]:
        out += range(at, at + min(len(seg), max(1, math.ceil(ratio * len(seg)))))
        at += len(seg)
    return out


class _Attention(torch.nn.Module):
    pass


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([_Attention(), _Attention()])


class _CausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = _Inner()

    def compute_logits(self, hidden):
        return hidden


def test_the_plugin_hands_over_the_model_holding_the_attention_layers_only():
    vllm_plugin.register()
    vllm_plugin.register()  # vLLM may load plugins twice
    assert vllm_plugin.registered()
    one, two = _CausalLM(), _CausalLM()
    plain = torch.nn.Sequential(_Inner())  # computes no logits: not remembered
    assert vllm_plugin.model_owning(list(two.model.layers)) is two
    assert vllm_plugin.model_owning(list(one.model.layers)) is one
    assert vllm_plugin.model_owning([one.model.layers[0], two.model.layers[1]]) is None
    assert vllm_plugin.model_owning(list(plain[0].layers)) is None
    assert vllm_plugin.model_owning([]) is None
    layers = list(one.model.layers)
    del one
    gc.collect()
    assert vllm_plugin.model_owning(layers) is None  # held weakly


def settings(cluster, node, recompute):
    return dict(engine_settings(cluster, node, "prefixed"), recompute=recompute)


def test_the_reference_recomputing_every_document_token_is_full_prefill(make_model):
    model = make_model("llama", "float32")
    segments = rag_prompt(seed=7, vocab=2048)
    prompt = sum(segments, [])
    lengths = [len(s) for s in segments[:-1]]
    open_from = sum(lengths)
    ref = Reference(model)
    causal = ref.logprobs(prompt, [], 0)
    every = list(range(lengths[0], open_from))
    whole = ref.logprobs(prompt, lengths, open_from, mode="prefixed", recompute=every)
    none = ref.logprobs(prompt, lengths, open_from, mode="prefixed", recompute=[])
    plain = ref.logprobs(prompt, lengths, open_from, mode="prefixed")
    q = slice(open_from, None)
    assert (whole[q] - causal[q]).abs().max() < 1e-4
    assert (none[q] - plain[q]).abs().max() == 0
    assert (plain[q] - causal[q]).abs().max() > 1e-2


def test_first_tokens_recomputed_in_place_answer_as_the_reference(cluster, make_model, tmp_path):
    family = "qwen3"  # its q and k norms; Llama's layers run in the TP and blend tests
    model = make_model(family, "float32")
    segments = rag_prompt(seed=70, vocab=2048)
    other = reordered(segments)
    chunk_tokens = sum(len(s) for s in segments[:-1])
    one = run_engine(tmp_path, f"{family}-r1", model, "float32", settings(cluster, 0, "none"),
                     [{"op": "precompute", "segments": segments}])
    assert one["answers"][0]["computed"] == len(segments) - 1
    two = run_engine(tmp_path, f"{family}-r2", model, "float32",
                     settings(cluster, 1, "first:0.2"), [answer_task(other), {"op": "metrics"}])
    answer, metrics = two["answers"]
    assert answer["num_cached_tokens"] == chunk_tokens
    positions = first_positions(other, 0.2)
    assert metrics["vllm:pikv_recomputed_tokens"] == len(positions)

    assert_exact(Reference(model), answer, other, STEPS, F32_TOLERANCE,
                 f"recompute first:0.2 {family} P2P", mode="prefixed", recompute=positions)


def test_blend_recomputes_its_share_and_a_model_it_cannot_drive_falls_back_counted(
        cluster, make_model, tmp_path):
    llama, gemma = make_model("llama", "float32"), make_model("gemma3", "float32")
    segments = rag_prompt(seed=71, vocab=2048)
    chunk_tokens = sum(len(s) for s in segments[:-1])
    # A request may name its own policy (or none); one it misnames gets
    # the plain load, counted.
    own = [dict(answer_task(segments), params={"pikv_recompute": p}) for p in
           ("none", "first:0.5", "sometimes")]
    blended = run_engine(tmp_path, "blend", llama, "float32", settings(cluster, 0, "blend:0.15"), [
        {"op": "precompute", "segments": segments}, answer_task(segments), {"op": "metrics"}]
        + own + [{"op": "metrics"}])
    answer, metrics, plain, half, misnamed, after = blended["answers"][1:]
    assert answer["num_cached_tokens"] == chunk_tokens
    want = sum(max(1, math.ceil(0.15 * len(s))) for s in segments[1:-1])
    assert metrics["vllm:pikv_recomputed_tokens"] == want
    assert metrics["vllm:pikv_selection_tokens"] > 0
    assert not any(k.startswith("vllm:pikv_recompute_fallbacks") and v for k, v in
                   metrics.items())
    halves = sum(math.ceil(0.5 * len(s)) for s in segments[1:-1])
    assert after["vllm:pikv_recomputed_tokens"] == want + halves
    assert after["vllm:pikv_recompute_fallbacks:malformed"] == 1
    assert plain["tokens"] == misnamed["tokens"]  # both the plain load

    plain = run_engine(tmp_path, "gemma", gemma, "float32", dict(
        settings(cluster, 0, "first:0.2"), **{"distance-buckets": "none"}), [
        {"op": "precompute", "segments": segments}, answer_task(segments), {"op": "metrics"}])
    answer, metrics = plain["answers"][1:]
    assert answer["num_cached_tokens"] == chunk_tokens
    assert metrics["vllm:pikv_recompute_fallbacks:unsupported_model"] >= 1
    assert metrics.get("vllm:pikv_recomputed_tokens", 0) == 0
    assert torch.isfinite(torch.tensor(list(answer["logprobs"][0].values()))).all()


def test_a_tp2_engine_recomputes_each_ranks_heads_at_the_same_positions(cluster, make_model,
                                                                        tmp_path):
    """vLLM's worker processes each start pikv's plugin: at TP 2 every rank
    recomputes its heads at the same positions (vLLM's layers meet in their
    collectives), and the answer is the reference's given them."""
    model = make_model("llama", "float32")  # 2 KV heads: one per rank
    segments = rag_prompt(seed=72, vocab=2048)
    other = reordered(segments)
    chunk_tokens = sum(len(s) for s in segments[:-1])
    one = run_engine(tmp_path, "tp-r1", model, "float32", settings(cluster, 0, "none"),
                     [{"op": "precompute", "segments": segments}])
    assert one["answers"][0]["computed"] == len(segments) - 1
    two = run_engine(tmp_path, "tp-r2", model, "float32", settings(cluster, 1, "first:0.2"),
                     [answer_task(other), {"op": "metrics"}],
                     engine={"tensor_parallel_size": 2}, in_process=False)
    answer, metrics = two["answers"]
    assert answer["num_cached_tokens"] == chunk_tokens
    positions = first_positions(other, 0.2)
    assert metrics["vllm:pikv_recomputed_tokens"] == len(positions)  # rank 0 reports
    assert_exact(Reference(model), answer, other, STEPS, F32_TOLERANCE,
                 "recompute first:0.2 at TP 2", distinct=False, mode="prefixed",
                 recompute=positions)
