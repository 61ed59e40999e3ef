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
how it is proven where no accelerator is lent. Where the cache's slots are
is pikv.paged's (by the layout names of pikv.layouts); how host memory
reaches the device is pikv.staging's.
"""

import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from pikv import _pikv
from pikv.errors import Error, InvalidArgument, Timeout
from pikv.paged import DeviceKv
from pikv.staging import Staging

_TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


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
        # One load stream (CUDA); host memory to the device (staging.py):
        # leased objects straight from the node's arena, page-locked once,
        # the rest through pinned buffers reused by every load.
        self._stream = torch.cuda.Stream(kv.device) if self._cuda else None
        self._staging = Staging(client, kv.device, pin_arena and pikv_cuda)

    @property
    def direct_copies(self):
        """Chunks copied to the device straight from the node's arena."""
        return self._staging.direct_copies

    def close(self):
        """Releases the page-locked arena (also done when collected)."""
        self._staging.close(self._stream)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to release to
            pass

    def begin(self):
        """A load on the load stream (CUDA) or in place (elsewhere)."""
        if self._stream is not None:
            self._stream.synchronize()  # the staging buffers are free again
        self._staging.begin()
        return DeviceLoad(self.kv, self._stream)

    def stage(self, load: DeviceLoad, obj, chunk, slots):
        """Checks a chunk (raises before anything is written) and queues its
        copy to the device on the load stream (into fresh memory: nothing
        waits for the engine). A leased object is checked again once copied
        off (on CUDA from the arena: once the copy landed, in write())."""
        tables = self.client.prepare_remap(obj, chunk, list(slots), self.kv.layout)
        host = _view_payload(obj, tables)
        if self.kv.share is not None:  # a TP rank: its own heads, read in place
            host = self.kv.share.of(host)
        slots_t = torch.as_tensor(list(slots), dtype=torch.int64)
        kept = torch.nonzero(slots_t >= 0).flatten()
        copied = None
        with torch.cuda.stream(load.stream) if load.stream else nullcontext():
            payload, direct = self._staging.to_device(host)
            small = self._staging.small_to_device
            cos = small(torch.from_numpy(tables["cos"]))
            sin = small(torch.from_numpy(tables["sin"]))
            every = small(slots_t)  # the fused kernel reads every token's slot
            b, o = self.kv.index(slots_t[kept])  # torch ops index the kept ones
            keep = small(kept)
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

    def save(self, tokens, slots, virtual_start=0, wait=True, sys_key="", scope="",
             gathered=None):
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
        return self.client.store_with(list(tokens), nbytes, write, virtual_start, wait, sys_key,
                                      scope)

