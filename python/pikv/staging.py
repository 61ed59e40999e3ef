"""Host memory on its way to a torch device, for pikv.device: a leased
object straight from the local node's arena, page-locked once (the driver
copies from it asynchronously), anything else through pinned buffers
reused from load to load; on the CPU nothing is copied."""

import warnings

import torch

from pikv import _pikv
from pikv.errors import Error


class _PinnedArenas:
    """Arenas page-locked in this process, once each however many stagings
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


class Staging:
    """Copies to `device` on the caller's current stream. `client`'s local
    node arena is page-locked when `pin_arena` (CUDA, a pikv built with
    nvcc); a buffer of a load is reused once the load's copies are done
    (`begin` is called after that). Not thread-safe."""

    def __init__(self, client, device, pin_arena):
        self.client = client
        self.device = device
        self._cuda = device.type == "cuda"
        self._pinned, self._next = [], 0
        self._pin_arena = pin_arena and self._cuda
        self._arena = None
        self.direct_copies = 0  # chunks copied straight from the arena
        self._refresh_arena()

    def begin(self):
        """A new load: every pinned buffer is free again (the caller waited
        for the last load's copies), the arena page-locked if it is new."""
        self._next = 0
        self._refresh_arena()

    def to_device(self, host):
        """(host on the device, whether it was copied from the leased
        memory directly), queued on the current stream."""
        if self.device.type == "cpu":
            return host, False
        if not self._cuda:
            return host.to(self.device), False
        if self._in_pinned_arena(host):
            self.direct_copies += 1
            return host.to(self.device, non_blocking=True), True
        n = host.numel() * host.element_size()
        if self._next == len(self._pinned) or self._pinned[self._next].numel() < n:
            buffer = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            self._pinned[self._next:self._next + 1] = [buffer]
        staging = self._pinned[self._next][:n].view(host.dtype).view(host.shape)
        self._next += 1
        staging.copy_(host)
        return staging.to(self.device, non_blocking=True), False

    def small_to_device(self, host):
        """A small host tensor (tables, indices) to the device without
        waiting for the copies queued before it."""
        if not self._cuda:
            return host.to(self.device)
        return host.pin_memory().to(self.device, non_blocking=True)

    def close(self, stream=None):
        """Releases the page-locked arena once `stream`'s copies are done."""
        if self._arena is not None:
            if stream is not None:
                stream.synchronize()  # no copy reads it any more
            _PINNED.unpin(self._arena)
            self._arena = None

    def _refresh_arena(self):
        """Page-locks the local node's arena if it is new (the first time,
        or the node restarted)."""
        if not self._pin_arena:
            return
        arena = self.client.zero_copy_arena()
        if arena is None or (self._arena is not None and self._arena.address == arena.address):
            return
        self.close()
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
