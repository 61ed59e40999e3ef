"""Tensor parallelism on the torch path (pikv.tensor_parallel): a chunk
object holds every KV head whatever the engine's TP size, so chunks stored
by a TP-1 engine load into each rank of a TP-2 engine and the reverse,
exactly. The ranks are processes of their own (tp_rank.py), gathering over
gloo as vLLM's workers do; the TP-1 engine's worker is this process. The
same run inside vLLM itself: tests/vllm/test_vllm_tp.py."""

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from conftest import CONFIGS, HERE
from pikv.connector import ConnectorCore
from pikv.errors import InvalidArgument
from pikv.paged import DeviceKv
from pikv.tensor_parallel import HeadShare, TensorParallel

MODEL = os.path.join(CONFIGS, "llama-3.2-1b.json")  # 16 layers, 8 KV heads of 64
LAYERS, HEADS, DIM, BLOCK, BLOCKS = 16, 8, 64, 16, 4


def test_a_rank_holds_the_heads_vllm_gives_it():
    assert [(HeadShare(r, 2, 8).first, HeadShare(r, 2, 8).count) for r in range(2)] == \
        [(0, 4), (4, 4)]
    # Fewer heads than ranks: each head on size / heads ranks.
    assert [HeadShare(r, 4, 2).first for r in range(4)] == [0, 0, 1, 1]
    assert HeadShare(1, 2, 1).whole and not HeadShare(1, 2, 8).whole
    for rank, size, heads in ((0, 2, 3), (2, 2, 8), (0, 4, 6)):
        with pytest.raises(InvalidArgument):
            HeadShare(rank, size, heads)


def test_a_head_every_rank_holds_is_stored_by_rank_0_alone_without_a_gather():
    """MLA's latent row (and a model of one KV head): rank 0's part is the
    whole; no rank waits on the others."""
    def no_gather(tensor, dim):
        raise AssertionError("a whole share needs no gather")

    part = torch.ones(2, 1, 3, 1, 8)
    assert TensorParallel(HeadShare(0, 2, 1), no_gather).assemble(part) is part
    assert TensorParallel(HeadShare(1, 2, 1), no_gather).assemble(part) is None
    with pytest.raises(InvalidArgument):
        TensorParallel(HeadShare(0, 2, 1), no_gather).assemble(part, ok=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings(cluster):
    return dict(cluster.security_settings(), **{
        "local-node": cluster.nodes[0]["ipc"], "controller": cluster.controller,
        "model-config": MODEL, "dtype": "f32", "model-id": "tp-test",
        "attention-mode": "isolated", "locate-budget": "200ms"})


def tokens(seed, n):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(8, 30000, (n,), generator=g).tolist()


def full_engine(cluster):
    """A TP-1 engine's worker: every head in its cache."""
    layers = [torch.zeros(BLOCKS, HEADS, BLOCK, 2 * DIM) for _ in range(LAYERS)]
    core = ConnectorCore(settings(cluster), block_size=BLOCK, path="torch")
    core.register_kv_caches(layers, layout="vllm_cpu_vec")
    return core, DeviceKv(layers, layout="vllm_cpu_vec")


def test_chunks_stored_at_one_tp_size_load_exactly_at_another(cluster, tmp_path):
    g = torch.Generator().manual_seed(3)
    one_kv, two_kv = (torch.randn(LAYERS, 2, BLOCK, HEADS, DIM, generator=g) for _ in range(2))
    one_tokens, two_tokens, failing, question = (tokens(s, n) for s, n in
                                                 ((1, BLOCK), (2, BLOCK), (4, BLOCK), (5, 3)))
    # TP 1 stores its chunk.
    core, kv = full_engine(cluster)
    index = kv.index(list(range(BLOCK)))
    for layer in range(LAYERS):
        for plane in range(2):
            kv.put(layer, plane, index, one_kv[layer, plane])
    assert core.save(one_tokens, [0], 0, wait=True)

    # Two ranks store theirs (gathered to rank 0), then load both chunks,
    # the TP-1 one shifted to position 16.
    torch.save(two_kv, tmp_path / "two.pt")
    prompt, lengths = two_tokens + one_tokens + question, [BLOCK, BLOCK, 3]
    job = {"init": f"tcp://127.0.0.1:{free_port()}", "size": 2, "settings": settings(cluster),
           "heads": HEADS, "head_dim": DIM, "layers": LAYERS, "block": BLOCK, "blocks": BLOCKS,
           "values": str(tmp_path / "two.pt"), "save": two_tokens, "failing": failing,
           "prompt": prompt, "lengths": lengths}
    ranks = []
    for rank in range(2):
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps(dict(job, out=str(tmp_path / f"rank{rank}.pt"))))
        ranks.append(subprocess.Popen([sys.executable, os.path.join(HERE, "tp_rank.py"),
                                       str(path), str(rank)], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for rank, p in enumerate(ranks):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, f"rank {rank}:\n{out[-4000:]}"
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    assert [r["saved"] for r in got] == [True, True]
    assert got[0]["failing_saved"] is False and got[0]["save_failures"] == 1, \
        "rank 0 stores nothing of a save whose other part failed"
    assert [r["loaded"] for r in got] == [2 * BLOCK, 2 * BLOCK]

    # TP 1 loads the same prompt: the TP-2 chunk exactly as computed, and
    # each rank's heads exactly as TP 1 placed them (the same rotation).
    result = core.load(prompt, [1, 2, 3], 2 * BLOCK, lengths)
    assert result.loaded_tokens == 2 * BLOCK and not result.failed_block_ids
    full = kv.gather(list(range(BLOCK, 3 * BLOCK)))
    assert torch.equal(full[:, :, :BLOCK], two_kv), "stored at TP 2, loaded at TP 1"
    assert torch.equal(full[:, 1, BLOCK:], one_kv[:, 1]), "V moves as it is"
    assert not torch.equal(full[:, 0, BLOCK:], one_kv[:, 0]), "K is rotated to position 16"
    for rank, r in enumerate(got):
        assert torch.equal(r["kv"], HeadShare(rank, 2, HEADS).of(full)), \
            f"rank {rank}: stored at TP 1 and TP 2, loaded at TP 2"
    assert core.num_matched_tokens(failing + question, [BLOCK, 3]) == 0
