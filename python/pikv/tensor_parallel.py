"""Tensor parallelism on the torch path: which of a model's KV heads a
rank's cache holds, and the save that puts every rank's heads into one
chunk object.

A chunk object holds every KV head whatever the engine's TP size, so its
key and bytes do not depend on TP: an object stored by a TP-1 engine loads
into a TP-2 engine's ranks and the reverse. A rank loads its own heads'
slice of each object (on the CPU read in place from the node's zero-copy
lease, no copy of the object per rank). A save gathers the ranks' slices
to rank 0, which stores the whole; every rank joins that gather for every
save, in the order the step's metadata lists them, whatever happened to its
own part, so that no rank waits for another forever.

The heads follow vLLM's split of K and V (QKVParallelLinear): with H KV
heads over TP ranks, rank r holds heads r*H/TP .. (r+1)*H/TP - 1 where TP
divides H, and head r*H/TP alone where H divides TP (each head replicated
on TP/H ranks). MLA's latent row is one head every rank holds: rank 0
stores it alone, without a gather."""

from dataclasses import dataclass

import torch

from pikv.errors import InvalidArgument

HEAD_AXIS = 3  # of a payload (layers, planes, tokens, heads, dim)


@dataclass(frozen=True)
class HeadShare:
    """A rank's share of a model's KV heads."""
    rank: int
    size: int  # the TP size
    total: int  # the model's KV heads: a chunk object's

    def __post_init__(self):
        if not 0 <= self.rank < self.size or self.total <= 0:
            raise InvalidArgument(f"rank {self.rank} of {self.size}, {self.total} KV heads")
        if self.total % self.size and self.size % self.total:
            raise InvalidArgument(f"{self.total} KV heads do not split over {self.size} ranks")

    @property
    def first(self) -> int:
        return self.rank * self.total // self.size

    @property
    def count(self) -> int:
        return max(1, self.total // self.size)

    @property
    def whole(self) -> bool:
        """Every rank holds every head (one KV head, MLA's latent row)."""
        return self.count == self.total

    def of(self, payload):
        """This rank's heads of a whole payload (a view, no copy)."""
        return payload.narrow(HEAD_AXIS, self.first, self.count)


class TensorParallel:
    """A rank of a TP engine: its HeadShare and the gather its saves join."""

    def __init__(self, share: HeadShare, gather):
        """`gather(tensor, dim)`: every rank calls it with a tensor of one
        shape; rank 0 gets the ranks' tensors concatenated along `dim` in
        rank order, the others None (pikv.vllm.gather_to_first over vLLM's
        TP group). It may not hang where a rank runs gathers ahead of rank
        0, which stores each whole between its gathers."""
        self.share = share
        self._gather = gather

    def assemble(self, part, ok=True):
        """The whole payload of a save, from every rank's heads: each rank
        calls it once per save with its part (layers, planes, tokens, its
        heads, dim), or with a part of that shape and ok False where its own
        gather failed. Returns the whole at rank 0, None at the others;
        raises at rank 0 where another rank's part failed."""
        s = self.share
        if s.whole:
            if not ok and s.rank == 0:
                raise InvalidArgument("this rank's part of the chunk could not be gathered")
            return part if s.rank == 0 else None
        # The flag travels in the payload's dtype: the gather moves that one.
        flags = self._gather(torch.tensor([1.0 if ok else 0.0], dtype=part.dtype,
                                          device=part.device), 0)
        parts = self._gather(part.contiguous(), HEAD_AXIS)
        if s.rank != 0:
            return None
        failed = [r for r, f in enumerate(flags.tolist()) if f != 1.0]
        if failed:
            raise InvalidArgument(f"rank(s) {failed} could not gather their part of the chunk")
        replicas = s.size * s.count // s.total
        return parts[:, :, :, ::replicas] if replicas > 1 else parts
