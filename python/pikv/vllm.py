"""pikv.vllm.PikvConnector: vLLM's KVConnectorBase_V1 over pikv's
engine-neutral ConnectorCore. Thin on purpose: every decision lives in the
core, which is tested; this file maps vLLM's calls onto it.

Enable with
  --no-enable-prefix-caching --kv-transfer-config '{"kv_connector": "PikvConnector",
    "kv_connector_module_path": "pikv.vllm", "kv_role": "kv_both",
    "kv_connector_extra_config": {"local-node": "ipc:///run/pikv/node.sock",
      "controller": "tcp://controller:7300", "separator": [6, 6]}}'
(docs/vllm.md). A request names its segments with kv_transfer_params
{"pikv_segments": [lengths]} or through the configured separator; requests
with {"pikv_save": true} (what `precompute` sends) are stored once computed.
vLLM itself is not installed where pikv is developed: this adapter has run
only under the test suite's stand-in of vLLM's connector calls.
"""

import os
from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from pikv.connector import ConnectorCore
from pikv.tensors import TORCH_DTYPES

# Keys of kv_connector_extra_config that are the adapter's, not client settings.
_ADAPTER_KEYS = ("separator", "settings_file", "kv_layout", "threads", "path")


@dataclass
class _Load:
    req_id: str
    tokens: list
    lengths: list
    block_ids: list
    num_tokens: int


@dataclass
class _Save:
    req_id: str
    tokens: list
    block_ids: list


@dataclass
class PikvConnectorMetadata(KVConnectorMetadata):
    loads: list = field(default_factory=list)
    saves: list = field(default_factory=list)


def _client_settings(vllm_config, extra):
    """Client settings: the engine's model, then kv_connector_extra_config."""
    model = vllm_config.model_config
    settings = {"model-id": model.model, "max-model-len": model.max_model_len}
    config_json = os.path.join(model.model, "config.json")
    if os.path.isfile(config_json):
        settings["model-config"] = config_json
    cache_dtype = getattr(vllm_config.cache_config, "cache_dtype", "auto")
    if cache_dtype == "auto":
        settings["dtype"] = TORCH_DTYPES.get(str(model.dtype), "bf16")
    settings.update({k: v for k, v in extra.items() if k not in _ADAPTER_KEYS})
    return settings


class PikvConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        if getattr(vllm_config.cache_config, "enable_prefix_caching", False):
            # vLLM would hash chunk-isolated KV as if it were ordinary prefix KV.
            raise ValueError("PikvConnector needs vLLM's prefix caching off "
                             "(--no-enable-prefix-caching)")
        extra = dict(self._kv_transfer_config.kv_connector_extra_config or {})
        self._core = ConnectorCore(_client_settings(vllm_config, extra),
                                   settings_file=extra.get("settings_file", ""),
                                   block_size=vllm_config.cache_config.block_size,
                                   separator=extra.get("separator"),
                                   threads=int(extra.get("threads", 1)),
                                   path=extra.get("path", "auto"))
        # Sliding-window and chunked layers: vLLM's hybrid KV cache manager
        # keeps only their window, and block_ids[0] is the full layers' group.
        scheduler = getattr(vllm_config, "scheduler_config", None)
        self._core.require_whole_cache(getattr(scheduler, "disable_hybrid_kv_cache_manager", False))
        self._kv_layout = extra.get("kv_layout")
        # Scheduler side.
        self._loads = {}  # req_id -> (tokens, lengths, num_tokens), until its blocks are known
        self._saves = {}  # req_id -> [tokens, block_ids]: computed standalone, stored once done
        # Worker side.
        self._failed_blocks = set()

    @property
    def core(self) -> ConnectorCore:
        return self._core

    # --- scheduler side -------------------------------------------------------

    @staticmethod
    def _params(request):
        # A request's parameters come from whoever sent it: a dict or nothing.
        params = getattr(request, "kv_transfer_params", None)
        return params if isinstance(params, dict) else {}

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        lengths = self._params(request).get("pikv_segments")
        matched = self._core.num_matched_tokens(request.prompt_token_ids, lengths)
        return max(0, matched - num_computed_tokens), False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        params = self._params(request)
        tokens = request.prompt_token_ids
        if num_external_tokens > 0 and tokens is not None:
            # Loaded from position 0: prefix caching is off, nothing is computed locally.
            self._loads[request.request_id] = (list(tokens), params.get("pikv_segments"),
                                               num_external_tokens)
        if params.get("pikv_save") is True and tokens and request.request_id not in self._saves:
            self._saves[request.request_id] = [list(tokens), []]

    def build_connector_meta(self, scheduler_output):
        meta = PikvConnectorMetadata()
        progress = {}  # req_id -> tokens computed once this step is done
        for new in scheduler_output.scheduled_new_reqs:
            block_ids = list(new.block_ids[0])
            if new.req_id in self._loads:
                tokens, lengths, num_tokens = self._loads.pop(new.req_id)
                meta.loads.append(_Load(new.req_id, tokens, lengths, block_ids, num_tokens))
            if new.req_id in self._saves:
                self._saves[new.req_id][1] = block_ids
            progress[new.req_id] = (new.num_computed_tokens +
                                    scheduler_output.num_scheduled_tokens.get(new.req_id, 0))
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            if req_id not in self._saves:
                continue
            new_blocks = cached.new_block_ids[i]
            if new_blocks is not None:
                self._saves[req_id][1] += list(new_blocks[0])
            progress[req_id] = (cached.num_computed_tokens[i] +
                                scheduler_output.num_scheduled_tokens.get(req_id, 0))
        for req_id, done in progress.items():
            if req_id in self._saves and done >= len(self._saves[req_id][0]):
                tokens, block_ids = self._saves.pop(req_id)
                meta.saves.append(_Save(req_id, tokens, block_ids))
        self._loads.clear()  # a load not scheduled this step is planned again
        return meta

    def request_finished(self, request, block_ids):
        self._loads.pop(request.request_id, None)
        self._saves.pop(request.request_id, None)
        return False, None

    # --- worker side ----------------------------------------------------------

    def register_kv_caches(self, kv_caches):
        self._core.register_kv_caches(kv_caches, layout=self._kv_layout)

    def start_load_kv(self, forward_context, **kwargs):
        meta = self._get_connector_metadata()
        for load in meta.loads:
            result = self._core.load(load.tokens, load.block_ids, load.num_tokens, load.lengths)
            self._failed_blocks |= result.failed_block_ids

    def wait_for_layer_load(self, layer_name):
        # On a device, start_load_kv queued each layer's writes on a stream
        # of its own: the forward pass waits for this layer only. Elsewhere
        # every layer was written before the forward pass.
        self._core.wait_for_layer(layer_name)

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        # On a device, each layer of a save is gathered as the forward pass
        # produces it; elsewhere wait_for_save gathers every layer at once.
        try:
            saves = self._get_connector_metadata().saves
        except Exception:  # no metadata bound: nothing to save (never into the engine loop)
            return
        if saves:
            self._core.save_layer(layer_name, [(s.req_id, s.tokens, s.block_ids) for s in saves])

    def wait_for_save(self):
        # The gather happens now (the blocks may be reused after this
        # returns); the puts go on in the background.
        for save in self._get_connector_metadata().saves:
            self._core.save(save.tokens, save.block_ids, 0, wait=False, save_id=save.req_id)

    def get_block_ids_with_load_errors(self):
        failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def shutdown(self):
        self._core.wait_for_saves()


def missing_segments(core: ConnectorCore, segments):
    """The segments before the question that pikv does not hold yet."""
    plan = core.client.plan([list(s) for s in segments])
    return [list(segments[c.segment]) for c in plan.chunks if c.source == "miss"]


def precompute(generate, core: ConnectorCore, segments):
    """Computes each missing segment of a prompt as a request of its own (the
    segment alone, from position 0: isolated by construction) and stores it,
    before the prompt itself runs. `generate(list_of_token_lists, params)` runs
    requests with kv_transfer_params `params`; `precompute_with_llm` gives one
    for vLLM's offline LLM. Returns how many segments were computed."""
    todo = missing_segments(core, segments)
    if todo:
        generate(todo, {"pikv_save": True})
    return len(todo)


def precompute_with_llm(llm, core: ConnectorCore, segments):
    """precompute() through a vllm.LLM (one output token per segment)."""
    from vllm import SamplingParams

    def generate(prompts, params):
        sampling = SamplingParams(max_tokens=1, extra_args={"kv_transfer_params": params})
        llm.generate([{"prompt_token_ids": p} for p in prompts], sampling)

    return precompute(generate, core, segments)
