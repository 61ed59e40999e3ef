"""vLLM's own Scheduler drives PikvConnector (scheduler role) against a real
pikv cluster, no model run: what each step's metadata asks the workers to
load and save, for new, resumed (after preemption) and chunked requests,
and what vLLM does with blocks that failed to load under each policy.

The helpers mirror vLLM's KV-connector unit tests (a Scheduler over a
KVCacheConfig of one full-attention group; ModelRunnerOutputs made by
hand), written here against the installed vLLM 0.32."""

import pytest
import torch

from conftest import engine_settings, rag_prompt

from pikv.vllm import request_scope

from vllm import SamplingParams  # noqa: E402
from vllm.config import (CacheConfig, DeviceConfig, KVTransferConfig,  # noqa: E402
                         ModelConfig, SchedulerConfig, VllmConfig)
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig,  # noqa: E402
                                        KVCacheGroupSpec)
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

BLOCK = 16
EOS = 1


def make_scheduler(model, settings, num_blocks, batched_tokens=512, policy="recompute"):
    vllm_config = VllmConfig(
        model_config=ModelConfig(model=model, skip_tokenizer_init=True, dtype="float32",
                                 seed=0, max_model_len=2048),
        scheduler_config=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=batched_tokens,
                                         max_model_len=2048, enable_chunked_prefill=True,
                                         is_encoder_decoder=False),
        cache_config=CacheConfig(block_size=BLOCK, cache_dtype="auto",
                                 enable_prefix_caching=False),
        kv_transfer_config=KVTransferConfig(kv_connector="PikvConnector",
                                            kv_connector_module_path="pikv.vllm",
                                            kv_role="kv_both", kv_load_failure_policy=policy,
                                            kv_connector_extra_config=settings),
        device_config=DeviceConfig("cpu"))
    kv_cache_config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                                    kv_cache_groups=[KVCacheGroupSpec(["layer"], FullAttentionSpec(
                                        block_size=BLOCK, num_kv_heads=1, head_size=1,
                                        dtype=torch.float32))])
    vllm_config.cache_config.num_gpu_blocks = num_blocks
    return Scheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                     structured_output_manager=StructuredOutputManager(vllm_config),
                     block_size=BLOCK, log_stats=True)


def make_request(req_id, segments, max_tokens, params=None, **more):
    sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=True,
                              extra_args={"kv_transfer_params": params} if params else None)
    sampling.update_from_generation_config({}, EOS)
    return Request(request_id=req_id, prompt_token_ids=sum(segments, []),
                   sampling_params=sampling, pooling_params=None, mm_features=None, **more)


def step(scheduler, invalid_blocks=None, check=None):
    """One scheduler step, every request past its prompt sampling token 5;
    returns the step's SchedulerOutput (its connector metadata included).
    `check(out)` runs before the step's output is applied (while a request
    that finishes in it still holds its blocks)."""
    out = scheduler.schedule()
    if check:
        check(out)
    ids = list(out.num_scheduled_tokens)
    # A prompt still being prefilled samples nothing (schedule() has
    # already counted this step's tokens as computed).
    sampled = [[5] if scheduler.requests[r].num_computed_tokens >=
               scheduler.requests[r].num_prompt_tokens else [] for r in ids]
    connector_output = KVConnectorOutput(invalid_block_ids=set(invalid_blocks or ()))
    scheduler.update_from_output(out, ModelRunnerOutput(
        req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
        sampled_token_ids=sampled, logprobs=None, prompt_logprobs_dict={},
        pooler_output=None, kv_connector_output=connector_output))
    return out


def blocks_of(scheduler, req_id):
    return list(scheduler.kv_cache_manager.get_blocks(req_id).get_block_ids()[0])


def store_chunks(scheduler, segments, scope=""):
    """Puts every segment but the question in pikv, keyed as the connector's
    mode keys them (values do not matter to a scheduler), in `scope`,
    through the connector's own client."""
    core = scheduler.connector.core
    o = core.options
    prefix = core.client.key_of(segments[0], scope=scope) if core.prefixed else ""
    for i, seg in enumerate(segments[:-1]):
        nbytes = o.num_layers * 2 * len(seg) * o.num_kv_heads * o.head_dim * 4
        after = prefix if i > 0 else ""
        start = len(segments[0]) if after else 0
        core.client.store_with(seg, nbytes, lambda view: None, start, True, after,
                               scope)  # raises


@pytest.fixture
def model(make_model):
    return make_model("llama", "float32")


def test_a_resumed_request_loads_again_into_its_new_blocks(cluster, model):
    """Regression (issue 33, defect 2): a preempted request is resumed in
    scheduled_cached_reqs with a replacing block table; its chunks must be
    loaded again, into those blocks. The adapter before loaded only for
    new requests, while vLLM counted the tokens as computed."""
    sched = make_scheduler(model, engine_settings(cluster, 0), num_blocks=13)
    first = rag_prompt(seed=1, vocab=2048, doc_lengths=(40, 30), system=20, question=10)
    second = rag_prompt(seed=2, vocab=2048, doc_lengths=(24,), system=20, question=10)
    store_chunks(sched, first)
    store_chunks(sched, second)
    sched.add_request(make_request("a", first, max_tokens=60, params={
        "pikv_segments": [len(s) for s in first]}))
    sched.add_request(make_request("b", second, max_tokens=60, params={
        "pikv_segments": [len(s) for s in second]}))
    loads, preempted = {}, False
    for _ in range(200):
        out = step(sched)
        for load in out.kv_connector_metadata.loads:
            loads.setdefault(load.req_id, []).append(load)
            assert load.block_ids == blocks_of(sched, load.req_id)
        preempted |= bool(out.preempted_req_ids)
        if out.scheduled_cached_reqs.resumed_req_ids:
            resumed = next(iter(out.scheduled_cached_reqs.resumed_req_ids))
            assert loads[resumed][-1] in out.kv_connector_metadata.loads
            i = out.scheduled_cached_reqs.req_ids.index(resumed)
            assert loads[resumed][-1].block_ids == list(
                out.scheduled_cached_reqs.new_block_ids[i][0])
        if not sched.has_requests():
            break
    assert preempted, "the test needs a preemption"
    assert sorted(len(v) for v in loads.values()) == [1, 2]  # the preempted one loaded twice
    assert all(v[-1].num_tokens == sum(len(s) for s in seg[:-1])
               for v, seg in zip((loads["a"], loads["b"]), (first, second)))


def test_a_save_follows_a_resumed_requests_new_blocks(cluster, model):
    """Regression (defect 2): a request being saved that is preempted and
    resumed gets a new block table; the save must gather from it, not from
    the old blocks with the new ones appended (another request's KV).
    vLLM's reset_prefix_cache(reset_running_requests=True) preempts every
    running request, as its scheduler does when blocks run out."""
    sched = make_scheduler(model, engine_settings(cluster, 0), num_blocks=40, batched_tokens=64)
    long = [[7 + (i % 1000) for i in range(150)]]
    sched.add_request(make_request("other", [[9] * 70], max_tokens=30))
    sched.add_request(make_request("saver", long, max_tokens=1, params={"pikv_save": True}))
    saves, resumed = [], []

    def check(out):
        resumed.extend(out.scheduled_cached_reqs.resumed_req_ids)
        for save in out.kv_connector_metadata.saves:
            saves.append(save)
            assert save.block_ids == blocks_of(sched, save.req_id)

    for _ in range(10):  # until part of the saver's prompt is computed
        step(sched, check=check)
        if sched.requests["saver"].num_computed_tokens:
            break
    old_blocks = blocks_of(sched, "saver")
    assert 0 < len(old_blocks) < 10  # part of its prompt computed, then preempted
    sched.reset_prefix_cache(reset_running_requests=True)
    for _ in range(100):
        step(sched, check=check)
        if not sched.has_requests():
            break
    assert "saver" in resumed, "the test needs the saver preempted and resumed"
    assert len(saves) == 1 and saves[0].tokens == long[0]
    assert len(saves[0].block_ids) == -(-150 // BLOCK)


def test_asked_again_for_the_same_request_the_connector_plans_once(cluster, model):
    """vLLM asks get_num_new_matched_tokens each step a waiting request
    cannot get blocks; the connector answers from one plan per admission."""
    sched = make_scheduler(model, engine_settings(cluster, 0), num_blocks=10)
    segments = rag_prompt(seed=3, vocab=2048, doc_lengths=(30,), system=20, question=8)
    store_chunks(sched, segments)
    sched.add_request(make_request("hog", [[9] * 120], max_tokens=30))
    sched.add_request(make_request("waits", segments, max_tokens=2, params={
        "pikv_segments": [len(s) for s in segments]}))
    connector, asked = sched.connector, []
    ask = connector.get_num_new_matched_tokens

    def counting(request, computed):  # the real method, its calls counted
        asked.append(request.request_id)
        return ask(request, computed)

    connector.get_num_new_matched_tokens = counting
    for _ in range(100):
        step(sched)
        if not sched.has_requests():
            break
    assert asked.count("waits") > 1  # vLLM asked again while it waited for blocks
    assert connector.core.stats.lookups == 1  # the chunked prompt, planned once
    assert connector.core.stats.matched_tokens == 50


def test_blocks_that_failed_to_load_are_recomputed_under_the_recompute_policy(cluster, model):
    sched = make_scheduler(model, engine_settings(cluster, 0), num_blocks=64)
    segments = rag_prompt(seed=4, vocab=2048, doc_lengths=(40, 40), system=20, question=8)
    store_chunks(sched, segments)
    sched.add_request(make_request("r", segments, max_tokens=2, params={
        "pikv_segments": [len(s) for s in segments]}))
    out = sched.schedule()
    load = out.kv_connector_metadata.loads[0]
    assert load.num_tokens == 100 and out.num_scheduled_tokens["r"] == 8
    failed = load.block_ids[3]  # tokens 48..63, inside the first document (20..59)
    sched.update_from_output(out, ModelRunnerOutput(
        req_ids=["r"], req_id_to_index={"r": 0}, sampled_token_ids=[[5]], logprobs=None,
        prompt_logprobs_dict={}, pooler_output=None,
        kv_connector_output=KVConnectorOutput(invalid_block_ids={failed})))
    assert sched.requests["r"].num_computed_tokens == 3 * BLOCK  # vLLM computes from there
    nxt = sched.schedule()
    assert nxt.num_scheduled_tokens["r"] == 108 - 3 * BLOCK
    assert not nxt.kv_connector_metadata.loads  # not loaded again: computed


def run_to_end(sched):
    loads, saves = [], []
    for _ in range(100):
        out = step(sched)
        loads += out.kv_connector_metadata.loads
        saves += out.kv_connector_metadata.saves
        if not sched.has_requests():
            break
    return loads, saves


@pytest.mark.parametrize("mode", ["isolated", "prefixed"])
def test_a_save_request_stores_only_what_it_computes_in_the_modes_form(cluster, model, mode):
    """A save stores request blocks as the mode defines the chunk: alone
    from 0 (isolated: the request is the segment, nothing loaded), or right
    after the prefix (prefixed: the prefix loaded when pikv holds it, the
    chunk stored at start len(prefix) under the prefix's key). What was
    loaded is never stored again. The step waits for a save request's puts
    (precompute's chunks are stored when its request ends)."""
    sched = make_scheduler(model, engine_settings(cluster, 0, mode), num_blocks=64)
    system, doc, question = rag_prompt(seed=5, vocab=2048, doc_lengths=(40,), system=20,
                                       question=8)
    store_chunks(sched, [system, question])
    core = sched.connector.core
    if mode == "isolated":
        sched.add_request(make_request("save", [doc], 1, {"pikv_save": True}))
        want_load, want = [], [(0, doc, "")]
    else:
        sched.add_request(make_request("save", [system, doc], 1, {
            "pikv_segments": [20, 40], "pikv_save": True}))
        want_load, want = [20], [(20, doc, core.client.key_of(system))]
    loads, saves = run_to_end(sched)
    assert [x.num_tokens for x in loads] == want_load
    assert [(x.start, x.tokens, x.prefix_key, x.wait) for x in saves] == \
        [w + (True,) for w in want]


def test_prefixed_requests_store_the_prefix_and_the_chunk_after_it_as_they_complete(cluster,
                                                                                   model):
    """An ordinary request in prefixed mode computes the system prompt at 0
    and the first document right after it: both are the mode's form and
    are saved in the step that completes them (chunked prefill: 32 tokens a
    step); the second document (after the first) is not. A preemption does
    not save a segment twice. Its saves go on in the background."""
    sched = make_scheduler(model, engine_settings(cluster, 0, "prefixed"), num_blocks=64,
                           batched_tokens=32)
    segments = rag_prompt(seed=8, vocab=2048, doc_lengths=(40, 30), system=20, question=8)
    sched.add_request(make_request("r", segments, max_tokens=4, params={
        "pikv_segments": [len(s) for s in segments]}))
    seen = []
    for n in range(100):
        out = step(sched)
        seen += [(n, s.start, len(s.tokens), s.prefix_key, s.wait) for s in
                 out.kv_connector_metadata.saves]
        if n == 2:  # sys and d1 saved (steps 0 and 1); preempted mid-prompt
            sched.reset_prefix_cache(reset_running_requests=True)
        if not sched.has_requests():
            break
    prefix = sched.connector.core.client.key_of(segments[0])
    assert seen == [(0, 0, 20, "", False), (1, 20, 40, prefix, False)]


def test_a_salted_request_with_no_salt_key_neither_loads_nor_stores(cluster, model):
    """A cache salt keeps requests apart in vLLM; with no salt key to scope
    it by (salt-key-file), pikv leaves such a request to vLLM, as it does
    images behind placeholder ids or prompt embeddings."""
    sched = make_scheduler(model, engine_settings(cluster, 0), num_blocks=64)
    segments = rag_prompt(seed=6, vocab=2048, doc_lengths=(40,), system=20, question=8)
    store_chunks(sched, segments)
    lengths = {"pikv_segments": [len(s) for s in segments]}
    sched.add_request(make_request("salted", segments, 1, lengths, cache_salt="tenant-7"))
    sched.add_request(make_request("salted-save", [segments[1]], 1, {"pikv_save": True},
                                   cache_salt="tenant-7"))
    assert run_to_end(sched) == ([], [])
    sched.add_request(make_request("plain", segments, 1, lengths))
    loads, _ = run_to_end(sched)
    assert [x.req_id for x in loads] == ["plain"]  # the same prompt, unsalted, loads


def salted_settings(cluster, tmp_path, name="salt.key", key=b"0123456789abcdef0123"):
    path = tmp_path / name
    path.write_bytes(key)
    return dict(engine_settings(cluster, 0), **{"salt-key-file": str(path)})


def scope_of(sched, **request_fields):
    return request_scope(make_request("probe", [[1, 2]], 1, **request_fields),
                         sched.connector._salt_key)


def test_salted_requests_load_and_store_only_within_their_salts_scope(cluster, model, tmp_path):
    """With a salt key, a salt is a scope of the key namespace: a salted
    request loads what its salt stored, never what another salt or an
    unsalted request stored, and saves into its own scope (issue 55)."""
    sched = make_scheduler(model, salted_settings(cluster, tmp_path), num_blocks=64)
    segments = rag_prompt(seed=7, vocab=2048, doc_lengths=(40,), system=20, question=8)
    seven = scope_of(sched, cache_salt="user-7")
    store_chunks(sched, segments, scope=seven)
    lengths = {"pikv_segments": [len(s) for s in segments]}
    for req_id, salt in (("salted-7", "user-7"), ("salted-8", "user-8"), ("plain", None)):
        more = {"cache_salt": salt} if salt else {}
        sched.add_request(make_request(req_id, segments, 1, lengths, **more))
        loads, saves = run_to_end(sched)
        assert [x.req_id for x in loads] == (["salted-7"] if salt == "user-7" else []), req_id
        # What the others compute is stored in their own scope.
        want = scope_of(sched, **more) if salt else ""
        assert {s.scope for s in saves} <= {want}, req_id
        if salt == "user-8":
            assert saves and want not in ("", seven)
    # The same salt under another engine's key is another scope.
    other = make_scheduler(model, salted_settings(cluster, tmp_path, "other.key",
                                                  b"another key of 16+ bytes"), num_blocks=64)
    assert scope_of(other, cache_salt="user-7") != seven
    with pytest.raises(ValueError, match="salt-key-file"):
        make_scheduler(model, salted_settings(cluster, tmp_path, "short.key", b"short"),
                       num_blocks=16)


def test_request_scope_keys_salts_and_adapters_and_refuses_what_it_cannot_key(tmp_path):
    """The scope of a request: none for token ids alone; a keyed hash of the
    salt; an adapter by its name and files (not its path or vLLM's id)."""
    from vllm.lora.request import LoRARequest

    key = b"0123456789abcdef"

    def scope(**fields):
        return request_scope(make_request("r", [[1, 2]], 1, **fields), key)

    def adapter(name, data):
        path = tmp_path / name
        path.mkdir()
        (path / "adapter_model.safetensors").write_bytes(data)
        return str(path)

    a, a_copy, b = adapter("a", b"weights"), adapter("a2", b"weights"), adapter("b", b"other")
    assert scope() == ""
    assert len(scope(cache_salt="s")) == 32 and scope(cache_salt="s") != scope(cache_salt="t")
    assert request_scope(make_request("r", [[1, 2]], 1, cache_salt="s"), None) is None
    lora = scope(lora_request=LoRARequest("sql", 1, a))
    assert lora == scope(lora_request=LoRARequest("sql", 7, a_copy)), "path and id do not count"
    assert lora != scope(lora_request=LoRARequest("sql", 1, b)), "the weights do"
    assert lora != scope(lora_request=LoRARequest("sql", 1, a), cache_salt="s")
    assert scope(lora_request=LoRARequest("gone", 1, str(tmp_path / "missing"))) is None


def test_the_connector_refuses_vllms_default_failure_policy(cluster, model):
    with pytest.raises(ValueError, match="kv_load_failure_policy"):
        make_scheduler(model, engine_settings(cluster, 0), num_blocks=16, policy="fail")


def test_the_key_namespace_is_vllms_effective_config(cluster, make_model):
    """--hf-overrides changes what vLLM computes with; pikv keys on vLLM's
    effective hf_config, not on config.json, so the override changes the
    chunk keys (and a chunk made under one RoPE never loads under another)."""
    from pikv.vllm import PikvConnector
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    model = make_model("qwen3", "float32")
    settings = engine_settings(cluster, 0)

    def key(**overrides):
        sched = make_scheduler(model, settings, num_blocks=16)
        config = sched.vllm_config
        if overrides:
            config.model_config = ModelConfig(model=model, skip_tokenizer_init=True,
                                              dtype="float32", seed=0, max_model_len=2048,
                                              hf_overrides=overrides)
        connector = PikvConnector(config, KVConnectorRole.SCHEDULER, sched.kv_cache_config)
        return connector.core.client.key_of([5, 6, 7])

    base = key()
    assert key() == base
    assert key(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}) != base


def test_connector_starts_leave_no_file_in_the_temp_dir(cluster, model, tmp_path, monkeypatch):
    """The engine's effective model config reaches pikv as text: a start
    writes nothing (it once left a pikv-hf-config-*.json per start)."""
    import tempfile

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    keys = set()
    for _ in range(5):
        core = make_scheduler(model, engine_settings(cluster, 0), num_blocks=16).connector.core
        assert core.options.num_layers > 0
        keys.add(core.client.key_of([5, 6, 7]))
    assert len(keys) == 1
    assert sorted(p.name for p in private.rglob("*")) == []


def test_vllms_metrics_take_pikvs_counters_and_skip_what_they_do_not_name():
    """PikvPromMetrics as vLLM's stats logger drives it: growth per engine,
    the unchunked requests by reason, and payload keys another pikv version
    may send (a reason on an unlabelled counter, the labelled one without
    its reason, unknown names) skipped, never raised into vLLM's loop."""
    import functools
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from pikv.vllm_metrics import PikvPromMetrics

    registry = CollectorRegistry()
    types = {cls: functools.partial(cls, registry=registry) for cls in (Counter, Gauge, Histogram)}
    metrics = PikvPromMetrics(SimpleNamespace(kv_transfer_config=None), types,
                              ["model_name", "engine"], {0: ["m", "0"], 1: ["m", "1"]})
    metrics.observe({"loaded_tokens": 64, "unchunked_requests:no_separator": 2})
    metrics.observe({"loaded_tokens": 32, "lookups:no_separator": 5, "unchunked_requests": 7,
                     "unchunked_requests:not_a_reason": 1, "new_counter": 3}, engine_idx=1)
    metrics.observe({"loaded_tokens": 16})

    def value(name, engine, **labels):
        return registry.get_sample_value(f"vllm:pikv_{name}_total",
                                         {"model_name": "m", "engine": engine, **labels})

    assert value("loaded_tokens", "0") == 80 and value("loaded_tokens", "1") == 32
    assert value("unchunked_requests", "0", reason="no_separator") == 2
    assert value("unchunked_requests", "1", reason="no_separator") is None
    assert value("lookups", "1") is None
    # Recompute fallbacks are labelled by their own reasons.
    metrics.observe({"recompute_fallbacks:no_model": 3, "recompute_fallbacks:no_separator": 1,
                     "recomputed_tokens:no_model": 2, "recomputed_tokens": 9})
    assert value("recompute_fallbacks", "0", reason="no_model") == 3
    assert value("recompute_fallbacks", "0", reason="no_separator") is None
    assert value("recomputed_tokens", "0") == 9
