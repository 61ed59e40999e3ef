"""Documents stored at the distance they are used (distance-buckets, in
prefixed mode), through the vLLM connector around a stand-in engine and a
real two-node cluster: precompute stores each document at its bucket in
rounds (the system prompt first, then the documents at a distance, with
the system prompt loaded encoded that far back); another engine loads
them P2P and answers as the mode's reference (written here as a mask:
each document attends to a copy of the system prompt moved back by its
bucket); a store whose system prompt could not be loaded, or whose
distance is malformed, stores nothing and is counted."""

import time
from types import SimpleNamespace
import zlib

import pytest
import torch

from test_connector import make_model, settings, stored, tokens_for, wait_stored, MODELS
from pikv.vllm import precompute, precompute_requests
from standin_engine import StandInVllm


def pow2(d):
    """The bucket scheme "pow2", written from its definition."""
    if d == 0:
        return 0
    p = 1 << (d.bit_length() - 1)
    return 2 * p if d * d >= 2 * p * p else p


def distance_reference(model, lengths, bucket):
    """Logits of every prompt token under prefixed mode at distance
    buckets: the system prompt at 0; each document after a copy of it
    whose end sits bucket(d) tokens before the document (d: how far the
    document really is from it), seen by that document alone; the
    question (last segment) attends to every real token before it."""
    def forward(tokens):
        sys_len = lengths[0]
        rows, positions, group, real = [], [], [], []
        start = 0
        for k, n in enumerate(lengths):
            if 0 < k < len(lengths) - 1:
                at = start - bucket(start - sys_len) - sys_len
                rows += tokens[:sys_len]
                positions += range(at, at + sys_len)
                group += [("copy", k)] * sys_len
            real += range(len(rows), len(rows) + n)
            rows += tokens[start:start + n]
            positions += range(start, start + n)
            group += [k] * n
            start += n
        question = len(lengths) - 1
        m = len(rows)
        allowed = torch.zeros(m, m, dtype=torch.bool)
        is_real = torch.zeros(m, dtype=torch.bool)
        is_real[real] = True
        for i in range(m):
            for j in range(i + 1):
                allowed[i, j] = (group[i] == group[j] or group[j] == ("copy", group[i]) or
                                 (group[i] == question and bool(is_real[j])))
        out = model.forward_masked(rows, torch.tensor(positions), allowed)
        return out[real]
    return forward


def prefixed(cluster, node, model_id, buckets="pow2"):
    return settings(cluster, node, model_id, **{"attention-mode": "prefixed",
                                                "distance-buckets": buckets})


def test_documents_stored_at_their_bucket_answer_as_the_distance_reference(cluster, tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, zlib.crc32(b"distance"))
    sys1, d1, d2, d3, q = t(20), t(30), t(17), t(19), t(5)
    segments = [sys1, d1, d2, d3, q]  # d1 at 0, d2 at 30 (bucket 32), d3 at 47 (64)
    e1 = StandInVllm(model, model_dir, prefixed(cluster, 0, "standin-distance"), "flash")
    core = e1.scheduler.core
    rounds = precompute_requests(core, segments)
    assert [[p.get("pikv_distance", 0) for _, p in r] for r in rounds] == [[0], [32, 64]]
    assert precompute(e1.generate, core, segments) == 4
    sys_key = core.client.key_of(sys1)
    at = core.client.prefix_key_at
    keys = [sys_key, core.client.key_of(d1, sys_key), core.client.key_of(d2, at(sys_key, 32)),
            core.client.key_of(d3, at(sys_key, 64))]
    wait_stored(cluster, keys)
    # Adjacent copies of d2 and d3 were never computed: only their buckets'.
    assert stored(cluster, [core.client.key_of(d, sys_key) for d in (d2, d3)]) == [False, False]
    assert core.stats.distant_unloaded == 0

    # Engine 2, on the other node: every document P2P, only the question computed.
    e2 = StandInVllm(model, model_dir, prefixed(cluster, 1, "standin-distance"), "flash")
    prompt, lengths = sum(segments, []), [len(s) for s in segments]
    deadline = time.monotonic() + 10
    while e2.scheduler.core.num_matched_tokens(prompt, lengths) < len(prompt) - len(q):
        assert time.monotonic() < deadline, "the controller never located the documents"
        time.sleep(0.05)
    logits, provided = e2.run(prompt, {"pikv_segments": lengths})
    assert provided == len(prompt) - len(q)
    want = distance_reference(model, lengths, pow2)(prompt)[-len(q):]
    err = (logits - want).abs().max().item()
    adjacent = distance_reference(model, lengths, lambda d: 0)(prompt)[-len(q):]
    adjacent_err = (adjacent - want).abs().max().item()
    print(f"distance buckets: max |logit error| {err:.3g}; adjacent instead: {adjacent_err:.3g}")
    assert err <= 1e-4
    assert adjacent_err > 100 * max(err, 1e-6), "the check could not tell buckets from adjacent"

    # Another order: d2 now adjacent (bucket 0), d1 at 17 (16), d3 at 64 still.
    other = [sys1, d2, d1, d3, q]
    assert precompute(e2.generate, e2.scheduler.core, other) == 2
    assert e2.worker.core.stats.errors == 0 and e2.scheduler.core.stats.errors == 0


def test_a_store_at_a_distance_without_its_system_prompt_stores_nothing(cluster, tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, zlib.crc32(b"unloaded"))
    sys1, d1 = t(20), t(30)
    e = StandInVllm(model, model_dir, prefixed(cluster, 0, "standin-unloaded"), "flash")
    core = e.scheduler.core
    _, provided = e.run(sys1 + d1, {"pikv_save": True, "pikv_segments": [20, 30],
                                    "pikv_distance": 32})
    assert provided == 0
    assert core.stats.distant_unloaded == 1
    key = core.client.key_of(d1, core.client.prefix_key_at(core.client.key_of(sys1), 32))
    assert e.worker.core.wait_for_saves() == 0
    assert stored(cluster, [key]) == [False]


@pytest.mark.parametrize("distance", [-1, "32", True, 2.0, 1 << 31, 33])
def test_a_malformed_distance_loads_and_stores_nothing_and_is_counted(cluster, tmp_path,
                                                                      distance):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, 5)
    sys1, d1 = t(20), t(30)
    e = StandInVllm(model, model_dir, prefixed(cluster, 0, "standin-malformed"), "flash")
    e.generate([(sys1, {"pikv_save": True})])
    logits, provided = e.run(sys1 + d1, {"pikv_save": True, "pikv_segments": [20, 30],
                                         "pikv_distance": distance})
    assert provided == 0 and logits.shape[0] == 50
    assert e.scheduler.core.stats.unchunked == {"distance_malformed": 1}


def test_distance_buckets_need_prefixed_mode(cluster, tmp_path):
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    with pytest.raises(Exception, match="needs attention-mode prefixed"):
        StandInVllm(model, model_dir, settings(cluster, 0, "standin-iso",
                                               **{"distance-buckets": "pow2"}), "flash")


def test_a_document_missing_at_its_bucket_loads_its_adjacent_copy_until_precomputed(
        cluster, tmp_path):
    """Requests alone store documents adjacent to the system prompt (bucket
    0): a prompt using one at a distance loads that copy (plain prefixed's
    answer for it, counted) rather than computing it; precompute still
    sees the bucket's copy missing, computes it, and the prompt then loads
    that one (the distance reference's answer)."""
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, zlib.crc32(b"adjacent"))
    sys1, d1, d2, q = t(20), t(30), t(17), t(5)
    e = StandInVllm(model, model_dir, prefixed(cluster, 0, "standin-adjacent"), "flash")
    core = e.scheduler.core
    for doc in (d1, d2):  # ordinary requests: each stores its document at bucket 0
        e.run(sys1 + doc + q, {"pikv_segments": [20, len(doc), 5]})
    assert e.worker.core.wait_for_saves() == 0
    sys_key = core.client.key_of(sys1)
    wait_stored(cluster, [core.client.key_of(d, sys_key) for d in (d1, d2)])

    segments = [sys1, d1, d2, q]  # d2 at 30: bucket 32, which nobody computed
    prompt, lengths = sum(segments, []), [len(s) for s in segments]
    before = core.client.stats()["planned_adjacent"]
    logits, provided = e.run(prompt, {"pikv_segments": lengths})
    assert provided == len(prompt) - len(q)
    assert core.client.stats()["planned_adjacent"] == before + 1
    adjacent = distance_reference(model, lengths, lambda d: 0)(prompt)[-len(q):]
    assert (logits - adjacent).abs().max().item() <= 1e-4

    assert precompute(e.generate, core, segments) == 1  # d2 at its bucket
    logits, provided = e.run(prompt, {"pikv_segments": lengths})
    assert provided == len(prompt) - len(q)
    want = distance_reference(model, lengths, pow2)(prompt)[-len(q):]
    assert (logits - want).abs().max().item() <= 1e-4
    assert (adjacent - want).abs().max().item() > 1e-2


def test_a_resumed_store_request_that_cannot_load_its_system_prompt_saves_nothing(cluster,
                                                                                  tmp_path):
    """A store at a distance admitted with its system prompt loaded, then
    preempted and admitted again with nothing to load (vLLM computes the
    system prompt where it sits): the document is no longer computed at
    that distance, so the first admission's save must not go out."""
    model, model_dir = make_model(tmp_path, MODELS[0], torch.float32)
    t = tokens_for(model, zlib.crc32(b"resumed"))
    sys1, d1 = t(20), t(30)
    e = StandInVllm(model, model_dir, prefixed(cluster, 0, "standin-resumed"), "flash")
    e.generate([(sys1, {"pikv_save": True})])
    connector = e.scheduler
    request = SimpleNamespace(request_id="resumed", prompt_token_ids=sys1 + d1,
                              kv_transfer_params={"pikv_save": True, "pikv_segments": [20, 30],
                                                  "pikv_distance": 32},
                              num_computed_tokens=0)
    assert connector.get_num_new_matched_tokens(request, 0) == (20, False)
    blocks = SimpleNamespace(get_block_ids=lambda: ([0, 1, 2, 3],))
    connector.update_state_after_alloc(request, blocks, 20)
    assert [f.distance for f in connector._saves["resumed"].forms] == [32]
    # Preempted; admitted again with nothing loaded.
    connector.update_state_after_alloc(request, blocks, 0)
    output = SimpleNamespace(
        scheduled_new_reqs=[SimpleNamespace(req_id="resumed", prompt_token_ids=sys1 + d1,
                                            block_ids=([0, 1, 2, 3],), num_computed_tokens=0)],
        scheduled_cached_reqs=SimpleNamespace(req_ids=[], new_block_ids=[],
                                              num_computed_tokens=[], resumed_req_ids=set()),
        num_scheduled_tokens={"resumed": 50})
    assert connector.build_connector_meta(output).saves == []
