"""The controller's admin queries (what `pikv admin` prints), as dicts."""

import os

from pikv import _pikv


class Admin:
    """The controller at `endpoint`: one endpoint, a list of standbys, or
    etcd://h1:2379,...[/cluster][?tls=DIR] (the leader, followed across
    failovers; over mutual TLS with DIR's ca.crt, client.crt, client.key);
    every call has a deadline and raises pikv.Unavailable or pikv.Timeout
    when no leader answers in time (pikv.PermissionDenied for a key whose
    role may not ask). On a secure cluster give the key
    pair's prefix and the keyring (default: PIKV_CURVE_KEY and
    PIKV_CURVE_KEYRING, as `pikv admin`); changes need the admin key."""

    def __init__(self, endpoint: str, timeout_ms: int = 2000, curve_key: str = None,
                 curve_keyring: str = None):
        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self.curve_key = os.environ.get("PIKV_CURVE_KEY", "") if curve_key is None else curve_key
        self.curve_keyring = (os.environ.get("PIKV_CURVE_KEYRING", "") if curve_keyring is None
                              else curve_keyring)

        # One connection for every call: the leader it found is kept (a new
        # one per call would find it again, a full timeout per dead endpoint).
        self._connection = None

    @property
    def connection(self):
        if self._connection is None:
            self._connection = _pikv.AdminConnection(self.endpoint, self.timeout_ms,
                                                     self.curve_key, self.curve_keyring)
        return self._connection

    def _query(self, query, keys=(), **args):
        """args: node (clear, pin, unpin, evict), host (locate), engine (revoke)."""
        return self.connection.json(query, list(keys), **args)

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

    def revoke(self, engine: str) -> dict:
        """Refuses engine `engine` (its keyring name) from now on and drops
        every object it wrote, on every node and in Redis (admin key)."""
        return self._query(_pikv.AdminQuery.revoke, engine=engine)
