"""pikv.device: chunk KV into and out of an engine's paged cache wherever
the cache lives (CUDA, ROCm, an Ascend NPU through torch_npu, or the CPU),
with the engine's own torch.

Loading a chunk: pikv's C++ checks everything its own remap checks (the
lease, the object against the namespace and the chunk's key, the slots
against the cache's geometry) and computes the rotations in double
(`Client.prepare_remap`); nothing is written before that passes. Then one
host-to-device copy of the payload (through a reusable pinned staging
buffer on CUDA, so the copy is asynchronous), and per layer on the
device: K rotated in fp32 by the layer's own rotation (a pure rotation by
the chunk's shift, or the encoding at each actual position for pre-RoPE
objects; NeoX or interleaved pairs, partial rotary, MLA's rope part after
the latent; NoPE layers as they are), rounded once to the cache dtype and
scattered into the paged blocks; V copied. The math is the C++ kernels'
(a' = a c - b s, b' = b c + a s in fp32): bit for bit with the portable
kernel, within one rounding of the fused-multiply-add one. On CUDA, where
pikv was built with nvcc and the cache has plain strides (vLLM's GPU
layouts), one launch of pikv's fused CUDA remap writes every layer of a
chunk instead of per-layer torch ops: the same math, one kernel.

Saving: the chunk's slots gathered on the device, then one device-to-host
copy straight into the object's payload in the local node's arena
(`Client.store_with`); the node seals it as any store.

On CPU tensors the same code runs with no copies and no streams; that is
how it is proven where no accelerator is lent.
"""

import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from pikv import _pikv
from pikv.errors import Error, InvalidArgument, Timeout
from pikv.paged import PACKINGS, Plane, geometry
from pikv.tensors import TORCH_DTYPES, geometry_layout, kv_layout

_TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


class DeviceKv:
    """An engine's per-layer paged KV tensors on one torch device, for the
    torch path: the pikv.KvLayout that describes their geometry (checked
    as any) and each layer's planes (pikv.paged: K and V, or MLA's one),
    addressed by slot whatever the packing."""

    def __init__(self, layers, layout=None, axes=None, described=None):
        """`layout`: a pikv.tensors layout name, or one of pikv.paged's
        PACKINGS (vLLM's 4-D caches); `axes` spells a strided 5-D order;
        `described`: the pikv.KvLayout already made of these layers."""
        layers = list(layers)
        self.tensors = layers
        if layout in PACKINGS:
            self.planes = [PACKINGS[layout](t) for t in layers]
            self.layout = described or geometry_layout(layers, self.planes)
        else:
            self.layout = described or kv_layout(layers, layout=layout, axes=axes)
            self.planes = [strided_planes(t, self.layout.axes) for t in layers]
        self.device = layers[0].device
        self.dtype = layers[0].dtype
        self.block_size = self.layout.block_size
        self.num_slots = self.layout.block_size * self.layout.num_blocks
        self.heads, self.head_dim = geometry(self.planes[0])[:2]

    @property
    def num_layers(self):
        return len(self.planes)

    def strided_layout(self):
        """A pikv.KvLayout of these layers by their real strides, which the
        fused CUDA remap writes through; None where a packing splits a
        token's offsets or dims (vLLM's CPU packings)."""
        if self.layout.axes is not None:  # described by kv_layout: real strides already
            return self.layout
        first = self.planes[0]
        if any(len(p.offset_parts) != 1 or len(p.dim_parts) != 1 for p in first):
            return None
        strides = first[0].view.stride()
        if strides[3] != 1 or any(p.view.stride() != strides
                                  for planes in self.planes for p in planes):
            return None
        es = first[0].view.element_size()
        gap = {(planes[-1].view.data_ptr() - planes[0].view.data_ptr()) for planes in self.planes}
        if len(gap) != 1 or next(iter(gap)) % es:
            return None
        base = [planes[0].view.data_ptr() for planes in self.planes]
        # Each layer's memory from its plane base to the end of its storage
        # (a strided view may span more than its numel).
        storages = [t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
                    for t in self.tensors]  # torch < 2.0: storage()
        nbytes = [st.nbytes() - (b - st.data_ptr()) for st, b in zip(storages, base)]
        mla = len(first) == 1
        sb, so, sh = strides[:3]
        built = _pikv.KvLayout(TORCH_DTYPES[str(self.dtype)], "mla" if mla else "standard",
                               self.heads, self.head_dim, self.block_size,
                               self.layout.num_blocks,
                               (next(iter(gap)) // es, sb, so, self.head_dim if mla else sh),
                               base, nbytes, self.device.type == "cpu")
        built.tensors = self.tensors  # the memory lives as long as the layout
        return built

    def index(self, slots):
        """(block, offset) index tensors on the device for these slots, each
        checked to be a slot of the cache (a wrapped or out-of-range index
        would read another block, or fault the device)."""
        s = torch.as_tensor(slots, dtype=torch.int64)
        if s.numel() and (int(s.min()) < 0 or int(s.max()) >= self.num_slots):
            raise InvalidArgument(f"slots must be in 0..{self.num_slots - 1}")
        b, o = s // self.block_size, s % self.block_size
        if self.device.type == "cuda":  # no wait on the engine's stream
            return (b.pin_memory().to(self.device, non_blocking=True),
                    o.pin_memory().to(self.device, non_blocking=True))
        return b.to(self.device), o.to(self.device)

    def gather(self, slots):
        """The slots' K and V, (layers, planes, tokens, heads, dim), contiguous,
        in the cache dtype, on the device: a chunk object's payload order."""
        out, index = self.empty_payload(len(slots)), self.index(slots)
        for layer in range(self.num_layers):
            self.gather_layer(layer, index, out)
        return out

    def empty_payload(self, tokens):
        """Room on the device for gather_layer to fill: a chunk of `tokens`."""
        return torch.empty((self.num_layers, len(self.planes[0]), tokens, self.heads,
                            self.head_dim), dtype=self.dtype, device=self.device)

    def gather_layer(self, layer, index, out):
        """One layer of a gather into out[layer] (as the forward pass produces
        it, so saving overlaps the rest of it); `index` is index(slots)."""
        for p, plane in enumerate(self.planes[layer]):
            out[layer, p] = plane.take(plane.index(*index))

    def put(self, layer, plane, index, values):
        """values (tokens, heads, dim) into one plane of a layer's slots."""
        target = self.planes[layer][plane]
        target.put(target.index(*index), values)


def strided_planes(t, axes):
    """A strided 5-D (or 3-D MLA) tensor's planes, its axes named by `axes`."""
    if "p" not in axes:  # MLA: (block, offset, row), one head
        v = t.permute(*[axes.index(a) for a in "bod"])[:, :, None, :]
        return [Plane(v, (v.shape[1],), (v.shape[3],))]
    v = t.permute(*[axes.index(a) for a in "pbohd"])
    return [Plane(v[p], (v.shape[2],), (v.shape[4],)) for p in range(2)]


def _view_payload(obj, tables):
    """The object's payload as (layers, planes, tokens, heads, dim), viewed in
    place (the zero-copy lease or the fetched buffer), read-only."""
    with warnings.catch_warnings():  # torch warns that the buffer is read-only: it is never written
        warnings.simplefilter("ignore", UserWarning)
        raw = torch.frombuffer(memoryview(obj), dtype=torch.uint8)
    start = tables["payload_offset"]
    flat = raw[start:start + tables["payload_nbytes"]].view(_TORCH[tables["dtype"]])
    planes = 1 if tables["kv_format"] == "mla" else 2
    return flat.view(tables["num_layers"], planes, tables["num_tokens"], tables["num_kv_heads"],
                     tables["head_dim"])


def rotate(k, cos, sin, rotary, offset, neox):
    """Rotates k (tokens, heads, dim), fp32, in place: its dims
    offset..offset+rotary by (cos, sin) of shape (1 or tokens, rotary / 2),
    the C++ kernels' math. Returns k."""
    half = rotary // 2
    part = k[..., offset:offset + rotary]
    a, b = (part[..., :half], part[..., half:]) if neox else (part[..., 0::2], part[..., 1::2])
    c, s = cos[:, None, :], sin[:, None, :]
    ra, rb = a * c - b * s, b * c + a * s  # both computed before either is written
    a.copy_(ra)
    b.copy_(rb)
    return k


@dataclass
class _Staged:
    """One chunk checked and on its way to the device."""
    payload: torch.Tensor  # (layers, planes, tokens, heads, dim) on the device
    tables: dict
    cos: torch.Tensor  # (sets, rows, rotary / 2) fp32 on the device
    sin: torch.Tensor
    block: torch.Tensor  # the kept tokens' block and offset, on the device
    offset: torch.Tensor
    keep: torch.Tensor  # indices of the tokens with a slot (not -1)
    chunk: object  # its plan entry (the lease)
    obj: object = None  # the object (fused remap: its header)
    slots: torch.Tensor = None  # every token's slot (-1 skipped), on the device (fused remap)
    copied: object = None  # copied straight from the lease: the event its copy landed at


@dataclass
class DeviceLoad:
    """Chunks loading into a DeviceKv: staged (checked, copied to the device),
    then written layer by layer on the load stream, an event after each
    layer (none on CPU, where each layer is written at once)."""
    kv: DeviceKv
    stream: object = None
    staged: list = field(default_factory=list)
    events: list = field(default_factory=list)

    def wait_for_layer(self, layer):
        """Makes the engine's current stream wait until `layer` is written."""
        if self.events:
            torch.cuda.current_stream(self.kv.device).wait_event(self.events[layer])


class _PinnedArenas:
    """Arenas page-locked in this process, once each however many remappers
    copy from them (the driver refuses a second registration); released
    with the last, the mapping kept until then."""

    def __init__(self):
        self._held = {}  # address -> [arena, users]

    def pin(self, arena):
        held = self._held.get(arena.address)
        if held is None:
            _pikv.cuda_host_register(arena.address, arena.size)
            held = self._held[arena.address] = [arena, 0]
        held[1] += 1

    def unpin(self, arena):
        held = self._held.get(arena.address)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del self._held[arena.address]
            try:
                _pikv.cuda_host_unregister(arena.address)
            except (Error, OSError):
                pass  # released with the mapping


_PINNED = _PinnedArenas()


class DeviceRemapper:
    """Loads fetched chunk objects into a DeviceKv and saves chunks out of it,
    through a pikv.Client. One per engine worker; not thread-safe."""

    def __init__(self, client, kv: DeviceKv, fused=None, pin_arena=True):
        """`fused`: on CUDA, write every layer of a chunk in one launch of
        pikv's CUDA remap (the default where pikv was built with nvcc, its
        CUDA runtime sees a device, and the cache has plain strides), rather
        than per layer in torch ops; a launch that fails falls back to those.
        `pin_arena`: on CUDA, page-lock the local node's arena (once, all of
        it, now) and copy leased objects from it directly."""
        client.check_layout(kv.layout)  # the client's namespace, or nothing is stored as it
        self.client = client
        self.kv = kv
        self._cuda = kv.device.type == "cuda"
        pikv_cuda = self._cuda and hasattr(_pikv, "cuda_device_count") and \
            _pikv.cuda_device_count() > 0
        self._fused = None
        if pikv_cuda and fused is not False:
            try:
                self._fused = kv.strided_layout()
            except ValueError:
                if fused:
                    raise
        if fused and self._fused is None:
            raise InvalidArgument("the fused remap needs a CUDA cache of plain strides and a pikv "
                                  "built with nvcc whose CUDA runtime sees the device")
        # One load stream (CUDA); pinned staging buffers for host-to-device
        # copies, reused by every load once the previous one's copies are done.
        self._stream = torch.cuda.Stream(kv.device) if self._cuda else None
        self._pinned, self._next = [], 0
        # The local node's arena, page-locked once: leased objects then go to
        # the device in one copy, with no bounce through a pinned buffer.
        self._pin_arena = pin_arena and pikv_cuda
        self._arena = None
        self.direct_copies = 0  # chunks copied straight from the arena
        self._refresh_arena()

    def _to_device(self, host):
        """(host tensor on the device, whether it was copied from the leased
        memory directly), queued on the current stream."""
        if self.kv.device.type == "cpu":
            return host, False
        if not self._cuda:
            return host.to(self.kv.device), False
        if self._in_pinned_arena(host):
            self.direct_copies += 1
            return host.to(self.kv.device, non_blocking=True), True
        n = host.numel() * host.element_size()
        if self._next == len(self._pinned) or self._pinned[self._next].numel() < n:
            buffer = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            self._pinned[self._next:self._next + 1] = [buffer]
        staging = self._pinned[self._next][:n].view(host.dtype).view(host.shape)
        self._next += 1
        staging.copy_(host)
        return staging.to(self.kv.device, non_blocking=True), False

    def _small_to_device(self, host):
        """A small host tensor (tables, indices) to the device without
        waiting for the copies queued before it."""
        if not self._cuda:
            return host.to(self.kv.device)
        return host.pin_memory().to(self.kv.device, non_blocking=True)

    def _refresh_arena(self):
        """Page-locks the local node's arena if it is new (the first time,
        or the node restarted): at set-up, and before each load."""
        if not self._pin_arena:
            return
        arena = self.client.zero_copy_arena()
        if arena is None or (self._arena is not None and self._arena.address == arena.address):
            return
        self._unpin_arena()
        try:
            _PINNED.pin(arena)
        except (Error, OSError) as e:
            warnings.warn(f"pikv: the node's arena could not be page-locked ({e}); leased "
                          "objects go through a pinned buffer")
            self._pin_arena = False
            return
        self._arena = arena

    def _in_pinned_arena(self, host):
        if self._arena is None:
            return False
        start, end = host.data_ptr(), host.data_ptr() + host.numel() * host.element_size()
        return self._arena.address <= start and end <= self._arena.address + self._arena.size

    def _unpin_arena(self):
        if self._arena is not None:
            if self._stream is not None:
                self._stream.synchronize()  # no copy reads it any more
            _PINNED.unpin(self._arena)
            self._arena = None

    def close(self):
        """Releases the page-locked arena (also done when collected)."""
        self._unpin_arena()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to release to
            pass

    def begin(self):
        """A load on the load stream (CUDA) or in place (elsewhere)."""
        if self._stream is not None:
            self._stream.synchronize()  # the staging buffers are free again
        self._next = 0
        self._refresh_arena()
        return DeviceLoad(self.kv, self._stream)

    def stage(self, load: DeviceLoad, obj, chunk, slots):
        """Checks a chunk (raises before anything is written) and queues its
        copy to the device on the load stream (into fresh memory: nothing
        waits for the engine). A leased object is checked again once copied
        off (on CUDA from the arena: once the copy landed, in write())."""
        tables = self.client.prepare_remap(obj, chunk, list(slots), self.kv.layout)
        host = _view_payload(obj, tables)
        slots_t = torch.as_tensor(list(slots), dtype=torch.int64)
        kept = torch.nonzero(slots_t >= 0).flatten()
        copied = None
        with torch.cuda.stream(load.stream) if load.stream else nullcontext():
            payload, direct = self._to_device(host)
            cos = self._small_to_device(torch.from_numpy(tables["cos"]))
            sin = self._small_to_device(torch.from_numpy(tables["sin"]))
            every = self._small_to_device(slots_t)  # the fused kernel reads every token's slot
            b, o = self.kv.index(slots_t[kept])  # torch ops index the kept ones
            keep = self._small_to_device(kept)
            if direct:
                copied = torch.cuda.Event()
                copied.record(load.stream)
        if not direct and not self.client.lease_held(chunk):
            raise Timeout("the lease on this chunk's object expired while it was copied off")
        load.staged.append(_Staged(payload, tables, cos, sin, b, o, keep, chunk, obj, every,
                                   copied))

    def write(self, load: DeviceLoad):
        """Writes the staged chunks after what the engine's stream queued
        (the cache's last use): on CUDA one fused launch per chunk, else
        layer by layer (on the load stream, an event after each layer, where
        there is one). Returns how many of them are good: those before the
        first whose lease ran out before it was copied off (copied from the
        arena: before the copy landed; on the CPU, where a leased payload is
        read in place: before it was read). The rest are not written."""
        good = len(load.staged)
        for i, s in enumerate(load.staged):
            if s.copied is not None:
                s.copied.synchronize()
                if not self.client.lease_held(s.chunk):
                    good = i
                    break
        staged, layers = load.staged[:good], self.kv.num_layers
        if load.stream:
            load.stream.wait_stream(torch.cuda.current_stream(self.kv.device))
        if self._fused is not None and self._write_fused(load, staged):
            layers = 0
        for layer in range(layers):
            with torch.cuda.stream(load.stream) if load.stream else nullcontext():
                for s in staged:
                    self._write_layer(s, layer)
                if load.stream:
                    event = torch.cuda.Event()
                    event.record(load.stream)
                    load.events.append(event)
        if self.kv.device.type == "cpu":
            good = next((i for i, s in enumerate(staged)
                         if not self.client.lease_held(s.chunk)), good)
        load.staged = []  # the payloads on the device go once their writes are queued
        return good

    def _write_fused(self, load, staged):
        """One launch of pikv's CUDA remap per chunk. False (and the fused
        path off from now on) where a launch fails: torch ops write them."""
        try:
            with torch.cuda.stream(load.stream):
                for s in staged:
                    self.client.remap_cuda(s.obj, self._fused, s.payload.data_ptr(),
                                           s.slots.data_ptr(), s.cos.data_ptr(),
                                           s.sin.data_ptr(), load.stream.cuda_stream)
                event = torch.cuda.Event()
                event.record(load.stream)
        except (Error, RuntimeError) as e:  # pikv's checks, or torch's CUDA errors
            warnings.warn(f"pikv: the fused CUDA remap failed ({e}); writing with torch ops")
            self._fused = None
            return False
        load.events = [event] * self.kv.num_layers
        return True

    def _write_layer(self, s: _Staged, layer):
        t = s.tables
        index = (s.block, s.offset)
        k = s.payload[layer, 0].index_select(0, s.keep)
        rotation = t["layer_rotation"][layer]
        if rotation >= 0:
            rows = s.cos.shape[1]
            cos = s.cos[rotation] if rows == 1 else s.cos[rotation].index_select(0, s.keep)
            sin = s.sin[rotation] if rows == 1 else s.sin[rotation].index_select(0, s.keep)
            k = rotate(k.float(), cos, sin, t["rotary_dim"], t["rope_offset"], t["neox"])
        self.kv.put(layer, 0, index, k.to(self.kv.dtype))
        if s.payload.shape[1] == 2:
            self.kv.put(layer, 1, index, s.payload[layer, 1].index_select(0, s.keep))

    def remap(self, obj, chunk, slots):
        """One chunk, checked, copied and written; returns when it is written."""
        load = self.begin()
        self.stage(load, obj, chunk, slots)
        good = self.write(load)
        if load.stream:
            load.stream.synchronize()
        if not good:
            raise Timeout("the lease on this chunk's object expired while it was read")

    def save(self, tokens, slots, virtual_start=0, wait=True, sys_key="", gathered=None):
        """Stores a chunk gathered on the device (its slots gathered now, or
        `gathered`, from gather_layer): one device-to-host copy straight into
        the object's payload."""
        if len(slots) != len(tokens):
            raise InvalidArgument(f"{len(tokens)} tokens, {len(slots)} slots")
        gathered = self.kv.gather(slots) if gathered is None else gathered

        def write(view):
            dst = torch.frombuffer(view, dtype=gathered.dtype).view(gathered.shape)
            dst.copy_(gathered)  # waits for the device: the memory is the node's after this

        nbytes = gathered.numel() * gathered.element_size()
        return self.client.store_with(list(tokens), nbytes, write, virtual_start, wait, sys_key)

