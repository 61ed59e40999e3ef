"""The engine-neutral connector core: what any engine with a paged KV cache
needs to reuse pikv chunks, without knowing pikv's client.

A request's prompt is segments: [system, chunk, ..., question]. The core
answers how many prompt tokens it can provide (the longest prefix of cached
segments before the question), loads them into the request's blocks at
their actual positions (remap: K re-rotated, V copied), stores segments the
engine computed in the form the reuse mode defines (isolated: alone from
position 0; prefixed: right after the prompt's first segment), and forgets
a request when it ends. KV loaded this way plus the question computed with
ordinary causal attention is exactly the mode's answer (shared/DESIGN.md §4).

Nothing here raises into the engine: a failure (node or controller down, a
chunk evicted between plan and load, a corrupt object, a bad layout) becomes
fewer tokens matched or loaded, a counter in `stats`, and a log line; the
engine recomputes what was not provided.
"""

import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from pikv import _pikv
from pikv.errors import InvalidArgument
from pikv.device import DeviceRemapper
from pikv.layouts import is_packed
from pikv.paged import DeviceKv
from pikv.prompt import UNCHUNKED_REASONS, NotChunked, split_segments  # noqa: F401
from pikv.tensors import kv_layout

log = logging.getLogger("pikv.connector")
UNCHUNKED_LOG_INTERVAL_S = 60.0  # per reason, after its first line
MAX_DISTANCE = 1 << 30  # DistanceBuckets::kMaxDistance: what plan accepts


def slots_of(block_ids, block_size, start, count):
    """Slots of positions start..start+count-1 in a request's blocks."""
    return [block_ids[p // block_size] * block_size + p % block_size
            for p in range(start, start + count)]


@dataclass
class _Gathering:
    """A save gathered layer by layer on the device (the torch path)."""
    slots: list
    index: tuple  # the slots' (block, offset) on the device
    payload: object  # (layers, planes, tokens, heads, dim) on the device
    layers: set = field(default_factory=set)  # those gathered so far


@dataclass
class StoredForm:
    """A segment a request computes in the form its reuse mode stores:
    `tokens` at positions start.. of the request, keyed after the prefix
    whose key is `prefix_key` (prefixed mode, the prefix at the segment's
    distance folded in; "" otherwise), in the request's `scope` (hex; "" =
    none: request_scope in pikv.vllm). `distance` > 0: computed that far
    after the prefix, which is only so when the prefix was loaded whole at
    that distance (a load cut short spoils it: the engine recomputed the
    prefix where it sits)."""
    start: int
    tokens: list
    prefix_key: str = ""
    scope: str = ""
    distance: int = 0

    @property
    def end(self):
        return self.start + len(self.tokens)


class RequestPlan(NamedTuple):
    """A request's plan on the scheduler side (ConnectorCore.plan_request)."""
    matched: int  # prompt tokens pikv provides: the prefix to load
    forms: list  # StoredForm: the segments the engine computes that pikv lacks
    # (source, peer_id, peer_endpoint, adjacent) per chunk, and whether the
    # local node answered: where the worker fetches each from, without planning again
    # (ConnectorCore.load).
    sources: tuple = ()
    local_node_answered: bool = True
    scope: str = ""  # the request's (hex; "" = none), which every key of it is in
    distance: int = 0  # a store at a distance from the system prompt (plan_request)


@dataclass
class LoadResult:
    loaded_tokens: int = 0  # a prefix of the prompt, now in the blocks
    failed_block_ids: set = field(default_factory=set)  # blocks the engine must recompute


@dataclass
class CoreStats:
    """Counters since the core started (pikv.vllm hands their growth to
    vLLM's stats and /metrics)."""
    lookups: int = 0  # prompts planned
    matched_tokens: int = 0  # prompt tokens planned to load
    loads: int = 0
    loaded_tokens: int = 0  # prompt tokens actually loaded (a load cut short: fewer)
    load_failures: int = 0  # loads that fell short of their plan
    saves: int = 0
    save_failures: int = 0
    errors: int = 0  # unexpected exceptions turned into a degraded answer
    # Documents to store at a distance that were not: the system prompt was
    # not there to load (planned), or its load fell short (spoiled at save).
    distant_unloaded: int = 0
    distant_spoiled: int = 0
    unchunked: dict = field(default_factory=dict)  # reason -> prompts that asked and got none
    # Recompute in place at load (pikv.recompute): document tokens computed
    # again, the selection pass's token-layers over the layers (tokens'
    # worth), and loads that asked for it and fell back (reason -> loads).
    recomputed_tokens: int = 0
    selection_tokens: float = 0.0
    recompute_fallbacks: dict = field(default_factory=dict)
    # Audits are the client's to count: client.stats()["audits"], ["audit_mismatches"].

    def counters(self):
        """Every counter by name; unchunked ones as unchunked_requests:<reason>,
        recompute fallbacks as recompute_fallbacks:<reason>."""
        out = {k: v for k, v in vars(self).items()
               if k not in ("unchunked", "recompute_fallbacks")}
        out.update({f"unchunked_requests:{r}": n for r, n in self.unchunked.items()})
        out.update({f"recompute_fallbacks:{r}": n for r, n in self.recompute_fallbacks.items()})
        return out


class ConnectorCore:
    """One per engine process side (scheduler or worker), called by one
    thread at a time: not thread-safe, like the C++ client it owns (one set
    of connections) and its device path. An engine calling from several
    threads makes a core per thread. Saves handed off with wait=False run in
    the C++ client's background; their results are read on the caller's
    thread (`pending`, wait_for_saves).

    `settings`: the client settings (keys of deploy/client.example.yaml, e.g.
    model-id, model-config, local-node, controller); `settings_file` a YAML
    file of them. `block_size`: the engine's tokens per block. `path`: how
    chunks reach the cache: "cpp" (pikv's C++ remap and gather: CPU tensors),
    "torch" (pikv.device: the engine's own torch, any device), or "auto"
    (torch for a cache on a device, else cpp).

    Reuse modes (the client setting attention-mode; `defaults` may give the
    program's own default, as the vLLM connector does): `isolated` stores
    each segment computed alone from position 0; `prefixed` stores the
    first segment (the prefix: a system prompt) so, and every later one
    computed right after it (at positions len(prefix)..), keyed by the
    prefix's key too. `stored_forms` says which segments of a request the
    engine computes in that form; only those are stored. With the setting
    distance-buckets, a prefixed document is loaded from the copy computed
    at the bucket of its distance from the system prompt; copies at a
    distance are computed by store requests (pikv.vllm.precompute).

    Audits: with the setting audit-rate > 0 and `recompute` (a callable
    `recompute(tokens, prefix)` that computes a chunk's tokens right after
    `prefix` (empty in isolated mode: alone, at positions 0..), and returns
    their payload [layer][k|v][token][head][dim] in the KV dtype as one
    contiguous buffer), that share of hits is recomputed and compared before
    it is loaded; a chunk found wrong is reported to the controller (which
    drops it everywhere) and is not loaded: the engine computes it instead.
    Copies at a distance are not audited (`recompute` computes right after
    the prefix: comparing would accuse an honest writer).
    """

    PATHS = ("auto", "cpp", "torch")

    def __init__(self, settings=None, settings_file="", block_size=16, separator=None,
                 threads=1, path="auto", recompute=None, pin_arena=True, defaults=None):
        if path not in self.PATHS:
            raise InvalidArgument(f"path {path!r} is not one of {', '.join(self.PATHS)}")
        self.options = _pikv.Options.load(
            settings_file, {k: str(v) for k, v in (settings or {}).items()},
            {k: str(v) for k, v in (defaults or {}).items()})
        self.prefixed = self.options.attention_mode == "prefixed"
        if self.options.num_layers == 0:
            raise InvalidArgument("no model: give model-config (the model's config.json) or "
                                  "num-layers, num-kv-heads and head-dim")
        self.client = _pikv.Client(self.options)
        self.block_size = block_size
        self.separator = list(separator) if separator else None
        self.threads = threads
        self.stats = CoreStats()
        self._unchunked_logged = {}  # reason -> when its last log line was written
        self.pending = []  # PendingStore of saves handed off without waiting
        self._reaped_failures = 0  # of those, ended and failed before wait_for_saves
        self.path = path
        self.recompute = recompute
        self.pin_arena = pin_arena  # torch path on CUDA: page-lock the node's arena once
        self._layout = None
        self._device = None  # DeviceRemapper on the torch path
        self._device_load = None  # the load whose layers the forward pass waits for
        self._gathering = {}  # torch path: save id -> _Gathering
        self._layer_names = []
        self._tp = None  # pikv.tensor_parallel.TensorParallel of a TP engine's rank

    def require_whole_cache(self, engine_keeps_whole_cache):
        """Raises unless every layer the model windows (sliding or chunked
        attention) keeps the whole prompt in the engine's cache: an engine
        that keeps only the window there (vLLM's hybrid KV cache manager)
        has no room for a whole chunk, so loading one would be wrong."""
        windowed = list(self.options.windowed_layers)
        if windowed and not engine_keeps_whole_cache:
            raise InvalidArgument(
                f"layers {windowed[:8]}{'...' if len(windowed) > 8 else ''} attend over a "
                "window or chunk, and this engine keeps only the window of them: pikv cannot "
                "place whole chunks there (vLLM: --disable-hybrid-kv-cache-manager)")

    # --- scheduler side -------------------------------------------------------

    def segments(self, tokens, lengths=None):
        """split_segments with the engine's separator; None when the prompt
        is not chunked (for whatever reason: plan_request counts why)."""
        try:
            return split_segments(tokens, self.separator, lengths)
        except NotChunked:
            return None

    def _not_chunked(self, e):
        """Counts a prompt that asked for chunking and got none, and says why
        in the log: the first time per reason, then at most once a minute."""
        n = self.stats.unchunked.get(e.reason, 0) + 1
        self.stats.unchunked[e.reason] = n
        now = time.monotonic()
        if now - self._unchunked_logged.get(e.reason, -math.inf) >= UNCHUNKED_LOG_INTERVAL_S:
            self._unchunked_logged[e.reason] = now
            log.warning("pikv: a prompt is not chunked and reuses nothing (%s): %s; "
                        "%d such prompts so far", e.reason, e, n)

    def num_matched_tokens(self, tokens, lengths=None, scope="") -> int:
        """Prompt tokens pikv can provide: the longest prefix of cached segments
        before the question (0 when the prompt is not chunked or on any
        failure). Asks the local node and the controller; changes nothing."""
        return self.plan_request(tokens, lengths, scope=scope).matched

    def plan_request(self, tokens, lengths=None, store_last=False, scope="",
                     distance=None) -> RequestPlan:
        """One request's plan: the prompt tokens pikv can provide
        (num_matched_tokens), the segments pikv lacks that the engine will
        compute, after that prefix, in the form the mode stores (StoredForm),
        and each chunk's source for load. The last segment (the question)
        counts only with `store_last` (a request made to store it:
        precompute); a prompt that is not chunked is then one segment. Asks
        the local node and the controller; changes nothing. `scope`: the
        request's (hex; "" = none), part of every key it reads and stores.
        `distance`: a store request's (precompute_requests), [system prompt,
        document] with the document computed that far after the system
        prompt (which is loaded encoded that far back)."""
        try:
            try:
                segments = split_segments(tokens, self.separator, lengths)
                distance = self._distance_of(distance, segments, store_last)
            except NotChunked as e:
                # A save with no segments named (precompute's) stores its
                # prompt whole: it asked for no chunking.
                if not (store_last and lengths is None) or e.reason == "distance_malformed":
                    self._not_chunked(e)
                if e.reason == "distance_malformed":
                    return RequestPlan(0, [], scope=scope)
                segments = None
            if segments is None:
                whole = [StoredForm(0, list(tokens), "", scope)] if store_last and tokens else []
                return RequestPlan(0, whole, scope=scope)
            plan = self.client.plan(segments, scope=scope, distance=distance)
        except Exception as e:  # never into the engine loop
            self.stats.errors += 1
            log.warning("pikv plan failed: %s", e)
            return RequestPlan(0, [])
        matched = 0
        for chunk in plan.chunks:
            if chunk.source == "miss":
                break
            matched = chunk.actual_start + len(segments[chunk.segment])
        self.stats.lookups += 1
        self.stats.matched_tokens += matched
        misses = {c.segment for c in plan.chunks if c.source == "miss"}
        sources = [(c.source, c.peer_id, c.peer_endpoint, c.adjacent) for c in plan.chunks]
        forms = self.stored_forms(segments, matched, misses, store_last, scope) if not distance \
            else self._distant_form(segments, matched, scope, distance)
        return RequestPlan(matched, forms, sources, plan.local_node_answered, scope, distance)

    def _distance_of(self, distance, segments, store_last):
        """A request's distance (0 for none), or NotChunked where it names
        one pikv cannot compute: a distance is a non-negative integer of a
        store request of [system prompt, document] in prefixed mode."""
        if distance is None or distance == 0 and type(distance) is int:
            return 0
        if (type(distance) is not int or not 0 < distance <= MAX_DISTANCE or not self.prefixed
                or not store_last or segments is None or len(segments) != 2
                or self.client.bucket_of(distance) != distance):  # a bucket, or nobody loads it
            raise NotChunked("distance_malformed")
        return distance

    def _distant_form(self, segments, computed_from, scope, distance):
        """A store request's document computed `distance` tokens after the
        system prompt: stored only when the system prompt is loaded (else
        the engine computes it where it sits, and the document is not at
        that distance from it)."""
        if computed_from != len(segments[0]):
            self.stats.distant_unloaded += 1
            log.warning("pikv: a document to store %d tokens after its system prompt is not "
                        "stored: the system prompt is not in pikv to load", distance)
            return []
        key = self.client.prefix_key_at(self.client.key_of(segments[0], scope=scope), distance)
        return [StoredForm(computed_from, list(segments[1]), key, scope, distance)]

    def stored_forms(self, segments, computed_from, misses, store_last, scope=""):
        """Of `segments`, computed by the engine from token `computed_from`
        on with ordinary causal attention (what comes before loaded), those
        whose KV is what the mode stores and that are in `misses` (or are the
        last, with `store_last`): the first segment (alone from 0, in either
        mode) and, in prefixed mode, the second (right after the prefix: at
        distance 0, the bucket every scheme gives it)."""
        forms, start = [], 0
        last = len(segments) - 1
        for s, seg in enumerate(segments[:2 if self.prefixed else 1]):
            wanted = s in misses or (store_last and s == last)
            if wanted and (s < last or store_last) and start >= computed_from and seg:
                key = self.client.key_of(segments[0], scope=scope) if s > 0 else ""
                forms.append(StoredForm(start, list(seg), key, scope))
            start += len(seg)
        return forms

    # --- worker side ----------------------------------------------------------

    def register_kv_caches(self, layers, layout=None, axes=None, tp=None):
        """The engine's per-layer paged KV tensors (a dict name -> tensor, in
        layer order, or a list). Raises on a layout pikv cannot address: this
        is set-up, not the request path. `tp`: the pikv.tensor_parallel.
        TensorParallel of a rank of a TP engine (its cache holds its share of
        the heads; the torch path loads and saves it)."""
        if isinstance(layers, dict):
            names = list(layers)
            # Layers in model order (a per-layer RoPE plan depends on it):
            # by the first number in each name where every name has one.
            numbers = {n: re.search(r"\d+", n) for n in names}
            if all(numbers.values()):
                names.sort(key=lambda n: int(numbers[n].group()))
            self._layer_names = names
            layers = [layers[n] for n in names]
        tp = tp if tp is not None and tp.share.size > 1 else None
        if is_packed(layout) or tp:  # only pikv.device addresses these
            if self.path == "cpp":
                raise InvalidArgument(f"layout {layout} or a share of the heads (tensor "
                                      "parallelism) is written by pikv.device only: path "
                                      "'torch' or 'auto'")
            kv = DeviceKv(layers, layout=layout, axes=axes, share=tp.share if tp else None)
            built = kv.layout
        else:
            built = kv_layout(layers, layout=layout, axes=axes)
            kv = None
        if built.block_size != self.block_size:
            raise InvalidArgument(f"the cache's blocks hold {built.block_size} tokens, "
                                  f"the engine said {self.block_size}")
        self._layout = built
        self._tp = tp
        torch_path = self.path == "torch" or (self.path == "auto" and not built.host) or \
            tp is not None
        self._device = DeviceRemapper(self.client, kv or DeviceKv(layers, described=built),
                                      pin_arena=self.pin_arena) \
            if torch_path else None

    @property
    def layer_names(self):
        """The registered layers' names, in model order (register_kv_caches)."""
        return list(self._layer_names)

    def _layer_index(self, name_or_index):
        if isinstance(name_or_index, int):
            return name_or_index
        return self._layer_names.index(name_or_index) if name_or_index in self._layer_names \
            else None

    def save_layer(self, name_or_index, saves):
        """Torch path: gathers this layer of each save (save id, tokens,
        block ids, start position) on the device as the forward pass produces it; save()
        then copies what was gathered. A no-op on the C++ path, which gathers
        every layer in save()."""
        if self._device is None:
            return
        try:
            layer = self._layer_index(name_or_index)
            if layer is None:
                return
            for save_id, tokens, block_ids, start in saves:
                if save_id not in self._gathering:
                    slots = slots_of(block_ids, self.block_size, start, len(tokens))
                    kv = self._device.kv
                    self._gathering[save_id] = _Gathering(slots, kv.index(slots),
                                                          kv.empty_payload(len(tokens)))
                g = self._gathering[save_id]
                self._device.kv.gather_layer(layer, g.index, g.payload)
                g.layers.add(layer)
        except Exception as e:  # save() gathers every layer itself then
            self.stats.errors += 1
            log.warning("pikv layer gather failed: %s", e)
            self._gathering.clear()

    def forget_loads(self):
        """The forward pass about to run waits for no earlier load."""
        self._device_load = None

    def wait_for_layer(self, name_or_index):
        """Until the last load has written this layer (on a device: the
        engine's stream waits for that layer's event; elsewhere a no-op)."""
        if self._device_load is None:
            return
        try:
            index = self._layer_index(name_or_index)
            if index is not None:
                self._device_load.wait_for_layer(index)
        except Exception as e:  # never into the engine loop
            self.stats.errors += 1
            log.warning("pikv wait for layer %s failed: %s", name_or_index, e)

    def load(self, tokens, block_ids, num_tokens, lengths=None, planned=None,
             scope="") -> LoadResult:
        """Remaps the cached segments covering the first `num_tokens` prompt
        tokens into the request's blocks, fetching each from where `planned`
        (plan_request's RequestPlan, made on the scheduler side, which carries
        the request's scope) says, or where a plan made now in `scope` says
        when it is None. What could not be loaded
        is reported as failed blocks, from the first segment that failed on."""
        result = LoadResult()
        try:
            if num_tokens <= 0:
                return result
            segments = self.segments(tokens, lengths)
            if segments is None:  # the engine was told these tokens would come
                raise InvalidArgument("the prompt does not split into segments")
            plan = (self.client.plan(segments, planned.sources, planned.local_node_answered,
                                     scope=planned.scope, distance=planned.distance)
                    if planned else self.client.plan(segments, scope=scope))
            objects = self.client.fetch(plan)  # in plan order, None for a miss
            self._audit(plan, objects, segments)
            result.loaded_tokens = self._place(plan, objects, segments, block_ids, num_tokens)
        except Exception as e:
            self.stats.errors += 1
            log.warning("pikv load stopped at token %d: %s", result.loaded_tokens, e)
        self.stats.loads += 1
        self.stats.loaded_tokens += result.loaded_tokens
        if result.loaded_tokens < num_tokens:
            self.stats.load_failures += 1
            first = result.loaded_tokens // self.block_size
            last = (num_tokens - 1) // self.block_size
            result.failed_block_ids = set(block_ids[first:last + 1])
        return result

    def _audit(self, plan, objects, segments):
        """Recomputes a sampled share of the hits and drops those found wrong
        (a miss from there on); the controller is told by the client."""
        if self.recompute is None:
            return
        for i, (chunk, obj) in enumerate(zip(plan.chunks, objects)):
            if obj is None or not self.client.should_audit():
                continue
            prefix = segments[0] if self.prefixed and chunk.segment > 0 else []
            if prefix and not chunk.adjacent and \
                    self.client.bucket_of(chunk.actual_start - len(prefix)) > 0:
                continue  # `recompute` computes right after the prefix, not at a distance
            finding = self.client.audit(obj, chunk,
                                        self.recompute(segments[chunk.segment], prefix),
                                        start=len(prefix))
            if not finding["match"] and not finding["comparable"]:
                objects[i] = None
                log.warning("pikv audit: chunk %s not comparable (%s): not used", chunk.key,
                            finding["where"])
            elif not finding["match"]:
                objects[i] = None
                log.warning("pikv audit: chunk %s (written by %s) differs in %s by %.3g of "
                            "the tolerance (relative L2 %.3g of its bound): reported, recomputed",
                            chunk.key, finding["writer"], finding["where"], finding["worst"],
                            finding["worst_l2"])

    def _place(self, plan, objects, segments, block_ids, num_tokens):
        """Writes the prefix of fetched chunks into the blocks; the tokens it
        covers. On the torch path every chunk is checked and copied to the
        device first, then written layer by layer (wait_for_layer)."""
        loaded = 0
        load = self._device.begin() if self._device else None
        self._device_load = load
        ends = [0]  # the tokens covered after each staged chunk
        try:
            for chunk, obj in zip(plan.chunks, objects):
                n = len(segments[chunk.segment])
                if obj is None or chunk.actual_start >= num_tokens:
                    break
                slots = slots_of(block_ids, self.block_size, chunk.actual_start, n)
                if load:
                    self._device.stage(load, obj, chunk, slots)
                    ends.append(chunk.actual_start + n)
                else:
                    self.client.remap(obj, chunk, slots, self._layout, self.threads)
                loaded = chunk.actual_start + n
        except Exception as e:  # the chunks before this one stay loaded
            self.stats.errors += 1
            log.warning("pikv load stopped at token %d: %s", loaded, e)
        if load:
            try:
                good = self._device.write(load)  # the staged prefix, every check passed
                if good < len(ends) - 1:
                    self.stats.errors += 1
                    log.warning("pikv load: a lease ran out while chunk %d was read", good)
                loaded = ends[good]
            except Exception as e:
                self.stats.errors += 1
                log.warning("pikv device write failed, nothing loaded: %s", e)
                loaded = 0
                # Nothing of it may race the engine's recompute of these blocks.
                self._device_load = None
                if load.stream is not None:
                    load.stream.synchronize()
        return loaded

    def save(self, tokens, block_ids, virtual_start=0, wait=True, save_id=None, prefix_key="",
             scope="", spoiled=False):
        """Stores a segment the engine computed in the mode's form (its tokens
        at positions virtual_start.., after the prefix whose key is
        `prefix_key` in prefixed mode, in the request's `scope`) from the
        request's blocks. True when
        stored (wait) or handed off (not wait: a PendingStore is kept in
        `pending`). `spoiled`: this process knows the segment is not in
        that form (a document at a distance whose prefix load fell short):
        nothing is stored, but a TP rank still joins the save's gather."""
        try:
            payload = None  # torch path: gathered in save_layer, or by every TP rank
            if self._tp is not None:
                payload = self._assemble(tokens, block_ids, virtual_start, save_id, spoiled)
                if payload is None:  # not this rank's to store
                    return True
            elif spoiled:
                self._gathering.pop(save_id, None)
                raise InvalidArgument("its prefix was not loaded at its distance")
            slots = slots_of(block_ids, self.block_size, virtual_start, len(tokens))
            if self._device:
                if payload is None:
                    payload = self._gathered(slots, save_id)
                pending = self._device.save(tokens, slots, virtual_start, wait, prefix_key,
                                            scope, gathered=payload)
            else:
                pending = self.client.store(list(tokens), self._layout, slots,
                                            virtual_start, wait, prefix_key, scope)
            if pending is not None:
                self._reap()
                self.pending.append(pending)
            self.stats.saves += 1
            return True
        except Exception as e:
            self.stats.save_failures += 1
            self.stats.distant_spoiled += spoiled
            log.warning("pikv save failed: %s", e)
            return False

    def _gathered(self, slots, save_id):
        """The save's payload as save_layer gathered it, where it gathered
        every layer of these slots; else None (save gathers it now)."""
        g = self._gathering.pop(save_id, None)
        whole = g is not None and g.slots == slots and \
            len(g.layers) == self._device.kv.num_layers
        return g.payload if whole else None

    def _assemble(self, tokens, block_ids, virtual_start, save_id, spoiled=False):
        """A TP rank's part in a save: its heads, gathered with every other
        rank's (each rank calls this once per save whatever its own part
        came to: pikv.tensor_parallel). The whole payload at the rank that
        stores it, None at the others; raises there where a part failed."""
        kv = self._device.kv
        try:
            if spoiled:
                self._gathering.pop(save_id, None)
                raise InvalidArgument("its prefix was not loaded at its distance")
            slots = slots_of(block_ids, self.block_size, virtual_start, len(tokens))
            part = self._gathered(slots, save_id)
            part, ok = (kv.gather(slots) if part is None else part), True
        except Exception as e:  # the gather below still joins the other ranks'
            log.warning("pikv: this rank's part of a save failed: %s", e)
            part, ok = kv.empty_payload(len(tokens)).zero_(), False
        return self._tp.assemble(part, ok)

    def _reap(self):
        """Forgets the handed-off saves that have ended (each holds its object
        until then), counting those that failed."""
        still = []
        for p in self.pending:
            if not p.done():
                still.append(p)
            elif not p.result():
                self.stats.save_failures += 1
                self._reaped_failures += 1
        self.pending = still

    def wait_for_saves(self) -> int:
        """Waits for saves handed off with wait=False; how many failed (since
        the last call)."""
        failed, self._reaped_failures = self._reaped_failures, 0
        while self.pending:
            if not self.pending.pop().result():
                failed += 1
                self.stats.save_failures += 1
        return failed
