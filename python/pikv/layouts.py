"""The names of paged KV cache layouts, declared once: what an engine
says its cache is (pikv.vllm turns vLLM's attention backend and ISA into
one of these), and how pikv addresses it from there.

Two kinds:
- strided: a 5-D (3-D for MLA) tensor per layer whose axes are named by a
  string of p(lane: K or V), b(lock), o(ffset in the block), h(ead), d(im),
  in the tensor's order; its strides say everything else (HND and other
  permuted views need no name). Both paths write it: the C++ remap
  (pikv.tensors.kv_layout hands it the strides) and pikv.device.
- packed: a cache whose kernel packs a block so that no strides of the
  five axes describe it (vLLM's 4-D caches: its GPU backends' K|V rows,
  its CPU attention's vec and amx packings, MLA). Only pikv.device writes
  it, through the planes pikv.paged builds for the name.

Any other `axes` string is a strided layout without a name.
"""

from dataclasses import dataclass

from pikv.errors import InvalidArgument


@dataclass(frozen=True)
class Layout:
    name: str
    axes: str = None  # strided: the tensor's axes, in order; None: packed
    doc: str = ""

    @property
    def packed(self):
        return self.axes is None


LAYOUTS = {layout.name: layout for layout in (
    Layout("flash", "pbohd", "vLLM FlashAttention's 5-D view: (2, blocks, block_size, H, D)"),
    Layout("block_major", "bpohd", "(blocks, 2, block_size, H, D)"),
    Layout("mla", "bod", "MLA: (blocks, block_size, latent + rope)"),
    Layout("vllm", doc="vLLM's GPU backends: (blocks, H, block_size, 2*D), K then V in a row, "
                       "in any KVCacheLayout order"),
    Layout("vllm_mla", doc="vLLM's MLA: (blocks, 1, block_size, latent + rope)"),
    Layout("vllm_cpu_vec", doc="vLLM's CPU attention, ISA vec/vec16: each (block, head) page "
                               "K dim-major then V row-major"),
    Layout("vllm_cpu_amx", doc="vLLM's CPU attention, ISA amx: each (block, head) page K and V "
                               "in VNNI tiles"),
)}


def is_packed(name):
    """Whether `name` is a packed layout (only pikv.device writes it)."""
    return name in LAYOUTS and LAYOUTS[name].packed


def strided_axes(shape, layout=None, axes=None):
    """The axes string of a strided layout: `axes` as given, the named
    layout's, or (neither given) guessed from the shape where only one
    strided layout fits it. Raises, saying what to pass, where it cannot."""
    if axes:
        return axes
    if layout is not None:
        if layout not in LAYOUTS:
            raise InvalidArgument(f"unknown layout {layout!r} ({', '.join(LAYOUTS)})")
        if LAYOUTS[layout].packed:
            raise InvalidArgument(f"layout {layout} is packed: pikv.device addresses it")
        return LAYOUTS[layout].axes
    if len(shape) == 3:
        return LAYOUTS["mla"].axes
    if len(shape) == 5 and shape[0] == 2 and shape[1] != 2:
        return LAYOUTS["flash"].axes
    if len(shape) == 5 and shape[1] == 2 and shape[0] != 2:
        return LAYOUTS["block_major"].axes
    strided = ", ".join(n for n, layout in LAYOUTS.items() if not layout.packed)
    raise InvalidArgument(f"cannot tell the KV layout of shape {tuple(shape)}: pass layout= "
                          f"({strided}) or axes= (a string of p, b, o, h, d)")
