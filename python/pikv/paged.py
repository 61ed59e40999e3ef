"""Where K and V of a token sit in an engine's paged KV tensors, by the
layout's name: the torch path's addressing (pikv.device).

Each layer's cache is seen as planes (K and V; MLA's one row plane), each
a strided view of the layer's memory with axes

    (block, *offset parts, head, *dim parts)

so a slot (block, offset) indexes the leading axes and a (heads, dim)
tile is written or read at once. Most layouts need one offset part and
one dim part; packed kernels split them (vLLM's CPU AMX packing stores 16
tokens by pairs of dims as one tile), which strides alone then express.

Names (`PACKINGS`):
- flash, block_major, mla, or any `axes` string of p, b, o, h, d:
  5-D (or 3-D MLA) tensors whose strides say everything (pikv.tensors).
- vllm: vLLM's 4-D (blocks, kv_heads, block_size, 2*head_dim) per layer,
  K then V within each token's row, in any of vLLM's KVCacheLayout orders
  (the tensor's strides carry it): its GPU backends (FlashAttention,
  FlashInfer, Triton, FlexAttention).
- vllm_mla: vLLM's 4-D MLA (blocks, 1, block_size, latent + rope).
- vllm_cpu_vec, vllm_cpu_amx: vLLM's CPU attention backend, which views
  each (block, head) page of the same 4-D tensor as a K half then a V
  half, packed by the kernel it runs: vec (and vec16) keep K transposed
  (dim-major: [head_dim][block_size]) and V row-major; amx keeps K in
  tiles of 16 tokens by pairs of dims and V in tiles of 16 dims by pairs
  of tokens. The layer's `isa` names which.
"""

import math
from dataclasses import dataclass

import torch

from pikv.errors import InvalidArgument


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


# Per layout name: the layer's planes, and (heads, head dim, block size,
# blocks, MLA) for the C++ geometry checks.
PACKINGS = {
    "vllm": vllm_planes,
    "vllm_mla": vllm_mla_planes,
    "vllm_cpu_vec": cpu_vec_planes,
    "vllm_cpu_amx": cpu_amx_planes,
}


def geometry(planes):
    """(heads, head dim, block size, blocks, mla) of a layer's planes."""
    p = planes[0]
    v = p.view
    n_off = len(p.offset_parts)
    return (v.shape[1 + n_off], math.prod(p.dim_parts), math.prod(p.offset_parts), v.shape[0],
            len(planes) == 1)
