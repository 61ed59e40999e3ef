"""One client process of bench/peers for LMCache's controller (lookup
workload): peer_lookup_client's twin, same flags' meaning, same JSON line.

  lmcache_client.py --controller H --pull P --reply R --op fill --objects N
  lmcache_client.py --controller H --pull P --reply R --op lookup --objects N
      [--batch 32] [--seconds S] [--sync]

fill registers one worker and tells the controller it admitted N chunk
hashes (BatchedKVOperationMsg of ADMIT events, pushed to the controller's
pull port, 10 000 per message), returning once the last one is found (the
controller applies pushed messages in order). lookup asks, call after call,
for 32 random ones of them (BatchedP2PLookupMsg over the reply port, asked as
another instance). LMCache's answer is not a location per key: it names the
first worker holding the first hash and how many of the hashes, counted from
the front, that worker holds (a prefix length); a call is ok when that is
all 32 on our worker. Uses LMCache's own message classes (their import loads
torch, outside the timed loop).
"""
import argparse
import itertools
import json
import random
import sys
import time

import msgspec
import zmq
from lmcache.v1.cache_controller import message as lm
from timed_calls import timed_calls

INSTANCE, ASKER, LOCATION = "pikv-bench", "pikv-bench-asker", "LocalCPUBackend"
ADMITS_PER_MESSAGE = 10_000


def chunk_hash(i):
    """A 64-bit chunk hash, as LMCache's keys are."""
    return (i * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % (1 << 64)


class Controller:
    def __init__(self, args):
        ctx = zmq.Context.instance()
        self.reply = ctx.socket(zmq.DEALER)
        self.reply.connect(f"tcp://{args.controller}:{args.reply}")
        self.push = ctx.socket(zmq.PUSH)
        self.push.connect(f"tcp://{args.controller}:{args.pull}")
        self.encode = msgspec.msgpack.Encoder().encode
        self.decode = msgspec.msgpack.Decoder(lm.Msg).decode

    def ask(self, msg, timeout_ms=30_000):
        self.reply.send_multipart([b"", self.encode(msg)])
        if not self.reply.poll(timeout_ms):
            raise TimeoutError("the LMCache controller did not answer")
        return self.decode(self.reply.recv_multipart()[-1])

    def hits(self, hashes):
        """How many of `hashes`, from the front, our worker holds."""
        ret = self.ask(lm.BatchedP2PLookupMsg(hashes=hashes, instance_id=ASKER, worker_id=0))
        if not isinstance(ret, lm.BatchedP2PLookupRetMsg) or not ret.layout_info:
            return 0
        instance, _, hit_chunks, _ = ret.layout_info[0]
        return hit_chunks if instance == INSTANCE else 0


def fill(args, controller):
    # No peer listens at peer_init_url (never dialled here), but without one
    # every lookup answers no hits. A second registration would empty it.
    controller.ask(lm.RegisterMsg(instance_id=INSTANCE, worker_id=0, ip="127.0.0.1", port=1,
                                  peer_init_url="127.0.0.1:1"))
    start = time.perf_counter()
    for first in range(0, args.objects, ADMITS_PER_MESSAGE):
        ops = [lm.KVOpEvent(op_type=lm.OpType.ADMIT, key=chunk_hash(i), seq_num=i)
               for i in range(first, min(args.objects, first + ADMITS_PER_MESSAGE))]
        controller.push.send(controller.encode(lm.BatchedKVOperationMsg(
            instance_id=INSTANCE, worker_id=0, location=LOCATION, operations=ops)))
    while controller.hits([chunk_hash(args.objects - 1)]) != 1:
        if time.perf_counter() - start > 600:
            sys.exit("lmcache_client: the fill was not applied in 600 s")
        time.sleep(0.005)
    print(json.dumps({"ok": args.objects, "failed": 0, "bytes": 0,
                      "seconds": time.perf_counter() - start, "cpu_seconds": 0,
                      "latencies_us": []}), flush=True)
    return 0


def lookup(args, controller):
    rng = random.Random()
    # The keys of calls made before the clock starts.
    batches = [[chunk_hash(rng.randrange(args.objects)) for _ in range(args.batch)]
               for _ in range(32768)]
    calls = itertools.cycle(batches)

    def call():
        return controller.hits(next(calls)) == args.batch
    call()  # the connection made, untimed
    return timed_calls(call, args.batch, args.seconds, args.sync)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--controller", default="127.0.0.1", help="the controller's host")
    p.add_argument("--pull", type=int, required=True, help="its pull port (worker messages)")
    p.add_argument("--reply", type=int, required=True, help="its reply port (requests)")
    p.add_argument("--op", choices=["fill", "lookup"], required=True)
    p.add_argument("--objects", type=int, required=True, help="chunk hashes in the registry")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--sync", action="store_true", help="print ready, start on a stdin line")
    args = p.parse_args()
    controller = Controller(args)
    return fill(args, controller) if args.op == "fill" else lookup(args, controller)


if __name__ == "__main__":
    sys.exit(main())
