"""Tensor parallelism inside vLLM itself: its CPU backend at TP 2 (two
worker processes, its TP group over gloo and shared memory) and at TP 1,
on two nodes of a secure cluster. A chunk object holds every KV head
whatever the TP size (pikv.tensor_parallel): chunks a TP-1 engine stored
load into the TP-2 engine's ranks, and chunks the TP-2 engine stored
(gathered to its rank 0) load into a TP-1 engine, each pulled P2P; every
answer is checked against the independent float32 reference. The
per-rank path on its own: tests/python/test_tensor_parallel.py."""

import json
import os
import subprocess
import sys

from conftest import BASE_FORM, HERE, engine_settings, rag_prompt, run_engine
from reference import Reference, worst_difference
from test_vllm_e2e import F32_TOLERANCE, STEPS, answer_task, reordered


def check_answer(ref, answer, segments, what):
    """vLLM loaded every chunk and answers as the reference does."""
    prompt, lengths = sum(segments, []), [len(s) for s in segments[:-1]]
    chunk_tokens = sum(lengths)
    assert answer["num_cached_tokens"] == chunk_tokens, what
    tokens, ref_lp = ref.greedy(prompt, lengths, chunk_tokens, STEPS, mode=BASE_FORM["attention-mode"])
    worst, compared = worst_difference(answer, ref_lp, len(prompt))
    print(f"\n{what}: worst |dlogprob| {worst:.3g} over {compared} values; greedy "
          f"{answer['tokens']} vs reference {tokens}")
    assert compared >= STEPS * 5 and worst < F32_TOLERANCE, what
    assert answer["tokens"] == tokens, what


def test_tp1_and_tp2_engines_reuse_each_others_chunks_exactly(cluster, make_model, tmp_path):
    model = make_model("llama", "float32")  # 2 KV heads: one per rank at TP 2
    ref = Reference(model)
    first, second = rag_prompt(seed=1, vocab=2048), rag_prompt(seed=2, vocab=2048)

    stored_at_1 = run_engine(tmp_path, "tp1-store", model, "float32", engine_settings(cluster, 0),
                             [{"op": "precompute", "segments": first}])
    assert stored_at_1["answers"][0]["computed"] == len(first) - 1

    tp2 = run_engine(tmp_path, "tp2", model, "float32", engine_settings(cluster, 1), [
        answer_task(reordered(first)),
        {"op": "precompute", "segments": second},
        answer_task(second)], engine={"tensor_parallel_size": 2}, in_process=False)
    check_answer(ref, tp2["answers"][0], reordered(first), "stored at TP 1, loaded at TP 2")
    assert tp2["answers"][1]["computed"] == len(second) - 1
    check_answer(ref, tp2["answers"][2], second, "stored at TP 2, loaded at TP 2")

    tp1 = run_engine(tmp_path, "tp1-load", model, "float32", engine_settings(cluster, 0),
                     [answer_task(reordered(second))])
    check_answer(ref, tp1["answers"][0], reordered(second), "stored at TP 2, loaded at TP 1")


def test_saves_in_a_row_keep_the_ranks_of_vllms_cpu_group_in_step(tmp_path):
    # vLLM's CPU gather lets rank 1 run ahead of rank 0, which stores each
    # save between its gathers; two collectives ahead, rank 0 waited forever
    # (a TP-2 engine hung in its first step with several saves). Six saves
    # in a row over vLLM's own TP group, rank 0 the slower; rank 1's part of
    # save 1 failed, which fails that save alone.
    out = tmp_path / "tp_group.json"
    subprocess.run([sys.executable, os.path.join(HERE, "tp_group.py"), "6", str(out)],
                   check=True, timeout=180)
    got = json.loads(out.read_text())
    assert got["communicator"] == "_CPUSHMDistributed"  # the engines' shared-memory path
    assert got["wholes"] == [[[100.0 * s], [100.0 * s + 1]] if s != 1 else "failed"
                             for s in range(6)]
