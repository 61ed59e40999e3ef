"""One vLLM engine (the offline LLM API, vLLM's own scheduler and workers)
with pikv's connector enabled as users enable it (docs/vllm.md), running a
list of tasks from a JSON file and writing what vLLM answered:

  run_engine.py JOB.json OUT.json

JOB: {"model": dir, "dtype": "float32"|"bfloat16", "pikv": {client
settings: local-node, controller, curve keys...} or null (vLLM alone),
"engine": {extra LLM(...) arguments}, "in_process": bool, "tasks": [...]};
a task is
  {"op": "precompute", "segments": [[ids]...]}   chunks pikv lacks, computed and stored
                                                 (in the mode the settings name)
  {"op": "precompute_many", "prompts": [[[ids]...]...]}  the same for many prompts, each
                                                 round batched over them
  either may carry "cache_salt": its requests are vLLM's salted requests
  {"op": "generate", "prompt": [ids], "segments": [lengths] | null,
   "max_tokens": n, "logprobs": k,               greedy; logprobs of the output, and of
   "prompt_logprobs": true,                      the prompt unless false;
   "params": {...}}                              more kv_transfer_params (a chunked one's)
  {"op": "generate_many", "prompts": [{"prompt", "segments"}...], ...}
                                                 one batch: vLLM schedules them together
  {"op": "fault", "kill": pid}                   SIGKILL a process, then go on
  {"op": "metrics"}                              vLLM's counters (preemptions...)
Each answer carries vLLM's own count of tokens it did not compute
(num_cached_tokens). A separate process per engine. vLLM spawns its
engine core and a worker from it, as it does in production; with
"in_process" both run in this process instead (one start instead of three,
about 20 s less per engine: the tests that check answers use it, the fault
tests and the timing benchmarks keep vLLM's processes)."""

import json
import os
import signal
import sys
import time


def connector_config(settings):
    return {"kv_connector": "PikvConnector", "kv_connector_module_path": "pikv.vllm",
            "kv_role": "kv_both", "kv_load_failure_policy": "recompute",
            "kv_connector_extra_config": settings}


def logprob_dicts(steps):
    """vLLM's per-position logprobs as [{token: logprob}] (None kept)."""
    return [None if s is None else {str(t): lp.logprob for t, lp in s.items()} for s in steps]


def precompute_many(llm, core, prompts):
    """precompute() for many prompts' segments at once: each round of
    pikv.vllm.precompute_requests batched over the prompts (the same
    request once), so vLLM schedules them together. Returns how many
    requests ran."""
    from pikv.vllm import precompute_requests
    from vllm import SamplingParams

    rounds = [{}, {}]
    for segments in prompts:
        for r, requests in enumerate(precompute_requests(core, segments)):
            for tokens, params in requests:
                rounds[r].setdefault((tuple(tokens), json.dumps(params, sort_keys=True)),
                                     (tokens, params))
    for requests in rounds:
        if requests:
            batch = list(requests.values())
            llm.generate([{"prompt_token_ids": t} for t, _ in batch],
                         [SamplingParams(max_tokens=1, extra_args={"kv_transfer_params": p})
                          for _, p in batch], use_tqdm=False)
    return sum(len(r) for r in rounds)


def main():
    job = json.load(open(sys.argv[1]))
    # vLLM's CPU backend binds each engine's OpenMP threads to cores it picks
    # without regard to other engines: two engines on a host (or an engine
    # and its spawned worker) share one core, 10x slower. The OS places them.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    if job.get("in_process"):
        # Read when vLLM makes its engine; on the CPU the worker can share
        # the process only when the engine core does.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM, SamplingParams

    engine = dict(model=job["model"], dtype=job["dtype"], skip_tokenizer_init=True,
                  enforce_eager=True, enable_prefix_caching=False,
                  max_model_len=job.get("max_model_len", 4096), seed=0,
                  disable_log_stats=False)
    if job.get("pikv") is not None:
        engine["kv_transfer_config"] = connector_config(job["pikv"])
    if job.get("in_process"):
        engine["distributed_executor_backend"] = "uni"
    engine.update(job.get("engine", {}))
    started = time.monotonic()
    llm = LLM(**engine)
    out = {"startup_s": time.monotonic() - started, "answers": []}
    core = None
    for task in job["tasks"]:
        if task["op"] == "precompute":
            from pikv.vllm import connector_core, precompute_with_llm
            if core is None:
                core = connector_core(llm)
            t0 = time.monotonic()
            computed = precompute_with_llm(llm, core, task["segments"], task.get("cache_salt"))
            out["answers"].append({"computed": computed, "seconds": time.monotonic() - t0})
        elif task["op"] == "precompute_many":
            from pikv.vllm import connector_core
            if core is None:
                core = connector_core(llm)
            t0 = time.monotonic()
            out["answers"].append({"requests": precompute_many(llm, core, task["prompts"]),
                                   "seconds": time.monotonic() - t0})
        elif task["op"] in ("generate", "generate_many"):
            prompts = task["prompts"] if task["op"] == "generate_many" else [task]
            k = task.get("logprobs", 5)
            samplings = [SamplingParams(
                temperature=0, max_tokens=task.get("max_tokens", 4), logprobs=k,
                prompt_logprobs=k if task.get("prompt_logprobs", True) else None,
                skip_reading_prefix_cache=False, detokenize=False,
                extra_args={"kv_transfer_params": {"pikv_segments": p["segments"],
                                                   **p.get("params", {})}}
                if p.get("segments") else None) for p in prompts]
            t0 = time.monotonic()
            salted = {"cache_salt": task["cache_salt"]} if task.get("cache_salt") else {}
            results = llm.generate([{"prompt_token_ids": p["prompt"], **salted} for p in prompts],
                                   samplings, use_tqdm=False)
            seconds = time.monotonic() - t0
            for result in results:
                completion = result.outputs[0]
                out["answers"].append({
                    "seconds": seconds,
                    "tokens": list(completion.token_ids),
                    "logprobs": logprob_dicts(completion.logprobs),
                    "prompt_logprobs": logprob_dicts(result.prompt_logprobs or []),
                    "num_cached_tokens": result.num_cached_tokens,
                    "finish_reason": completion.finish_reason})
        elif task["op"] == "fault":
            os.kill(task["kill"], signal.SIGKILL)
            out["answers"].append({"killed": task["kill"]})
        elif task["op"] == "metrics":
            # A labelled counter by its label too (pikv's unchunked requests by reason).
            out["answers"].append({
                m.name + (f":{m.labels['reason']}" if "reason" in m.labels else ""): m.value
                for m in llm.get_metrics()
                if isinstance(getattr(m, "value", None), (int, float))})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
