"""Tensors as pikv sees them: an address, a dtype, a shape, strides and the
bytes the view spans. Torch tensors, objects with __array_interface__ (numpy)
and writable buffers are described without copying; pikv.KvLayout checks
every layout against that span before anything is written. A layout over
tensors on a device (CUDA, NPU) describes their geometry only: the C++
remap refuses it, pikv.device writes it with the engine's own torch."""

import ctypes
from dataclasses import dataclass

from pikv.errors import InvalidArgument
from pikv.layouts import strided_axes

TORCH_DTYPES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16"}
_TYPESTRS = {"f4": "f32", "f2": "f16"}  # bf16 has no typestr: pass dtype="bf16"
_SIZES = {"f32": 4, "f16": 2, "bf16": 2}


@dataclass(frozen=True)
class TensorInfo:
    ptr: int
    dtype: str  # f32, f16 or bf16
    shape: tuple
    strides: tuple  # in elements
    nbytes: int  # bytes from ptr that the view addresses
    device: str = "cpu"  # torch's device; anything else is host memory

    @property
    def itemsize(self) -> int:
        return _SIZES[self.dtype]


def _span(shape, strides, itemsize):
    if any(n == 0 for n in shape):
        return 0
    if any(s < 0 for s in strides):
        raise InvalidArgument("negative strides are not supported")
    return (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * itemsize


def describe(obj, dtype: str = None, any_device: bool = False) -> TensorInfo:
    """A tensor's address, dtype, shape and strides (a CPU tensor's unless
    `any_device`). `dtype` is needed only where the object cannot say it
    (bf16 in numpy or a raw buffer)."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "stride"):  # torch
        if obj.device.type != "cpu" and not any_device:
            raise InvalidArgument(f"a {obj.device.type} tensor: pikv's C++ path writes CPU memory "
                                  "only (pikv.device writes any device's)")
        name = TORCH_DTYPES.get(str(obj.dtype))
        if name is None:
            raise InvalidArgument(f"dtype {obj.dtype} is not float32, float16 or bfloat16")
        shape, strides = tuple(obj.shape), tuple(obj.stride())
        return TensorInfo(obj.data_ptr(), name, shape, strides, _span(shape, strides, _SIZES[name]),
                          str(obj.device))
    if hasattr(obj, "__array_interface__"):  # numpy and friends
        ai = obj.__array_interface__
        if ai["data"][1]:
            raise InvalidArgument("the array is read-only")
        name = dtype or _TYPESTRS.get(ai["typestr"][1:])
        if name not in _SIZES:
            raise InvalidArgument(f"typestr {ai['typestr']} needs dtype= f32, f16 or bf16")
        size = _SIZES[name]
        if int(ai["typestr"][2:]) != size:
            raise InvalidArgument(f"typestr {ai['typestr']} does not hold {name}")
        shape = tuple(ai["shape"])
        if ai.get("strides") is None:
            strides, step = [], 1
            for n in reversed(shape):
                strides.insert(0, step)
                step *= n
            strides = tuple(strides)
        else:
            if any(s % size for s in ai["strides"]):
                raise InvalidArgument("strides are not whole elements")
            strides = tuple(s // size for s in ai["strides"])
        return TensorInfo(ai["data"][0], name, shape, strides, _span(shape, strides, size))
    view = memoryview(obj)  # the buffer protocol
    if view.readonly:
        raise InvalidArgument("the buffer is read-only")
    name = dtype or {"f": "f32", "e": "f16"}.get(view.format)
    if name not in _SIZES or _SIZES[name] != view.itemsize:
        raise InvalidArgument(f"buffer format {view.format!r} needs dtype= f32, f16 or bf16")
    ptr = ctypes.addressof(ctypes.c_char.from_buffer(view))
    strides = tuple(s // view.itemsize for s in view.strides)
    return TensorInfo(ptr, name, tuple(view.shape), strides, _span(view.shape, strides, view.itemsize))


def kv_layout(layers, layout: str = None, axes: str = None, dtype: str = None):
    """pikv.KvLayout over an engine's per-layer paged KV tensors (all of one
    shape, strides, dtype and device). `layout` names a strided layout of
    pikv.layouts; `axes` spells any other (e.g. "bohpd" for (num_blocks,
    block_size, H, 2, D)). Its `axes` attribute says which tensor axis is
    which."""
    infos = [describe(t, dtype, any_device=True) for t in layers]
    if not infos:
        raise InvalidArgument("no layers")
    first = infos[0]
    for i, info in enumerate(infos[1:], 1):
        if (info.shape, info.strides, info.dtype) != (first.shape, first.strides, first.dtype):
            raise InvalidArgument(f"layer {i} differs from layer 0 in shape, strides or dtype")
        if info.device != first.device:
            raise InvalidArgument(f"layer {i} is on {info.device}, layer 0 on {first.device}")
    axes = strided_axes(first.shape, layout, axes)
    if sorted(axes) not in (sorted("pbohd"), sorted("bod")) or len(axes) != len(first.shape):
        raise InvalidArgument(f"axes {axes!r} do not name the {len(first.shape)} axes of "
                              f"{first.shape}")
    dims = dict(zip(axes, first.shape))
    strides = dict(zip(axes, first.strides))
    if strides["d"] != 1:
        raise InvalidArgument("a head vector must be contiguous (stride 1 along d)")
    mla = "p" not in axes
    if not mla and dims["p"] != 2:
        raise InvalidArgument(f"the plane axis holds {dims['p']}, not K and V")
    built = _kv_layout(first.dtype, "mla" if mla else "standard", 1 if mla else dims["h"],
                       dims["d"], dims["o"], dims["b"],
                       (0 if mla else strides["p"], strides["b"], strides["o"],
                        dims["d"] if mla else strides["h"]),  # MLA: one head
                       [i.ptr for i in infos], [i.nbytes for i in infos],
                       first.device == "cpu")
    built.tensors = list(layers)  # the memory stays alive as long as the layout
    built.axes = axes
    return built


def geometry_layout(layers, planes, heads=None):
    """pikv.KvLayout of a packed layout (pikv.layouts; its planes from pikv.paged):
    the geometry and dtype the client checks a chunk against, never
    written through (host False: the C++ remap refuses it). `heads`: the
    model's KV heads where the layers hold a tensor-parallel rank's share."""
    from pikv.paged import geometry
    infos = [describe(t, any_device=True) for t in layers]
    shapes = {geometry(p) for p in planes}
    if len(shapes) != 1 or len({i.dtype for i in infos}) != 1:
        raise InvalidArgument("every layer must have one geometry and dtype")
    held, dim, block_size, blocks, mla = shapes.pop()
    heads = heads or held
    planes_n = 1 if mla else 2
    per_token = heads * dim
    built = _kv_layout(infos[0].dtype, "mla" if mla else "standard", heads, dim, block_size,
                       blocks, (blocks * block_size * per_token, block_size * per_token,
                                per_token, dim),
                       [i.ptr for i in infos], [planes_n * blocks * block_size * per_token *
                                                i.itemsize for i in infos], False)
    built.tensors = list(layers)
    built.axes = None
    return built


def _kv_layout(*args):
    from pikv._pikv import KvLayout
    return KvLayout(*args)
