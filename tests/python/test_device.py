"""pikv.device (the torch path an engine's GPU or NPU runs) forced on CPU
tensors, against pikv's C++ remap: every published model config, both K
forms, f32/f16/bf16, MLA, chunks shifted by up to 1,000,000 positions,
every layout; and hostile input refused before anything is written. No
node is needed: objects are built by the client and planned offline."""

import os

import pytest
import torch

import pikv
from conftest import CONFIGS
from pikv.device import DeviceRemapper
from pikv.paged import DeviceKv
from pikv.tensors import kv_layout

CONFIG_FILES = sorted(f for f in os.listdir(CONFIGS) if f.endswith(".json"))
# scripts/gpu-check.sh on a GPU machine: a GPU check that cannot run fails there, never skips.
REQUIRE_GPU = os.environ.get("PIKV_REQUIRE_GPU") == "1"
NO_CUDA = not torch.cuda.is_available() and not REQUIRE_GPU
NO_FUSED = NO_CUDA or (not hasattr(pikv._pikv.Client, "remap_cuda") and not REQUIRE_GPU)
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
BLOCK, BLOCKS = 4, 5
SEGMENTS = [[5, 6, 7], [11, 12, 13, 14, 15, 16, 17], [21, 22]]  # system, chunk, question
SLOTS = [13, 2, -1, 19, 0, 7, 10]  # the chunk's 7 tokens; one is skipped
WRITTEN = [s for s in SLOTS if s >= 0]
# The same chunk after a system prompt of a million tokens: placed at 1,000,000.
FAR = [list(range(1_000_000)), SEGMENTS[1], SEGMENTS[2]]
# (K form, the position K was rotated at, where the chunk is placed): shifts
# up to a million either way; pre-RoPE encoded near and far.
CASES = [(False, 0, SEGMENTS), (False, 1000, SEGMENTS), (False, 1_000_000, SEGMENTS),
         (False, 0, FAR), (True, 0, SEGMENTS), (True, 0, FAR)]


def offline_client(config, dtype):
    return pikv.Client(pikv.Options.load("", {
        "model-config": os.path.join(CONFIGS, config), "model-id": "m", "dtype": dtype,
        "local-node": "", "controller": "", "max-model-len": "131072"}))


def _vllm_as_flash(t):
    """vLLM's 4-D (blocks, H, block, 2D) as the 5-D (2, blocks, block, H, D)
    strided view the C++ remap writes: the same memory."""
    B, H, N, C = t.shape
    s = t.stride()
    return torch.as_strided(t, (2, B, N, H, C // 2), (C // 2, s[0], s[2], s[1], 1),
                            t.storage_offset())


# Per layout: the memory's shape, the (logical) view of it each path is
# given, and the names the C++ path and pikv.device address it by. HND is
# flash's logical shape over (2, blocks, H, block, D); vLLM's 4-D caches
# in both of its KVCacheLayout orders, which the C++ path writes through a
# strided 5-D view of the same memory.
LAYOUTS = {
    "flash": ("2BNHD", lambda t: t, None, "flash", "flash"),
    "block_major": ("B2NHD", lambda t: t, None, "block_major", "block_major"),
    "hnd": ("2BHND", lambda t: t.permute(0, 1, 3, 2, 4), None, "flash", "flash"),
    "mla": ("BND", lambda t: t, None, "mla", "mla"),
    "vllm_hnd": ("BHNC", lambda t: t, _vllm_as_flash, "flash", "vllm"),
    "vllm_nhd": ("BNHC", lambda t: t.permute(0, 2, 1, 3), _vllm_as_flash, "flash", "vllm"),
    "vllm_mla": ("B1ND", lambda t: t, lambda t: t[:, 0], "mla", "vllm_mla"),
}


def make_caches(options, layout, dtype):
    """Two caches of one layout (per-layer tensors, their memory), filled
    alike."""
    L, H, D = options.num_layers, options.num_kv_heads, options.head_dim
    order = LAYOUTS[layout][0]
    sizes = {"2": 2, "1": 1, "B": BLOCKS, "N": BLOCK, "H": H, "D": D, "C": 2 * D}
    g = torch.Generator().manual_seed(3)
    raw = [torch.randn(*[sizes[a] for a in order], generator=g).to(dtype) for _ in range(L)]
    return [t.clone() for t in raw], [t.clone() for t in raw]


def views(layout, raw):
    """(the C++ path's tensors and name, pikv.device's tensors and name)."""
    _, view, cpp_view, cpp_name, dev_name = LAYOUTS[layout]
    logical = [view(t) for t in raw]
    return ([cpp_view(t) for t in logical] if cpp_view else logical, cpp_name,
            logical, dev_name)


def payload_of(options, dtype, seed):
    planes = 1 if options.kv_format == "mla" else 2
    heads = 1 if options.kv_format == "mla" else options.num_kv_heads
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(options.num_layers, planes, len(SEGMENTS[1]), heads, options.head_dim,
                    generator=g).to(dtype)
    return t.contiguous().view(torch.uint8).numpy()


MANTISSA = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}


def compare(a_layers, b_layers, dtype):
    """(elements, bit-equal elements, the largest difference in units of the
    last place of its head vector's largest element): where one side fuses
    a multiply-add (the AVX2 kernel) a rotated dim can differ by one rounding
    of the products, which is that unit, not the result's own."""
    a = torch.stack([t.contiguous() for t in a_layers]) if isinstance(a_layers, list) else a_layers
    b = torch.stack([t.contiguous() for t in b_layers]) if isinstance(b_layers, list) else b_layers
    same = a.view(BITS[dtype]) == b.view(BITS[dtype])
    equal = int(same.sum())
    # Units only where a head vector differs: a whole model's caches in
    # float64 took most of this file's time.
    differs = ~same.all(-1)
    a, b = a[differs].double(), b[differs].double()
    if a.numel() == 0:
        return same.numel(), equal, 0.0
    largest = torch.maximum(a.abs(), b.abs()).amax(-1, keepdim=True).clamp_min(1e-30)
    unit = torch.exp2(torch.floor(torch.log2(largest)) - MANTISSA[dtype])
    return same.numel(), equal, float(((a - b).abs() / unit).max())


@pytest.mark.parametrize("config", CONFIG_FILES)
def test_the_torch_path_equals_the_cpp_remap(config):
    against_the_cpp_remap(config, "cpu")


# Label gpu: the same on a CUDA device, where one is (never here so far).
@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="no CUDA device on this machine: the GPU checks did not run")
@pytest.mark.parametrize("config", CONFIG_FILES)
def test_on_cuda_the_torch_path_equals_the_cpp_remap(config):
    against_the_cpp_remap(config, "cuda", fused=False)


# Label gpu: pikv's fused CUDA remap launched by pikv.device, the same way.
@pytest.mark.gpu
@pytest.mark.skipif(NO_FUSED, reason="no CUDA device, or pikv built without nvcc: the GPU "
                    "checks did not run")
@pytest.mark.parametrize("config", CONFIG_FILES)
def test_on_cuda_the_fused_remap_equals_the_cpp_remap(config):
    against_the_cpp_remap(config, "cuda", fused=True)


# Label gpu: leases from a real node, onto CUDA.
@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="no CUDA device on this machine: the GPU checks did not run")
@pytest.mark.parametrize("pin_arena", [True, False], ids=["arena-pinned", "pinned-buffer"])
def test_on_cuda_leased_chunks_land_as_the_cpp_remap_writes_them(pin_arena):
    if pin_arena and NO_FUSED:
        pytest.skip("pikv built without nvcc: nothing page-locks the arena")
    """Chunks leased in place from a real node, loaded onto CUDA by
    pikv.device (copied from the node's page-locked arena, or through a
    pinned buffer), equal the C++ remap of the same leases on CPU."""
    from conftest import Cluster
    cluster = Cluster(nodes=1)
    try:
        settings = {"local-node": cluster.nodes[0]["ipc"], "controller": cluster.controller,
                    "model-id": "gpu-lease", "dtype": "bf16", "max-model-len": "131072",
                    "model-config": os.path.join(CONFIGS, "llama-3.2-1b.json")}
        settings.update(cluster.security_settings())
        client = pikv.Client(pikv.Options.load("", {k: str(v) for k, v in settings.items()}))
        for seed, tokens in enumerate(SEGMENTS[:2]):
            payload = torch.from_numpy(payload_of(client.options, torch.bfloat16, seed)).flatten()[
                :len(tokens) * client.options.num_layers * 2 * client.options.num_kv_heads *
                client.options.head_dim * 2]
            client.store_with(tokens, payload.numel(),
                              lambda view: torch.frombuffer(view, dtype=torch.uint8).copy_(payload))
        plan = client.plan(SEGMENTS)
        objects = client.fetch(plan)
        assert client.stats()["zero_copy_fetched"] == 2, "both chunks leased in place"
        cpp, dev = make_caches(client.options, "vllm_hnd", torch.bfloat16)
        cpp_view = views("vllm_hnd", cpp)[0]
        dev = [t.cuda() for t in dev]
        remapper = DeviceRemapper(client, DeviceKv(views("vllm_hnd", dev)[2], layout="vllm"),
                                  pin_arena=pin_arena)
        load = remapper.begin()
        for chunk, obj, slots in zip(plan.chunks, objects, ([3, 17, 8], SLOTS)):
            client.remap(obj, chunk, slots, kv_layout(cpp_view, layout="flash"))
            remapper.stage(load, obj, chunk, slots)
        assert remapper.write(load) == 2
        load.stream.synchronize()
        assert remapper.direct_copies == (2 if pin_arena else 0), "copied from the arena itself"
        assert compare(cpp, [t.cpu() for t in dev], torch.bfloat16)[2] <= 1
        remapper.close()
    finally:
        cluster.stop()


@pytest.mark.parametrize("layout", ["vllm_hnd", "vllm_nhd", "vllm_mla"])
def test_the_real_strides_of_vllms_caches_address_what_the_planes_do(layout):
    """What the fused CUDA remap writes through (DeviceKv.strided_layout),
    written by the C++ remap on CPU tensors: the same bytes as pikv.device's
    planes, so the strides, plane gap and addresses are right."""
    config = "deepseek-v2-lite.json" if layout == "vllm_mla" else "gemma-3-4b-it.json"
    client = offline_client(config, "bf16")
    chunk = client.plan(SEGMENTS).chunks[1]
    obj = client.build_object(SEGMENTS[1], payload_of(client.options, torch.bfloat16, 5), 1000)
    planes, strided = make_caches(client.options, layout, torch.bfloat16)
    dev_name = LAYOUTS[layout][4]
    DeviceRemapper(client, DeviceKv(views(layout, planes)[2], layout=dev_name)).remap(
        obj, chunk, SLOTS)
    kv = DeviceKv(views(layout, strided)[2], layout=dev_name)
    client.remap(obj, chunk, SLOTS, kv.strided_layout())
    assert compare(planes, strided, torch.bfloat16)[2] <= 1
    if layout == "vllm_hnd":  # vLLM's CPU packing of the same tensor: K dim-major, no strides say it
        assert DeviceKv(views(layout, strided)[2], layout="vllm_cpu_vec").strided_layout() is None


def against_the_cpp_remap(config, device, fused=None):
    """Remaps chunks of `config`'s geometry with the C++ remap into CPU caches
    and with pikv.device into caches on `device`, and compares."""
    figures = []
    for dtype_name, dtype in DTYPES.items():
        client = offline_client(config, dtype_name)
        options = client.options
        # Planned offline: misses, with their keys and positions.
        placed = {id(p): client.plan(p).chunks[1] for p in (SEGMENTS, FAR)}
        layouts = ["mla", "vllm_mla"] if options.kv_format == "mla" else \
            ["flash", "block_major", "hnd", "vllm_hnd", "vllm_nhd"]
        total = equal = worst = 0
        for pre_rope, virtual, prompt in CASES:
            chunk = placed[id(prompt)]
            obj = client.build_object(SEGMENTS[1], payload_of(options, dtype, virtual), virtual,
                                      pre_rope)
            for layout in layouts:
                cpp, dev = make_caches(options, layout, dtype)
                cpp_view, cpp_name, _, dev_name = views(layout, cpp)
                client.remap(obj, chunk, SLOTS, kv_layout(cpp_view, layout=cpp_name))
                dev = [t.to(device) for t in dev]
                DeviceRemapper(client, DeviceKv(views(layout, dev)[2], layout=dev_name),
                               fused=fused).remap(obj, chunk, SLOTS)
                dev = [t.cpu() for t in dev]
                where = f"{dtype_name} {layout} pre_rope={pre_rope} v={virtual} " \
                        f"a={chunk.actual_start}"
                assert compare(cpp, dev, dtype)[2] <= 1, where  # the whole cache
                # The figures: the written head vectors only.
                n, same, ulps = compare(DeviceKv(cpp_view, layout=cpp_name).gather(WRITTEN),
                                        DeviceKv(views(layout, dev)[2],
                                                 layout=dev_name).gather(WRITTEN), dtype)
                total, equal, worst = total + n, equal + same, max(worst, ulps)
        figures.append(f"{dtype_name} {equal}/{total} bit-equal, worst {worst:g} ulp")
    how = "fused" if fused else "torch"
    print(f"{config} ({device}, {how}): " + "; ".join(figures))  # pytest -s shows the figures


def test_hostile_input_is_refused_before_anything_is_written():
    client = offline_client("llama-3.2-1b.json", "bf16")
    options = client.options
    chunk = client.plan(SEGMENTS).chunks[1]
    obj = client.build_object(SEGMENTS[1], payload_of(options, torch.bfloat16, 1), 0)
    cache, _ = make_caches(options, "flash", torch.bfloat16)
    before = [t.clone() for t in cache]
    device = DeviceRemapper(client, DeviceKv(cache))

    def unchanged():
        return all(torch.equal(a, b) for a, b in zip(before, cache))

    with pytest.raises(ValueError, match="outside"):  # a slot past the cache
        device.remap(obj, chunk, SLOTS[:-1] + [BLOCKS * BLOCK])
    with pytest.raises(ValueError, match="twice"):
        device.remap(obj, chunk, [1, 1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError, match="slot mapping"):  # too few slots
        device.remap(obj, chunk, SLOTS[:3])
    other = client.plan([SEGMENTS[0], [99] * 7, SEGMENTS[2]]).chunks[1]
    with pytest.raises(ValueError, match="another chunk"):  # the object of another key
        device.remap(obj, other, SLOTS)
    foreign = offline_client("qwen3-8b.json", "bf16")
    q_obj = foreign.build_object(SEGMENTS[1], payload_of(foreign.options, torch.bfloat16, 1), 0)
    with pytest.raises(ValueError, match="another"):  # another model's namespace
        device.remap(q_obj, chunk, SLOTS)
    assert unchanged(), "a refused remap wrote into the cache"

    # Layouts pikv cannot address are refused where they are described.
    with pytest.raises(ValueError, match="layer 1 is on"):
        DeviceKv([cache[0], torch.empty(cache[1].shape, dtype=cache[1].dtype, device="meta")])
    with pytest.raises(ValueError, match="contiguous"):  # head dim not contiguous
        DeviceKv([t.transpose(3, 4) for t in cache], layout="flash")
    with pytest.raises(ValueError, match="differs from layer 0"):
        DeviceKv([cache[0], cache[1].to(torch.float16)])
    with pytest.raises(ValueError, match="layers"):  # another model's geometry
        DeviceRemapper(client, DeviceKv(cache[:-1])).remap(obj, chunk, SLOTS)
    assert unchanged()


def test_a_device_layout_is_refused_by_the_cpp_path():
    client = offline_client("llama-3.2-1b.json", "bf16")
    chunk = client.plan(SEGMENTS).chunks[1]
    obj = client.build_object(SEGMENTS[1], payload_of(client.options, torch.bfloat16, 1), 0)
    cache, _ = make_caches(client.options, "flash", torch.bfloat16)
    layout = kv_layout(cache)
    assert layout.host
    device_like = pikv._pikv.KvLayout("bf16", "standard", client.options.num_kv_heads,
                                      client.options.head_dim, BLOCK, BLOCKS,
                                      (BLOCKS * BLOCK * cache[0].shape[3] * cache[0].shape[4],
                                       BLOCK * cache[0].shape[3] * cache[0].shape[4],
                                       cache[0].shape[3] * cache[0].shape[4], cache[0].shape[4]),
                                      [t.data_ptr() for t in cache],
                                      [t.numel() * 2 for t in cache], host=False)
    with pytest.raises(ValueError, match="device's memory"):
        client.remap(obj, chunk, SLOTS, device_like)
    with pytest.raises(ValueError, match="device's memory"):
        client.store(SEGMENTS[1], device_like, SLOTS[:2] + [1, 3, 4, 5, 6])


def test_saves_through_the_torch_path_are_checked_before_any_byte_is_stored():
    client = offline_client("llama-3.2-1b.json", "bf16")
    cache, _ = make_caches(client.options, "flash", torch.bfloat16)
    device = DeviceRemapper(client, DeviceKv(cache))
    tokens = SEGMENTS[1]
    for slots in ([-1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 5, BLOCKS * BLOCK]):
        with pytest.raises(ValueError, match="slots must be in"):  # wrapped or past the cache
            device.save(tokens, slots)
    with pytest.raises(ValueError, match="tokens"):
        device.save(tokens, [0, 1, 2])
    # A cache of another dtype than the namespace's is refused up front,
    # rather than stored as bf16 bytes that every later load would misread.
    f16 = [t.to(torch.float16) for t in cache]
    with pytest.raises(ValueError, match="namespace"):
        DeviceRemapper(client, DeviceKv(f16))

    # What the writer is lent is released when it returns: a view kept past
    # that cannot reach the memory (the node's, or freed, by then).
    kept = []
    with pytest.raises(ValueError, match="payload of"):  # not this namespace's size
        client.store_with(tokens, 1000, lambda view: None)
    nbytes = client.options.num_layers * 2 * len(tokens) * client.options.num_kv_heads * \
        client.options.head_dim * 2
    with pytest.raises(pikv.Unavailable):  # written, then no node to put it on
        client.store_with(tokens, nbytes, kept.append)
    with pytest.raises(ValueError, match="released"):
        kept[0][0]
    # A writer that raises fails the store, with its reason.
    with pytest.raises(pikv.InvalidArgument, match="writer failed"):
        client.store_with(tokens, nbytes, lambda view: 1 / 0)
