"""Two ranks of vLLM's own TP group on CPU (its shared-memory collectives,
as a TP-2 engine's workers have them) running saves in a row through
pikv.vllm.gather_to_first and pikv.tensor_parallel, rank 0 the slower, as
it is in an engine (it stores each whole between its gathers):

  tp_group.py SAVES OUT.json

Writes {"wholes": [[rank-0 value, rank-1 value] | "failed", ...]}: what
rank 0 assembled at each save. Rank 1's part of save 1 is marked failed.
A rank that does not finish is killed after 60 s and the file is not
written."""

import json
import os
import socket
import sys
import time

import torch
import torch.multiprocessing as mp

RANKS, FAILED_SAVE, SLOW_S = 2, 1, 0.05


def rank_main(rank, port, saves, results):
    os.environ["VLLM_DIST_IDENT"] = f"pikv-tp-group-{port}"  # names the shared memory
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import (get_tp_group, init_distributed_environment,
                                                 initialize_model_parallel)
    from vllm.platforms import current_platform

    from pikv.errors import InvalidArgument
    from pikv.tensor_parallel import HeadShare, TensorParallel
    from pikv.vllm import gather_to_first

    current_platform.import_kernels()  # vLLM's shared-memory ops
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(world_size=RANKS, rank=rank, local_rank=rank,
                                     distributed_init_method=f"tcp://127.0.0.1:{port}",
                                     backend="gloo")
        initialize_model_parallel(tensor_model_parallel_size=RANKS)
    group = get_tp_group()
    communicator = type(group.device_communicator.dist_module).__name__
    tp = TensorParallel(HeadShare(rank, RANKS, RANKS), gather_to_first(group))
    wholes = []
    for save in range(saves):
        # (layers, planes, tokens, this rank's head, dim)
        part = torch.full((2, 2, 16, 1, 8), float(100 * save + rank))
        try:
            whole = tp.assemble(part, ok=not (rank == 1 and save == FAILED_SAVE))
        except InvalidArgument:
            whole = "failed"
        if rank == 0:
            wholes.append(whole if whole == "failed" else
                          [whole[:, :, :, h].unique().tolist() for h in range(RANKS)])
            time.sleep(SLOW_S)
        elif whole is not None:
            raise AssertionError("a rank other than 0 got the whole")
    results.put((rank, communicator, wholes))


def main():
    saves, out = int(sys.argv[1]), sys.argv[2]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    ranks = [ctx.Process(target=rank_main, args=(r, port, saves, results)) for r in range(RANKS)]
    for r in ranks:
        r.start()
    got = {}
    try:
        for _ in ranks:
            rank, communicator, wholes = results.get(timeout=60)
            got[rank] = (communicator, wholes)
    finally:
        for r in ranks:
            r.kill()
    with open(out, "w") as f:
        json.dump({"communicator": got[0][0], "wholes": got[0][1]}, f)


if __name__ == "__main__":
    main()
