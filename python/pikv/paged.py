"""Where K and V of a token sit in an engine's paged KV tensors: the torch
path's addressing (pikv.device), by the layout's name (pikv.layouts).

Each layer's cache is seen as planes (K and V; MLA's one row plane), each
a strided view of the layer's memory with axes

    (block, *offset parts, head, *dim parts)

so a slot (block, offset) indexes the leading axes and a (heads, dim)
tile is written or read at once. Most layouts need one offset part and
one dim part; packed kernels split them (vLLM's CPU AMX packing stores 16
tokens by pairs of dims as one tile), which strides alone then express.

- Strided layouts (flash, block_major, mla, or any `axes` string):
  `strided_planes` permutes the tensor by its axes.
- Packed layouts (`PACKED_PLANES`, one entry per packed name):
  vllm: vLLM's 4-D (blocks, kv_heads, block_size, 2*head_dim) per layer,
  K then V within each token's row, in any of vLLM's KVCacheLayout orders
  (the tensor's strides carry it): its GPU backends (FlashAttention,
  FlashInfer, Triton, FlexAttention). vllm_mla: vLLM's 4-D MLA (blocks, 1,
  block_size, latent + rope). vllm_cpu_vec, vllm_cpu_amx: vLLM's CPU
  attention backend, which views each (block, head) page of the same 4-D
  tensor as a K half then a V half, packed by the kernel it runs: vec (and
  vec16) keep K transposed (dim-major: [head_dim][block_size]) and V
  row-major; amx keeps K in tiles of 16 tokens by pairs of dims and V in
  tiles of 16 dims by pairs of tokens. The layer's `isa` names which.

`DeviceKv` holds an engine's layers with their planes and the
pikv.KvLayout the C++ side checks chunks against.
"""

import math
from dataclasses import dataclass

import torch

from pikv import _pikv
from pikv.errors import InvalidArgument
from pikv.layouts import LAYOUTS
from pikv.tensors import TORCH_DTYPES, geometry_layout, kv_layout


@dataclass
class Plane:
    view: torch.Tensor  # (block, *offset_parts, head, *dim_parts)
    offset_parts: tuple  # their sizes, outermost first; product = block_size
    dim_parts: tuple  # product = head dim

    def index(self, block, offset):
        """Index tensors for the leading axes of slots (block, offset)."""
        out = [block]
        inner = math.prod(self.offset_parts)
        for size in self.offset_parts:
            inner //= size
            out.append(offset // inner % size if inner > 1 else offset % size)
        return tuple(out)

    def put(self, index, values):
        """values (tokens, heads, dim) into the indexed slots, any dtype the
        view casts from."""
        self.view.index_put_(index, values.reshape(values.shape[:2] + self.dim_parts))

    def take(self, index):
        """(tokens, heads, dim) of the indexed slots."""
        got = self.view[index]
        return got.reshape(got.shape[:2] + (math.prod(self.dim_parts),))


def _strided(t, extra_offset, size, stride):
    return torch.as_strided(t, size, stride, t.storage_offset() + extra_offset)


def _vllm_4d(t):
    """B, H, N, D of vLLM's (blocks, heads, block_size, 2*head_dim)."""
    if t.dim() != 4 or t.shape[3] % 2:
        raise InvalidArgument(f"vLLM's per-layer cache is (blocks, kv_heads, block_size, "
                              f"2*head_dim); got {tuple(t.shape)}")
    B, H, N, C = t.shape
    return B, H, N, C // 2


def _cpu_pages(t):
    B, H, N, D = _vllm_4d(t)
    s = t.stride()
    if s[2:] != (2 * D, 1):
        raise InvalidArgument(f"vLLM's CPU attention packs each (block, head) page densely; "
                              f"strides {s} do not")
    return B, H, N, D, s[0], s[1]


def vllm_planes(t):
    B, H, N, D = _vllm_4d(t)
    kv = t.permute(0, 2, 1, 3)  # (B, N, H, 2D): the strides keep any KVCacheLayout order
    return [Plane(kv[..., :D], (N,), (D,)), Plane(kv[..., D:], (N,), (D,))]


def vllm_mla_planes(t):
    if t.dim() != 4 or t.shape[1] != 1:
        raise InvalidArgument(f"vLLM's MLA cache is (blocks, 1, block_size, latent + rope); got "
                              f"{tuple(t.shape)}")
    return [Plane(t.permute(0, 2, 1, 3), (t.shape[2],), (t.shape[3],))]


def cpu_vec_planes(t):
    B, H, N, D, sb, sh = _cpu_pages(t)
    return [Plane(_strided(t, 0, (B, N, H, D), (sb, 1, sh, N)), (N,), (D,)),
            Plane(_strided(t, N * D, (B, N, H, D), (sb, D, sh, 1)), (N,), (D,))]


def cpu_amx_planes(t):
    B, H, N, D, sb, sh = _cpu_pages(t)
    if N % 16 or D % 16:
        raise InvalidArgument(f"vLLM's AMX packing needs block size and head dim in 16s; "
                              f"got {N}, {D}")
    # K: tiles of 16 tokens, each token's dims in pairs: (n//16)*16D + (d//2)*32 + (n%16)*2 + d%2.
    k = _strided(t, 0, (B, N // 16, 16, H, D // 2, 2), (sb, 16 * D, 2, sh, 32, 1))
    # V: tiles of 16 dims, tokens in pairs: N*D + (d//16)*16N + (n//2)*32 + (d%16)*2 + n%2.
    v = _strided(t, N * D, (B, N // 2, 2, H, D // 16, 16), (sb, 32, 1, sh, 16 * N, 2))
    return [Plane(k, (N // 16, 16), (D // 2, 2)), Plane(v, (N // 2, 2), (D // 16, 16))]


# Per packed layout name: a layer's planes.
PACKED_PLANES = {
    "vllm": vllm_planes,
    "vllm_mla": vllm_mla_planes,
    "vllm_cpu_vec": cpu_vec_planes,
    "vllm_cpu_amx": cpu_amx_planes,
}
if set(PACKED_PLANES) != {name for name, layout in LAYOUTS.items() if layout.packed}:
    raise ImportError("pikv.paged: PACKED_PLANES and pikv.layouts name different packed layouts")


def strided_planes(t, axes):
    """A strided 5-D (or 3-D MLA) tensor's planes, its axes named by `axes`."""
    if "p" not in axes:  # MLA: (block, offset, row), one head
        v = t.permute(*[axes.index(a) for a in "bod"])[:, :, None, :]
        return [Plane(v, (v.shape[1],), (v.shape[3],))]
    v = t.permute(*[axes.index(a) for a in "pbohd"])
    return [Plane(v[p], (v.shape[2],), (v.shape[4],)) for p in range(2)]


def geometry(planes):
    """(heads, head dim, block size, blocks, mla) of a layer's planes."""
    p = planes[0]
    v = p.view
    n_off = len(p.offset_parts)
    return (v.shape[1 + n_off], math.prod(p.dim_parts), math.prod(p.offset_parts), v.shape[0],
            len(planes) == 1)


class DeviceKv:
    """An engine's per-layer paged KV tensors on one torch device, for the
    torch path: the pikv.KvLayout that describes their geometry (checked
    as any) and each layer's planes (pikv.paged: K and V, or MLA's one),
    addressed by slot whatever the packing."""

    def __init__(self, layers, layout=None, axes=None, described=None, share=None):
        """`layout`: a name of pikv.layouts; `axes` spells a strided 5-D
        order; `described`: the pikv.KvLayout already made of these layers.
        `share`: the pikv.tensor_parallel.HeadShare these layers hold (a
        tensor-parallel rank's); `layout` then describes the model's heads,
        as chunk objects hold them, and is never written through."""
        layers = list(layers)
        self.tensors = layers
        if layout in PACKED_PLANES:
            self.planes = [PACKED_PLANES[layout](t) for t in layers]
            self.layout = described or geometry_layout(layers, self.planes)
        else:
            self.layout = described or kv_layout(layers, layout=layout, axes=axes)
            self.planes = [strided_planes(t, self.layout.axes) for t in layers]
        self.device = layers[0].device
        self.dtype = layers[0].dtype
        self.block_size = self.layout.block_size
        self.num_slots = self.layout.block_size * self.layout.num_blocks
        self.heads, self.head_dim = geometry(self.planes[0])[:2]
        self.share = share if share is not None and not share.whole else None
        if self.share is not None:
            if self.heads != share.count:
                raise InvalidArgument(f"rank {share.rank} of {share.size} holds {share.count} of "
                                      f"{share.total} KV heads; its cache has {self.heads}")
            self.layout = geometry_layout(layers, self.planes, heads=share.total)

    @property
    def num_layers(self):
        return len(self.planes)

    def strided_layout(self):
        """A pikv.KvLayout of these layers by their real strides, which the
        fused CUDA remap writes through; None where a packing splits a
        token's offsets or dims (vLLM's CPU packings) or the layers hold a
        share of the heads (the kernel writes every head of a chunk)."""
        if self.share is not None:
            return None
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
