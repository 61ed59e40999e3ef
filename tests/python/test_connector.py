"""pikv's Python package and vLLM connector, on a real cluster (a controller,
two pikv-nodes, Redis), driven by the torch engine stand-in in the order vLLM
calls a connector."""

import math
import os
import random
import time
import zlib
from types import SimpleNamespace

import pytest
import torch

import pikv
from conftest import CONFIGS, Cluster
from pikv.connector import ConnectorCore, NotChunked, RequestPlan, StoredForm, split_segments
from pikv.vllm import precompute
from standin_engine import StandInModel, StandInVllm, small_config

LAYOUTS = ["flash", "block_major", "hnd"]
MODELS = ["llama-3.2-1b.json", "qwen2.5-7b-instruct-yarn.json"]
# Models whose layers differ (their own RoPE per layer, or none), with enough
# layers to hold every kind: Gemma-3's five local layers and a global one;
# Llama-4's three chunked RoPE layers and a NoPE one.
PER_LAYER_MODELS = [("gemma-3-1b-it.json", 6), ("llama-4-scout-17b-16e-instruct.json", 4)]


def make_model(tmp_path, config, kv_dtype, layers=2):
    model_dir = str(tmp_path / "model")
    path = small_config(os.path.join(CONFIGS, config), model_dir, layers=layers)
    return StandInModel(path, kv_dtype), model_dir


def tokens_for(model, seed):
    rng = random.Random(seed)
    return lambda n: [rng.randrange(model.vocab) for _ in range(n)]


def wait_until_located(cluster, core, segments, timeout=10.0):
    """Until the controller lists a holder for each segment's chunk: a node
    reports what it admitted asynchronously, as it would in production."""
    keys = [core.client.key_of(s) for s in segments]
    admin, deadline = cluster.admin(), time.monotonic() + timeout
    while not all(k["locations"] for k in admin.locate(keys)["keys"]):
        assert time.monotonic() < deadline, "the controller never learned of the saved chunks"
        time.sleep(0.02)


def audits(core):
    """(hits audited, of those found wrong), as the core's client counted them."""
    stats = core.client.stats()
    return stats["audits"], stats["audit_mismatches"]


SAVE = {"pikv_save": True}


def settings(cluster, node, model_id, **more):
    # Isolated: the stand-in's scratch reference is the chunk-isolated mask.
    # A plan waits for locate as long as it takes: on a loaded test machine
    # a late answer must not turn a peer hit into a miss (the budget's own
    # tests: tests/client/client_cluster_test.cc).
    s = {"local-node": cluster.nodes[node]["ipc"], "controller": cluster.controller,
         "model-id": model_id, "attention-mode": "isolated", "locate-budget": "200ms"}
    s.update(cluster.security_settings())
    s.update(more)
    return s


@pytest.mark.parametrize("config", MODELS)
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_chunks_saved_by_one_engine_answer_on_another_as_from_scratch(cluster, tmp_path, layout,
                                                                       kv_dtype, config):
    reuse_across_engines(cluster, tmp_path, layout, kv_dtype, config)


# pikv.device (the engine's own torch, what runs on a GPU or NPU) forced on
# CPU tensors: saves and loads through it answer as the C++ path does.
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["flash", "hnd"])
def test_the_torch_device_path_answers_as_from_scratch(cluster, tmp_path, layout, kv_dtype):
    reuse_across_engines(cluster, tmp_path, layout, kv_dtype, "llama-3.2-1b.json", path="torch")


@pytest.mark.parametrize("path", ["cpp", "torch"])
@pytest.mark.parametrize("config,layers", PER_LAYER_MODELS)
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_models_whose_layers_differ_reuse_exactly(cluster, tmp_path, kv_dtype, config, layers,
                                                  path):
    model = reuse_across_engines(cluster, tmp_path, "flash", kv_dtype, config, layers, path)
    kinds = {None if layer["rope"] is None else layer["rope"]["rope_theta"] for layer in model.w}
    assert len(kinds) == 2, "the stand-in has layers of both kinds"


def reuse_across_engines(cluster, tmp_path, layout, kv_dtype, config, layers=2, path="auto"):
    """Engine 1 saves every segment; engine 2, on the other node, loads them
    in another order beside a new system prompt, computes only the question,
    and answers as from scratch under the isolated mask. `path`: the
    connector's (cpp, torch, or auto)."""
    model, model_dir = make_model(tmp_path, config, kv_dtype, layers)
    model_id = f"standin-{layout}-{kv_dtype}-{config}-{path}"
    t = tokens_for(model, zlib.crc32(model_id.encode()))
    sys1, d1, d2, d3, sys2, q = t(21), t(37), t(18), t(29), t(25), t(7)

    # Engine 1 computes each segment alone (from position 0) and saves it.
    e1 = StandInVllm(model, model_dir, settings(cluster, 0, model_id, path=path), layout)
    assert precompute(e1.generate, e1.scheduler.core, [sys1, d1, d2, d3, q]) == 4
    wait_until_located(cluster, e1.scheduler.core, [sys1, d1, d2, d3])

    # Engine 2, on the other node: only sys2 is missing; it is computed first.
    e2 = StandInVllm(model, model_dir, settings(cluster, 1, model_id, path=path), layout)
    segments = [sys2, d3, d1, q]
    assert precompute(e2.generate, e2.scheduler.core, segments) == 1
    stats = e2.scheduler.core.client.stats()  # d3 and d1 come from node 1 or the shared Redis
    assert stats["planned_peer"] + stats["planned_remote"] == 2 and stats["planned_miss"] == 1

    prompt = sum(segments, [])
    lengths = [len(s) for s in segments]
    logits, provided = e2.run(prompt, {"pikv_segments": lengths})
    assert provided == len(prompt) - len(q), "every chunk before the question is loaded"
    assert logits.shape[0] == len(q), "only the question is computed"

    want = model.forward_scratch(lengths)(prompt)[-len(q):]
    err = (logits - want).abs().max().item()
    scale = want.abs().max().item()
    # The same prompt as one causal segment: what the isolated mask changes.
    causal = model.forward_scratch([sum(lengths[:-1]), lengths[-1]])(prompt)[-len(q):]
    causal_err = (causal - want).abs().max().item()
    print(f"{layout} {kv_dtype} {config}: max |logit error| {err:.3g} at scale {scale:.3g}; "
          f"causal instead of isolated: {causal_err:.3g}")  # pytest -s shows the figures
    assert causal_err > 10 * err, "the check could not tell isolated from causal"
    if kv_dtype == torch.float32:
        assert err <= 1e-4, f"max |logit error| {err:.3g}"
    else:
        # Loaded K was rounded to bf16 twice (stored at 0, re-rotated), the
        # scratch K once: within one bf16 ulp of the logits' scale (measured:
        # 0.002-0.003 at scale 3-4, where an ulp is 0.016 and the causal mask
        # instead of the isolated one is off by 0.3).
        ulp = 2.0 ** (math.floor(math.log2(scale)) - 7)
        assert err <= ulp, f"max |logit error| {err:.3g} at scale {scale:.3g}"
    assert e2.worker.core.stats.errors == 0 and e2.scheduler.core.stats.errors == 0
    assert (e2.worker.core._device is not None) == (path == "torch")
    return model


def test_a_miss_in_the_middle_reports_only_the_prefix(cluster, tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 7)
    sys, d1, gone, d2, q = t(20), t(30), t(17), t(19), t(5)
    e = StandInVllm(model, model_dir, settings(cluster, 0, "standin-miss"), "flash")
    e.generate([(seg, SAVE) for seg in [sys, d1, d2]])
    prompt = sys + d1 + gone + d2 + q
    _, provided = e.run(prompt, {"pikv_segments": [20, 30, 17, 19, 5]})
    assert provided == len(sys) + len(d1), "d2 is cached but follows a miss: a prefix only"


def test_a_chunk_lost_between_plan_and_load_is_reported_and_recomputed(cluster, tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 8)
    sys, d1, q = t(20), t(33), t(6)
    e = StandInVllm(model, model_dir, settings(cluster, 0, "standin-lost"), "flash")
    e.generate([(seg, SAVE) for seg in [sys, d1]])
    core = e.worker.core
    prompt, lengths = sys + d1 + q, [20, 33, 6]
    planned = core.plan_request(prompt, lengths)  # the scheduler's plan, carried to the worker
    assert planned.matched == 53
    assert [s for s, *_ in planned.sources] == ["local", "local"]

    # The controller forwards an evict to the nodes it holds live at that
    # moment, and a node deletes only after its write-through queues drain
    # (so no queued write resurrects the chunk in Redis): on a loaded machine
    # that takes a while, and a late heartbeat can skip a node. The evict is
    # repeated until it lands, within a generous deadline.
    deadline = time.monotonic() + 30
    admin = cluster.admin()
    key = core.client.key_of(d1)
    while core.num_matched_tokens(prompt, lengths) != 20:
        assert time.monotonic() < deadline, (
            f"the eviction never took effect: {admin.locate([key])}\n{admin.nodes()}\n"
            f"cluster log ({cluster.logged_bytes} bytes), last lines:\n{cluster.log_tail()[-4000:]}")
        admin.evict([key])
        time.sleep(0.1)

    blocks = [5, 2, 9, 7]
    result = core.load(prompt, blocks, 53, lengths, planned)
    assert result.loaded_tokens == 20, "sys still loads"
    assert result.failed_block_ids == {2, 9, 7}, "blocks from the failed chunk on"
    assert core.stats.load_failures == 1


def test_a_load_without_the_schedulers_plan_plans_in_the_scope_it_is_given(cluster, tmp_path):
    """Regression (issue 55 review): load(planned=None) planned unscoped, so a
    scoped request's chunks never loaded that way."""
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 10)
    sys, d1, q = t(20), t(33), t(6)
    e = StandInVllm(model, model_dir, settings(cluster, 0, "standin-scope"), "flash")
    core, o, scope = e.worker.core, e.worker.core.options, "5c" * 16
    for seg in (sys, d1):
        nbytes = o.num_layers * 2 * len(seg) * o.num_kv_heads * o.head_dim * 4
        core.client.store_with(seg, nbytes, lambda view: view.__setitem__(slice(None), bytes(len(view))),
                               0, True, "", scope)
    prompt, lengths, blocks = sys + d1 + q, [20, 33, 6], [5, 2, 9, 7]
    assert core.num_matched_tokens(prompt, lengths) == 0, "unscoped requests see none of it"
    assert core.num_matched_tokens(prompt, lengths, scope=scope) == 53
    assert core.load(prompt, blocks, 53, lengths, scope=scope).loaded_tokens == 53
    unscoped = core.load(prompt, blocks, 53, lengths)
    assert unscoped.loaded_tokens == 0 and unscoped.failed_block_ids == set(blocks)


def test_an_audit_catches_a_value_poisoned_chunk_and_the_honest_store_replaces_it(cluster,
                                                                                tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 9)
    sys, d1, q = t(20), t(33), t(6)
    prompt, lengths = sys + d1 + q, [20, 33, 6]
    as_bytes = lambda kv: kv.contiguous().view(torch.uint8).numpy()  # noqa: E731
    writer = StandInVllm(model, model_dir, settings(cluster, 0, "standin-audit"), "flash")
    writer.generate([(seg, SAVE) for seg in [sys]])
    # d1 stored with the right header and wrong KV.
    poisoned = model.chunk_kv(d1).clone()
    poisoned.view(-1)[::7] += 0.5
    raw = as_bytes(poisoned)
    def fill(view):
        view[:] = raw.tobytes()
    writer.worker.core.client.store_with(d1, raw.nbytes, fill)  # raises if refused
    wait_until_located(cluster, writer.worker.core, [sys, d1])

    auditor = StandInVllm(model, model_dir,
                          settings(cluster, 1, "standin-audit", **{"audit-rate": 1}), "flash")
    core = auditor.worker.core
    core.recompute = lambda tokens, prefix: as_bytes(model.chunk_kv(tokens))
    _, provided = auditor.run(prompt, {"pikv_segments": lengths})
    assert provided == len(sys) // 16 * 16, "d1 was found wrong: the engine computed it"
    assert audits(core) == (2, 1)
    assert cluster.admin().stats()["audit_mismatches"] == 1
    key = core.client.key_of(d1)
    deadline = time.monotonic() + 10
    while cluster.admin().locate([key])["keys"][0]["locations"]:
        assert time.monotonic() < deadline, "the poisoned chunk was never dropped"
        time.sleep(0.05)

    # The honest store lands; the audit then passes and d1 is loaded.
    writer.generate([(seg, SAVE) for seg in [d1]])
    wait_until_located(cluster, core, [sys, d1])
    _, provided = auditor.run(prompt, {"pikv_segments": lengths})
    assert provided == len(sys) + len(d1)
    assert audits(core) == (4, 1)


@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_an_honest_chunk_stored_at_position_1000_passes_an_audit_recomputed_alone(
        cluster, tmp_path, kv_dtype):
    """The defect: a chunk cut out of a longer prompt (stored with its K
    rotated at 1000..) was found wrong by an audit that recomputes it alone
    at 0.., dropped everywhere and its writer counted as a poisoner."""
    model, model_dir = make_model(tmp_path, MODELS[0], kv_dtype)
    t = tokens_for(model, 11)
    sys, d1, q = t(16), t(32), t(5)
    prompt, lengths = sys + d1 + q, [16, 32, 5]
    as_bytes = lambda kv: kv.contiguous().view(torch.uint8).numpy()  # noqa: E731
    model_id = f"standin-audit-far-{kv_dtype}".replace("torch.", "")
    writer = StandInVllm(model, model_dir, settings(cluster, 0, model_id), "flash")
    writer.generate([(seg, SAVE) for seg in [sys]])
    far = as_bytes(model.chunk_kv(d1, start=1000))
    def fill(view):
        view[:] = far.tobytes()
    writer.worker.core.client.store_with(d1, far.nbytes, fill, virtual_start=1000)
    wait_until_located(cluster, writer.worker.core, [sys, d1])

    auditor = StandInVllm(model, model_dir,
                          settings(cluster, 1, model_id, **{"audit-rate": 1}), "flash")
    core = auditor.worker.core
    core.recompute = lambda tokens, prefix: as_bytes(model.chunk_kv(tokens))
    mismatches_before = cluster.admin().stats()["audit_mismatches"]
    _, provided = auditor.run(prompt, {"pikv_segments": lengths})
    assert audits(core) == (2, 0)
    assert provided == len(sys) + len(d1), "both chunks were loaded"
    assert cluster.admin().stats()["audit_mismatches"] == mismatches_before
    assert cluster.admin().locate([core.client.key_of(d1)])["keys"][0]["locations"]


def test_node_and_controller_down_match_nothing_within_the_deadline(tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 9)
    sys, d1, q = t(20), t(30), t(4)
    doomed = Cluster(nodes=1)
    try:
        s = {"local-node": doomed.nodes[0]["ipc"], "controller": doomed.controller,
             "model-id": "standin-down", "node-timeout": "300ms", "controller-timeout": "200ms",
             "attention-mode": "isolated",
             **doomed.security_settings()}
        e = StandInVllm(model, model_dir, s, "flash")
        e.generate([(seg, SAVE) for seg in [sys, d1]])
        prompt = sys + d1 + q
        assert e.run(prompt, {"pikv_segments": [20, 30, 4]})[1] == 50
    finally:
        doomed.stop()
    took = time.monotonic()
    logits, provided = e.run(prompt, {"pikv_segments": [20, 30, 4]})
    took = time.monotonic() - took
    assert provided == 0, "nothing is offered when pikv cannot be reached"
    assert logits.shape[0] == len(prompt), "the engine computed the whole prompt"
    assert took < 0.3 + 0.2 + 2.0, f"the engine waited {took:.2f} s (slack for a loaded machine)"


def test_segments_by_explicit_lengths_or_separator():
    toks = [1, 2, 9, 9, 3, 4, 9, 9, 5]
    assert split_segments(toks, separator=[9, 9]) == [[1, 2], [9, 9, 3, 4], [9, 9, 5]]
    assert split_segments(toks, lengths=[2, 4, 3]) == [[1, 2], [9, 9, 3, 4], [9, 9, 5]]
    assert split_segments(toks) is None, "chunking not asked for"
    for reason, args in UNCHUNKED_CASES.items():
        with pytest.raises(NotChunked) as e:
            split_segments(*args)
        assert e.value.reason == reason


# A prompt that asks for chunking and cannot be, per reason: (tokens,
# separator, lengths).
UNCHUNKED_CASES = {
    "segments_malformed": ([1, 2, 3], None, [3]),
    "segments_length": ([1, 2, 9, 9, 3, 4, 9, 9, 5], None, [2, 4]),
    "no_separator": ([1, 2, 3], [9], None),
    "leading_separator": ([9, 9, 1, 2, 9, 9, 3], [9, 9], None),
    "short_chunk": ([1, 9, 9, 9, 9, 5], [9, 9], None),
}


def test_a_prompt_that_asked_for_chunking_and_got_none_is_counted_and_logged(caplog):
    """Each way a prompt can silently reuse nothing has its counter and a
    log line naming the reason: the first time, then at most once a minute."""
    for reason, (tokens, separator, lengths) in UNCHUNKED_CASES.items():
        core = ConnectorCore({"num-layers": 1, "num-kv-heads": 1, "head-dim": 8},
                             separator=separator)
        caplog.clear()
        with caplog.at_level("WARNING", logger="pikv.connector"):
            for _ in range(3):
                assert core.plan_request(tokens, lengths) == RequestPlan(0, [])
        assert core.stats.unchunked == {reason: 3}
        assert core.stats.counters()[f"unchunked_requests:{reason}"] == 3
        assert core.stats.lookups == 0 and core.stats.errors == 0
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and reason in lines[0], lines
    # A chunked prompt and one that never asked count nothing.
    core = ConnectorCore({"num-layers": 1, "num-kv-heads": 1, "head-dim": 8})
    core.plan_request([1, 2, 3])
    assert core.stats.unchunked == {}
    # Nor do precompute's own saves on an engine with a separator: a
    # document alone (it starts with the separator), a prefix alone (none).
    core = ConnectorCore({"num-layers": 1, "num-kv-heads": 1, "head-dim": 8}, separator=[9, 9])
    whole = core.plan_request([9, 9, 1, 2], store_last=True)
    assert whole == RequestPlan(0, [StoredForm(0, [9, 9, 1, 2])])
    prefix = core.plan_request([1, 2, 3], store_last=True)
    assert prefix == RequestPlan(0, [StoredForm(0, [1, 2, 3])])
    assert core.stats.unchunked == {}


def test_the_schedulers_plan_is_what_the_worker_fetches_by_and_is_checked():
    """The worker fetches by the scheduler's plan (RequestPlan.sources, carried
    in the connector's metadata); a plan that does not fit the prompt, or
    names a source that does not exist or a peer without a tcp endpoint, is
    refused."""
    core = ConnectorCore({"num-layers": 1, "num-kv-heads": 1, "head-dim": 8})
    segs, lengths = [[1, 2], [3, 4], [5]], [2, 2, 1]
    planned = core.plan_request(sum(segs, []), lengths)
    assert planned.sources == [("miss", "", "", False), ("miss", "", "", False)]
    assert not planned.local_node_answered, "there is no local node"
    plan = core.client.plan(segs, planned.sources, planned.local_node_answered)
    assert [(c.source, c.segment) for c in plan.chunks] == [("miss", 0), ("miss", 1)]
    peer = [("local", "", ""), ("peer", "node-b", "tcp://10.0.0.2:7301")]
    assert [c.peer_endpoint for c in core.client.plan(segs, peer).chunks] == [
        "", "tcp://10.0.0.2:7301"]
    for bad in ([("warp", "", "")] * 2, planned.sources[:1],
                [("local", "", ""), ("peer", "node-b", "ipc:///tmp/n.sock")],
                [("local", "", ""), ("local", "", "", True)],  # no adjacent copy at distance 0
                [("local", "", ""), ("local", "")]):
        with pytest.raises(pikv.InvalidArgument):
            core.client.plan(segs, bad)


def test_the_binding_checks_layouts_and_reads_configs(tmp_path):
    info = pikv.model_info(os.path.join(CONFIGS, "gpt-oss-20b.json"), dtype="bf16")
    assert info["rope_scaling"] == "yarn" and abs(info["attention_factor"] - 1.3466) < 1e-4
    with pytest.raises(ValueError, match="dtype"):
        pikv.model_info(os.path.join(CONFIGS, "gpt-j-6b.json"))  # GPT-J names none

    flash = [torch.zeros(2, 4, 16, 8, 64, dtype=torch.bfloat16) for _ in range(3)]
    layout = pikv.kv_layout(flash)
    assert (layout.num_layers, layout.block_size, layout.num_blocks) == (3, 16, 4)
    # The layout keeps the tensors it writes through alive (a connector given a
    # dict that the engine drops must not write into freed memory).
    import weakref
    probe = torch.zeros(2, 4, 16, 8, 64)
    alive = weakref.ref(probe)
    kept = pikv.kv_layout([probe])
    del probe
    assert alive() is not None and kept.num_layers == 1
    with pytest.raises(ValueError, match="cannot tell"):
        pikv.kv_layout([torch.zeros(2, 2, 16, 8, 64)])  # 2 blocks: flash or block-major?
    assert pikv.kv_layout([torch.zeros(2, 2, 16, 8, 64)], layout="block_major").num_blocks == 2
    # Names are pikv.layouts': an unknown one (once a KeyError) and a packed
    # one (the C++ remap cannot write it) say so.
    with pytest.raises(ValueError, match="unknown layout 'flashinfer'"):
        pikv.kv_layout(flash, layout="flashinfer")
    with pytest.raises(ValueError, match="packed"):
        pikv.kv_layout(flash, layout="vllm_cpu_vec")
    with pytest.raises(ValueError, match="contiguous"):
        pikv.kv_layout([torch.zeros(2, 4, 16, 64, 8).transpose(3, 4)])
    with pytest.raises(ValueError, match="differs"):
        pikv.kv_layout([torch.zeros(2, 4, 16, 8, 64), torch.zeros(2, 4, 16, 8, 32)])
    # A description that overruns its tensor is refused before anything is written.
    with pytest.raises(ValueError, match="spans"):
        pikv.KvLayout("f32", "standard", 8, 64, 16, 4, (4 * 16 * 8 * 64, 16 * 8 * 64, 8 * 64, 64),
                      [flash[0].data_ptr()], [100])
    # numpy (bf16 named explicitly) and plain writable buffers describe without copies.
    import numpy as np
    a = np.zeros((2, 4, 16, 8, 64), dtype=np.uint16)
    assert pikv.describe(a, dtype="bf16").ptr == a.ctypes.data
    buf = bytearray(4 * 8)
    assert pikv.describe(memoryview(buf).cast("f")).nbytes == 32

    options = pikv.Options.load("", {"model-config": os.path.join(CONFIGS, "deepseek-v3.json"),
                                     "local-node": "", "controller": ""})
    assert (options.kv_format, options.head_dim, options.num_kv_heads) == ("mla", 576, 1)
    client = pikv.Client(options)
    assert client.key_of([1, 2, 3]) == client.key_of([1, 2, 3]) != client.key_of([1, 2, 4])


def test_the_connector_refuses_vllms_prefix_caching(tmp_path):
    from pikv.vllm import PikvConnector
    from standin_engine import vllm_config
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    config = vllm_config(str(tmp_path), torch.float32, {}, prefix_caching=True)
    with pytest.raises(ValueError, match="prefix caching"):
        PikvConnector(config, KVConnectorRole.SCHEDULER)
    config.cache_config.enable_prefix_caching = False
    config.kv_transfer_config.kv_load_failure_policy = "fail"
    with pytest.raises(ValueError, match="kv_load_failure_policy"):
        PikvConnector(config, KVConnectorRole.SCHEDULER)
    config.kv_transfer_config.kv_load_failure_policy = "recompute"
    with pytest.raises(ValueError):  # nothing says what the KV looks like
        PikvConnector(config, KVConnectorRole.SCHEDULER)


@pytest.mark.parametrize("config", ["gemma-3-1b-it.json", "llama-4-scout-17b-16e-instruct.json",
                                    "command-r7b.json"])
def test_the_connector_refuses_windowed_layers_whose_cache_keeps_only_the_window(tmp_path, config):
    from pikv.vllm import PikvConnector
    from standin_engine import vllm_config
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    with open(os.path.join(CONFIGS, config)) as f:
        (model_dir / "config.json").write_text(f.read())
    config = vllm_config(str(model_dir), torch.bfloat16, {"dtype": "bf16"}, hybrid_off=False)
    with pytest.raises(ValueError, match="hybrid"):  # vLLM's default: only the window is kept
        PikvConnector(config, KVConnectorRole.SCHEDULER)
    config.scheduler_config.disable_hybrid_kv_cache_manager = True
    connector = PikvConnector(config, KVConnectorRole.SCHEDULER)
    assert connector.core.options.windowed_layers  # it knows, and the whole cache is kept
    # A model without windows starts either way.
    plain = tmp_path / "plain"
    plain.mkdir()
    with open(os.path.join(CONFIGS, "llama-3.2-1b.json")) as f:
        (plain / "config.json").write_text(f.read())
    config = vllm_config(str(plain), torch.bfloat16, {"dtype": "bf16"}, hybrid_off=False)
    assert not PikvConnector(config, KVConnectorRole.SCHEDULER).core.options.windowed_layers


@pytest.mark.parametrize("params", [
    {"pikv_segments": "20,30,4"}, {"pikv_segments": [20, 30.0, 4]}, {"pikv_segments": [-1, 55]},
    {"pikv_segments": [54]}, {"pikv_segments": [1] * 100000}, {"pikv_segments": None},
    ["not", "a", "dict"], "pikv_segments", {"pikv_segments": [20, 30, 4], "pikv_save": "yes"}])
def test_whatever_a_request_carries_never_raises_into_the_engine(cluster, tmp_path, params):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    e = StandInVllm(model, model_dir, settings(cluster, 0, "standin-hostile"), "flash")
    t = tokens_for(model, 11)
    prompt = t(54)
    logits, provided = e.run(prompt, params)
    assert provided == 0 and logits.shape[0] == 54
    request = SimpleNamespace(request_id="r", prompt_token_ids=None, kv_transfer_params=params)
    assert e.scheduler.get_num_new_matched_tokens(request, 0) == (0, False)


def stored(cluster, keys):
    """Whether the controller lists a holder for each key."""
    return [bool(k["locations"]) for k in cluster.admin().locate(keys)["keys"]]


def wait_stored(cluster, keys, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not all(stored(cluster, keys)):
        assert time.monotonic() < deadline, f"never stored: {stored(cluster, keys)}"
        time.sleep(0.02)


def test_prefixed_mode_stores_chunks_after_the_prefix_and_never_mixes_modes(cluster, tmp_path):
    """In prefixed mode (the connector's default mode; here without its
    default distance buckets, whose tests are test_distance_buckets.py's)
    precompute runs prefix + chunk requests: each chunk is keyed by the
    prefix and stored at virtual start len(prefix); an ordinary request
    stores the prefix and the chunk right after it, nothing later. Isolated
    keys, and another prefix's, find none of it."""
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 11)
    sys1, sys2, d1, d2, d3, q = t(20), t(22), t(30), t(17), t(19), t(5)
    mode = settings(cluster, 0, "standin-prefixed", **{"distance-buckets": "none"})
    del mode["attention-mode"]  # the default
    e = StandInVllm(model, model_dir, mode, "flash")
    core = e.scheduler.core
    assert core.prefixed
    assert precompute(e.generate, core, [sys1, d1, d2, q]) == 3
    prefix_key = core.client.key_of(sys1)
    keys = [prefix_key, core.client.key_of(d1, prefix_key), core.client.key_of(d2, prefix_key)]
    wait_stored(cluster, keys)
    _, provided = e.run(sys1 + d2 + d1 + q, {"pikv_segments": [20, 17, 30, 5]})
    assert provided == 20 + 17 + 30

    # Modes and prefixes never mix: the same tokens are other keys.
    iso = StandInVllm(model, model_dir, settings(cluster, 0, "standin-prefixed"), "flash")
    assert iso.scheduler.core.client.key_of(d1) not in keys
    assert iso.scheduler.core.num_matched_tokens(sys1 + d1 + q, [20, 30, 5]) == 0
    assert core.num_matched_tokens(sys2 + d1 + q, [22, 30, 5]) == 0, "another prefix"
    assert core.client.key_of(d1, core.client.key_of(sys2)) not in keys

    # An ordinary request computes sys2 at 0 and d3 right after it: both
    # stored; d1 after d3 is not in the mode's form.
    _, provided = e.run(sys2 + d3 + d1 + q, {"pikv_segments": [22, 19, 30, 5]})
    assert provided == 0
    prefix2 = core.client.key_of(sys2)
    wait_stored(cluster, [prefix2, core.client.key_of(d3, prefix2)])
    assert stored(cluster, [core.client.key_of(d1, prefix2)]) == [False]
    assert core.num_matched_tokens(sys2 + d3 + q, [22, 19, 5]) == 22 + 19
