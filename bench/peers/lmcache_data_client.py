"""One client process of bench/peers for LMCache's cache server
(`lmcache_server HOST PORT cpu`, the remote tier an LMCache engine reaches
by `remote_url: lm://HOST:PORT`): peer_data_client's twin for the data
plane (same flags, same JSON line).

  lmcache_data_client.py --server H:P --op load|put|get --size B --objects K
      [--first I] [--batch B] [--seconds S] [--seed N] [--zipf THETA] [--sync]

It speaks the server's protocol as LMCache's own connector
(LMCServerConnector) does, with LMCache's message classes, on one
connection: a put is a ClientMetaMessage(PUT) and the bytes, a get a
ClientMetaMessage(GET) answered by a ServerMetaMessage and the bytes, read
straight into memory of the client's (recv_into, as the connector reads into
a buffer of its CPU backend's pool). The protocol has no batch: a call of
--batch keys is that many commands in turn (the connector loops too). A PUT
is not answered, so a put call ends with an EXIST of its last key, which the
server answers once it has stored every PUT before it (it serves a
connection's commands in order): a put counts once stored.

The server keeps what it is sent (it has no eviction and no delete), so
puts here overwrite the same key space whatever --seed (an overwrite moves
and stores the bytes all the same).
"""
import argparse
import socket
import sys

import torch
from lmcache.utils import CacheEngineKey
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.protocol import (ClientCommand, ClientMetaMessage, ServerMetaMessage,
                                 ServerReturnCode)
from timed_calls import add_data_flags, data_calls

FORMAT = MemoryFormat.BINARY  # bytes, shape [length, 0, 0, 0]
REPLY = ServerMetaMessage.packlength()


def key(size, i):
    return CacheEngineKey("pikv-bench", 1, 0, (size << 32) + i, torch.bfloat16)


class Connection:
    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def command(self, command, k, length=0):
        shape = torch.Size([length, 0, 0, 0])
        self.sock.sendall(ClientMetaMessage(command, k, length, FORMAT, torch.uint8,
                                            shape).serialize())

    def read_into(self, view):
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:], len(view) - got)
            if n == 0:
                raise ConnectionError("the server closed the connection")
            got += n

    def reply(self):
        head = bytearray(REPLY)
        self.read_into(memoryview(head))
        return ServerMetaMessage.deserialize(bytes(head))

    def put(self, keys, objects):
        for k, obj in zip(keys, objects):
            self.command(ClientCommand.PUT, k, len(obj))
            self.sock.sendall(obj)
        self.command(ClientCommand.EXIST, keys[-1])
        return self.reply().code == ServerReturnCode.SUCCESS

    def get(self, k, into):
        self.command(ClientCommand.GET, k)
        meta = self.reply()
        if meta.code != ServerReturnCode.SUCCESS:
            return False
        if meta.length != len(into):  # read it off the stream, but it failed
            self.read_into(memoryview(bytearray(meta.length)))
            return False
        self.read_into(into)
        return True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", required=True, help="HOST:PORT of lmcache_server")
    p.add_argument("--op", choices=["load", "put", "get"], required=True)
    add_data_flags(p)  # --seed is ignored: see above
    args = p.parse_args()
    size = args.size
    conn = Connection(args.server)
    keys = [key(size, i) for i in range(args.objects)]
    if args.op == "get":
        slot = memoryview(bytearray(size))  # the pool's buffer, reused
        if not conn.get(keys[0], slot):  # one untimed, as peer_data_client does
            sys.exit("lmcache_data_client: object 0 is not stored")

        def call(idx):
            return all(conn.get(keys[i], slot) for i in idx)
    else:
        # Every object of the key space (object i starts with i), as the
        # other systems' clients hold them.
        region = bytearray(args.objects * size)
        for i in range(args.objects):
            region[i * size:i * size + 8] = i.to_bytes(8, "little")
        view = memoryview(region)

        def call(idx):
            return conn.put([keys[i] for i in idx], [view[i * size:(i + 1) * size] for i in idx])
    return data_calls(args, call)


if __name__ == "__main__":
    sys.exit(main())
