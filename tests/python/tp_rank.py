"""One rank of a tensor-parallel engine's worker, driven as vLLM drives
its workers: every rank gets the same saves and loads in the same order,
its cache holds its share of the KV heads (vLLM's CPU packing), and the
ranks gather to rank 0 over a gloo process group (vLLM's own TP group
on CPU: tests/vllm/tp_group.py).

  tp_rank.py JOB.json RANK

JOB: {"init": a torch.distributed init method, "size": TP, "settings":
client settings, "heads", "head_dim", "layers", "block", "blocks",
"values": a torch file of the saved chunk's K and V (layers, 2, tokens,
heads, dim), "save": its tokens, "failing": tokens of a save that fails on
the last rank, "prompt" and "lengths": what is loaded afterwards, into
blocks 1.., "out": where rank RANK writes {"saved", "failing_saved",
"loaded", "kv"} (torch.save: kv is its heads of the loaded slots)."""

import json
import sys

import torch
import torch.distributed as dist

from pikv.connector import ConnectorCore
from pikv.paged import DeviceKv
from pikv.tensor_parallel import HeadShare, TensorParallel


def main():
    job, rank = json.load(open(sys.argv[1])), int(sys.argv[2])
    size = job["size"]
    dist.init_process_group("gloo", init_method=job["init"], rank=rank, world_size=size)

    def gather(tensor, dim):  # gloo's messages queue: a rank may run ahead of rank 0
        parts = [torch.empty_like(tensor) for _ in range(size)] if rank == 0 else None
        dist.gather(tensor, parts, dst=0)
        return torch.cat(parts, dim) if rank == 0 else None

    share = HeadShare(rank, size, job["heads"])
    block, blocks = job["block"], job["blocks"]
    layers = [torch.zeros(blocks, share.count, block, 2 * job["head_dim"])
              for _ in range(job["layers"])]
    core = ConnectorCore(job["settings"], block_size=block, path="torch")
    core.register_kv_caches(layers, layout="vllm_cpu_vec", tp=TensorParallel(share, gather))

    # The engine computed the chunk: this rank's heads of it are in block 0.
    values = share.of(torch.load(job["values"]))
    writer = DeviceKv(layers, layout="vllm_cpu_vec")
    index = writer.index(list(range(values.shape[2])))
    for layer in range(values.shape[0]):
        for plane in range(2):
            writer.put(layer, plane, index, values[layer, plane])
    saved = core.save(job["save"], [0], 0, wait=True)
    # A save whose blocks only the last rank cannot read: no rank may hang.
    failing_blocks = [blocks + 5] if rank == size - 1 else [0]
    failing_saved = core.save(job["failing"], failing_blocks, 0, wait=True)
    dist.barrier()  # rank 0's stores have landed

    n = sum(job["lengths"][:-1])
    result = core.load(job["prompt"], list(range(1, blocks)), n, job["lengths"])
    kv = writer.gather(list(range(block, block + n)))
    torch.save({"saved": saved, "failing_saved": failing_saved,
                "loaded": result.loaded_tokens, "failed": sorted(result.failed_block_ids),
                "save_failures": core.stats.save_failures, "kv": kv}, job["out"])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
