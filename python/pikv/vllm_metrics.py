"""pikv's connector counters inside vLLM: each interval, the growth of the
scheduler's and the workers' ConnectorCore.stats goes into vLLM's stats
(KVConnectorStats: logged as "KV Transfer metrics" and exported by vLLM's
/metrics as vllm:pikv_*_total counters, named in vLLM's prefix, which
LLM.get_metrics() lists; docs/metrics.md).

The payload is a flat {name: count} dict ("unchunked_requests:<reason>"
for the labelled counter): it crosses vLLM's process boundaries as plain
data and sums by name."""

from dataclasses import dataclass

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)

from pikv.connector import UNCHUNKED_REASONS
from pikv.recompute import FALLBACK_REASONS

# Counter -> its help line on /metrics (names are CoreStats' fields).
COUNTERS = {
    "lookups": "Prompts the connector planned (scheduler)",
    "matched_tokens": "Prompt tokens planned to load: what vLLM counts as cached (scheduler)",
    "loads": "Loads run (worker)",
    "loaded_tokens": "Prompt tokens actually loaded into the engine's blocks; a load cut short "
                     "loads fewer and vLLM computes the rest (worker)",
    "load_failures": "Loads that fell short of their plan (worker)",
    "saves": "Segments stored (worker)",
    "save_failures": "Segments whose store failed (worker)",
    "errors": "Unexpected failures turned into a degraded answer (either side)",
    "distant_unloaded": "Documents to store at a distance from the system prompt that were "
                        "not: the system prompt was not there to load (scheduler)",
    "distant_spoiled": "Documents to store at a distance that were not: the system prompt's "
                       "load fell short (worker)",
    "unchunked_requests": "Prompts that asked for chunking and got none, by reason (scheduler)",
    "recomputed_tokens": "Document tokens recomputed in place at load (worker)",
    "selection_tokens": "The blend policy's selection pass, in tokens' worth of every layer "
                        "(worker)",
    "recompute_fallbacks": "Loads that asked for a recompute and got the plain load, by reason "
                           "(worker)",
}
# The counters labelled by reason, and their reasons.
LABELLED = {"unchunked_requests": UNCHUNKED_REASONS, "recompute_fallbacks": FALLBACK_REASONS}


def stats_since(core_stats, reported):
    """(the counters' growth since `reported`, the counters now)."""
    now = core_stats.counters()
    return {k: v - reported.get(k, 0) for k, v in now.items() if v != reported.get(k, 0)}, now


@dataclass
class PikvConnectorStats(KVConnectorStats):
    def reset(self):
        self.data = {}

    def aggregate(self, other):
        for k, v in other.data.items():
            self.data[k] = self.data.get(k, 0) + v
        return self

    def reduce(self):
        return dict(self.data)

    def is_empty(self):
        return not self.data


class PikvPromMetrics(KVConnectorPromMetrics):
    """vllm:pikv_<counter>_total per engine; unchunked requests and
    recompute fallbacks also by reason."""

    def __init__(self, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        self._counters = {
            name: self._counter_cls(
                name=f"vllm:pikv_{name}", documentation=help,
                labelnames=labelnames + (["reason"] if name in LABELLED else []))
            for name, help in COUNTERS.items()}
        self._children = {}  # (engine, payload key) -> the labelled counter

    def observe(self, transfer_stats_data, engine_idx=0):
        for key, value in transfer_stats_data.items():
            name, _, reason = key.partition(":")
            counter = self._counters.get(name)
            reasons = LABELLED.get(name)
            if counter is None or (reason not in reasons if reasons is not None else reason):
                continue  # a payload from another pikv version
            child = self._children.get((engine_idx, key))
            if child is None:
                labels = list(self.per_engine_labelvalues[engine_idx]) + ([reason] if reason else [])
                child = self._children[(engine_idx, key)] = counter.labels(*labels)
            child.inc(value)
