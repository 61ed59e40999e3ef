"""The controller's admin queries (what `pikv admin` prints), as dicts."""

from pikv import _pikv


class Admin:
    """One controller; every call has a deadline and raises RuntimeError when
    the controller does not answer in time."""

    def __init__(self, endpoint: str, timeout_ms: int = 2000):
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms

    def _query(self, query, keys=()):
        return _pikv.admin_json(self.endpoint, self.timeout_ms, query, list(keys))

    def nodes(self) -> dict:
        return self._query(_pikv.AdminQuery.nodes)

    def stats(self) -> dict:
        return self._query(_pikv.AdminQuery.stats)

    def health(self) -> dict:
        return self._query(_pikv.AdminQuery.health)

    def locate(self, keys) -> dict:
        """Where each chunk key (32 hex digits) is held, cheapest first."""
        return self._query(_pikv.AdminQuery.locate, keys)

    def pin(self, keys) -> dict:
        return self._query(_pikv.AdminQuery.pin, keys)

    def unpin(self, keys) -> dict:
        return self._query(_pikv.AdminQuery.unpin, keys)

    def evict(self, keys) -> dict:
        return self._query(_pikv.AdminQuery.evict, keys)

    def clear(self) -> dict:
        return self._query(_pikv.AdminQuery.clear)
