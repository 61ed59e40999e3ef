"""pikv.paged addresses every per-layer KV cache vLLM allocates, checked
against vLLM's own writers and views on tensors of the exact shapes vLLM
makes: its CPU attention kernel's cache op for each ISA packing, and its
GPU backends' split of the 4-D tensor for every KVCacheLayout (made by
vLLM's create_kv_cache_views), TP shards and MLA included."""

import pytest
import torch

from pikv.paged import DeviceKv

vllm_ops = pytest.importorskip("vllm._custom_ops")
from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheTensor,  # noqa: E402
                                        MLAAttentionSpec, compute_layout_strides,
                                        create_kv_cache_views)
from vllm.v1.kv_cache_layout import KVCacheLayout  # noqa: E402

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def random_kv(tokens, heads, dim, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(tokens, heads, dim, generator=g).to(dtype),
            torch.randn(tokens, heads, dim, generator=g).to(dtype))


def scattered_slots(tokens, blocks, block_size, seed=1):
    """Tokens spread over blocks out of order, crossing block ends."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(blocks, generator=g)
    slots = (order[:, None] * block_size + torch.arange(block_size)[None, :]).flatten()
    return slots[3:3 + tokens]


def vllm_cpu_write(kv, k, v, slots, isa):
    """What vLLM's CPU attention does with a layer's K and V (cpu_attn.py's
    do_kv_cache_update): the (block, head) pages halved, then its op."""
    B, H, N, C = kv.shape
    key_cache, value_cache = kv.view(B, H, 2 * N, C // 2).chunk(2, dim=2)
    vllm_ops.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, slots, isa)


CPU_CASES = [(isa, dtype, n, d) for isa in ("vec", "vec16", "amx") for dtype in DTYPES
             for n, d in ((32, 64), (128, 128), (64, 80))
             if not (isa == "amx" and (dtype != torch.bfloat16 or d % 32))
             and not (isa == "vec16" and d % 32 == 0 and d != 64)]


def cpu_has_amx():
    """vLLM's amx cache op runs only on a CPU with AMX tiles (not on AMD's
    EPYC, nor Intel before Sapphire Rapids); it refuses the layer there."""
    supported = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(supported and supported())


@pytest.mark.parametrize("isa,dtype,block_size,dim", CPU_CASES)
def test_vllm_cpu_attention_packings_read_and_write_what_vllms_op_does(isa, dtype, block_size,
                                                                        dim):
    if isa == "amx" and not cpu_has_amx():
        pytest.skip("this CPU has no AMX: vLLM's amx packing cannot be written here, not checked")
    blocks, heads, tokens = 5, 2, 2 * block_size + 7
    k, v = random_kv(tokens, heads, dim, dtype, seed=block_size + dim)
    slots = scattered_slots(tokens, blocks, block_size)
    packing = "vllm_cpu_amx" if isa == "amx" else "vllm_cpu_vec"

    theirs = torch.zeros(blocks, heads, block_size, 2 * dim, dtype=dtype)
    vllm_cpu_write(theirs, k, v, slots, isa)
    got = DeviceKv([theirs], layout=packing).gather(slots.tolist())
    assert torch.equal(got[0, 0], k) and torch.equal(got[0, 1], v)

    ours = torch.zeros_like(theirs)
    kv = DeviceKv([ours], layout=packing)
    index = kv.index(slots.tolist())
    kv.put(0, 0, index, k)
    kv.put(0, 1, index, v)
    assert torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8))


def test_a_packing_that_is_not_the_kernels_reads_other_bytes():
    """The names matter: vec read as amx (or as the GPU order) is wrong, so
    the adapter must take the packing from the layer's declared ISA."""
    dtype, n, d = torch.bfloat16, 32, 64
    k, v = random_kv(20, 2, d, dtype, seed=3)
    slots = scattered_slots(20, 3, n)
    cache = torch.zeros(3, 2, n, 2 * d, dtype=dtype)
    vllm_cpu_write(cache, k, v, slots, "vec")
    for wrong in ("vllm_cpu_amx", "vllm"):
        got = DeviceKv([cache], layout=wrong).gather(slots.tolist())
        assert not torch.equal(got[0, 0], k)


def vllm_views(layout, spec, blocks=4, layers=2):
    """The per-layer tensors vLLM's allocator makes for a layout."""
    strides = compute_layout_strides(spec, blocks, layers, layout)
    tensor = KVCacheTensor(size=spec.page_size_bytes * blocks * layers,
                           layers=[f"l{i}" for i in range(layers)],
                           layer_stride=strides[0], block_stride=strides[1])
    raw = torch.zeros(tensor.size, dtype=torch.int8)
    return create_kv_cache_views(raw, spec, blocks, layout, tensor)


@pytest.mark.parametrize("layout", list(KVCacheLayout), ids=lambda l: l.name)
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float32), ids=str)
def test_vllm_gpu_backends_4d_caches_in_every_layout(layout, dtype):
    """FlashAttention, FlashInfer, Triton and FlexAttention split the 4-D
    (blocks, heads, block_size, 2*dim) tensor as kv.transpose(1, 2).split(dim)
    and write K and V at (block, offset); pikv reads and writes the same
    elements, whatever order vLLM's layout puts the axes in memory."""
    heads, dim, block_size = 2, 64, 16
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=heads, head_size=dim,
                             dtype=dtype)
    layers = vllm_views(layout, spec)
    slots = scattered_slots(40, 4, block_size)
    kv = DeviceKv(layers, layout="vllm")
    index = kv.index(slots.tolist())
    for i, layer in enumerate(layers):
        k, v = random_kv(40, heads, dim, dtype, seed=i)
        kv.put(i, 0, index, k)
        kv.put(i, 1, index, v)
        key_cache, value_cache = layer.transpose(1, 2).split(dim, dim=-1)  # vLLM's split
        b, o = slots // block_size, slots % block_size
        assert torch.equal(key_cache[b, o], k) and torch.equal(value_cache[b, o], v)
    for i in range(len(layers)):  # a layer's writes never land in another's
        key_cache, _ = layers[i].transpose(1, 2).split(dim, dim=-1)
        assert torch.equal(kv.gather(slots.tolist())[i, 0], key_cache[b, o])


def test_a_tensor_parallel_shard_is_addressed_by_its_own_heads():
    """With TP, each rank's cache holds kv_heads / TP heads: the same
    packings over fewer heads."""
    full = torch.zeros(3, 4, 32, 128, dtype=torch.bfloat16)
    shard = torch.zeros(3, 2, 32, 128, dtype=torch.bfloat16)
    k, v = random_kv(10, 4, 64, torch.bfloat16, seed=5)
    slots = scattered_slots(10, 3, 32)
    vllm_cpu_write(full, k, v, slots, "vec")
    vllm_cpu_write(shard, k[:, 2:].contiguous(), v[:, 2:].contiguous(), slots, "vec")
    got = DeviceKv([shard], layout="vllm_cpu_vec").gather(slots.tolist())
    assert torch.equal(got[0, 0], k[:, 2:]) and torch.equal(got[0, 1], v[:, 2:])
    assert DeviceKv([shard], layout="vllm_cpu_vec").heads == 2


def test_vllm_mla_rows():
    spec = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=torch.bfloat16)
    layers = vllm_views(KVCacheLayout.LBNHC, spec)
    kv = DeviceKv(layers, layout="vllm_mla")
    rows = torch.randn(9, 1, 576).to(torch.bfloat16)
    slots = scattered_slots(9, 4, 16)
    kv.put(1, 0, kv.index(slots.tolist()), rows)
    b, o = slots // 16, slots % 16
    assert torch.equal(layers[1].squeeze(1)[b, o], rows[:, 0])  # what vLLM's MLA layer binds
    assert kv.gather(slots.tolist()).shape == (2, 1, 9, 1, 576)


def test_shapes_that_are_not_the_named_packing_are_refused():
    with pytest.raises(ValueError, match="2\\*head_dim"):
        DeviceKv([torch.zeros(2, 2, 16, 8, 64)], layout="vllm_cpu_vec")
    with pytest.raises(ValueError, match="page densely"):
        DeviceKv([torch.zeros(3, 2, 32, 256)[..., :128]], layout="vllm_cpu_vec")
    with pytest.raises(ValueError, match="in 16s"):
        DeviceKv([torch.zeros(3, 2, 24, 128, dtype=torch.bfloat16)], layout="vllm_cpu_amx")


def test_every_packing_vllm_is_mapped_to_is_a_packed_layout_pikv_addresses():
    from pikv.layouts import LAYOUTS, is_packed
    from pikv.paged import PACKED_PLANES
    from pikv.vllm import _CPU_ISAS
    named = set(_CPU_ISAS.values()) | {"vllm", "vllm_mla"}
    assert all(is_packed(name) for name in named), named
    assert set(PACKED_PLANES) == {n for n, layout in LAYOUTS.items() if layout.packed}
