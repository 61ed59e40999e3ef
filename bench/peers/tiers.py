"""Workload 5, tiers under pressure: each system keeps --tiers-memory bytes
in memory and the rest of a working set twice that on its disk tier; one
client reads objects of --tiers-size by a Zipf(--tiers-theta) mix
(key_mix.h), the systems interleaved round by round after an untimed
warm-up. Reported per system: GB/s, p50/p99 of a get, CPU-seconds per GiB
(client and servers) and where the gets were served (memory, disk, missed),
from each system's own counters over the timed rounds.

pikv: a pikv-node with its CPU tier and its RocksDB tier (every put written
through to disk; a disk hit promoted to CPU); counters from its /metrics.
"""
import json
import os
import re
import statistics
import sys
import time
import urllib.request

from harness import (MiB, Server, System, data_client, free_port, python_data_client,
                     print_table, quantile, run_clients, wait_port)

HERE = os.path.dirname(os.path.abspath(__file__))


def working_set(args):
    """Objects in the working set: twice what the memory tier holds."""
    return 2 * args.tiers_memory // args.tiers_size


class ClientTiers:
    """A system whose store is a server (harness.System): a client process
    per round; `served()` its cumulative gets by where they were served
    {"memory", "disk", "miss"}, read from the server's counters; `settled()`
    waits until a load is stored for good (None: another system of the same
    server loads and warms it)."""

    def __init__(self, args, system, served, settled=None):
        self.args, self.system, self.served, self.settled = args, system, served, settled
        self.objects = working_set(args)

    def get(self, seconds):
        return run_clients(self.args, self.system, "get", self.args.tiers_size, self.objects, 1, 1,
                           seconds)

    def start(self):
        """Loads the working set, then warms the memory tier by the mix (the
        first of a server's systems; the others find it so)."""
        if not self.settled:
            return
        r = run_clients(self.args, self.system, "load", self.args.tiers_size, self.objects, 1, 1, 0)
        if r["failed"] or r["ok"] < self.objects:
            raise RuntimeError(f"{self.system.name}: loading {self.objects} objects failed: {r}")
        self.settled()
        self.get(self.args.tiers_seconds)

    def round(self):
        """One timed run; its "served" from the counters' growth over it, a
        failed get counted as a miss."""
        before = self.served()
        r = self.get(self.args.tiers_seconds)
        after = self.served()
        r["served"] = {k: after[k] - before[k] for k in after}
        r["served"]["miss"] = r["failed"]
        return r


class EngineTiers:
    """A system whose store lives in the engine's process (LMCache): one
    process loads and warms it, then runs a timed round per line on stdin."""

    def __init__(self, args, name, argv, log):
        self.name, self.args = name, args
        # No server: the engine's process gets the cores a client and a
        # server have in the others.
        self.server = Server(argv, f"{args.server_cpus},{args.client_cpus}", log, ready="ready",
                             timeout=900, stdin=True)

    def start(self):
        pass

    def round(self):
        self.server.proc.stdin.write("go\n")
        self.server.proc.stdin.flush()
        r = json.loads(self.server.next_line(self.args.tiers_seconds * 10 + 60))
        r["cpu"] = r["cpu_seconds"]
        return r


def metric(text, name, labels):
    """One sample of a Prometheus text page; 0 when absent."""
    found = re.search(rf"^{name}\{{{labels}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def start_pikv(args, work):
    """A pikv-node with its CPU and RocksDB tiers, --tiers-memory in CPU; read
    by its best path on one host (pikv: leased in place, the rest over ipc,
    peer_data_client --system pikv-local) and over tcp (pikv_tcp)."""
    port, http = free_port(), free_port()
    tcp, ipc = f"tcp://127.0.0.1:{port}", f"ipc://{work}/tiers-node.sock"
    node = Server([f"{args.bin_dir}/pikv-node", "--endpoint", tcp, ipc, "--data-dir",
                   f"{work}/tiers-node", "--disk", "true", "--disk-capacity",
                   str(4 * args.tiers_memory), "--cpu-capacity", str(args.tiers_memory),
                   "--prefault", "true", "--controller", "", "--node-id", "tiers", "--http",
                   f"127.0.0.1:{http}", "--log-level", "warn"],
                  args.server_cpus, f"{work}/tiers-node.log", ready="pikv-node tiers ready")

    def page():
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
            return r.read().decode()

    def served():
        text = page()
        return {"memory": metric(text, "pikv_node_tier_hits_total", 'tier="cpu"'),
                "disk": metric(text, "pikv_node_tier_hits_total", 'tier="disk"')}

    def settled():
        """Until every write-through to disk is done; raises on a dropped one
        (its object would be a miss once evicted from CPU: not this
        workload's question)."""
        deadline = time.time() + 120
        while time.time() < deadline:
            text = page()
            if metric(text, "pikv_node_queue_dropped_total", 'queue="disk"'):
                raise RuntimeError("pikv: the disk write-through queue dropped objects")
            if metric(text, "pikv_node_queue_depth", 'queue="disk"') == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("pikv: the disk write-through queue did not drain in 120 s")

    mix = ["--zipf", str(args.tiers_theta)]
    return [ClientTiers(args, System("pikv", [node], data_client(args, "pikv-local", ipc, mix)),
                        served, settled),
            ClientTiers(args, System("pikv_tcp", [node], data_client(args, "pikv", tcp, mix)),
                        served, None)]


class MooncakeTiers(ClientTiers):
    """Mooncake counts its SSD reads (the holder's /metrics), not its DRAM
    hits: those are the round's other successful gets."""

    def round(self):
        r = super().round()
        r["served"]["memory"] = r["ok"] - r["served"]["disk"]
        return r


# The holder's offload settings. Mooncake writes evicted objects out in
# buckets, by default of 500 keys or 256 MiB, on a 10 s heartbeat: a working
# set this small would never leave DRAM, and every put beyond it be refused.
MOONCAKE_OFFLOAD_ENV = {"MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS": "1",
                        "MOONCAKE_OFFLOAD_LOCAL_BUFFER_SIZE_BYTES": str(64 * MiB),
                        "MOONCAKE_OFFLOAD_BUCKET_KEYS_LIMIT": "8",
                        "MOONCAKE_OFFLOAD_BUCKET_SIZE_LIMIT_BYTES": str(8 * MiB)}


def start_mooncake(args, work):
    """A Mooncake Store whose holder lends --tiers-memory of DRAM and offloads
    what it evicts to an SSD directory: its master with offload on eviction
    (offloading eagerly lost objects here), a 1 s lease on a new object (by
    default it cannot be evicted for 10 s), and promotion on hit (off by
    default; pikv and LMCache promote a disk hit): a key read twice from SSD
    is copied back to DRAM, up to 64 per heartbeat (by default 1)."""
    env = dict(os.environ, **dict(kv.split("=", 1) for kv in args.mooncake_env),
               **MOONCAKE_OFFLOAD_ENV)
    port, http = free_port(), free_port()
    master = Server([args.mooncake_master, f"--rpc_port={port}", f"--metrics_port={free_port()}",
                     "--enable_metric_reporting=false", "--rpc_thread_num=2",
                     "--enable_offload=true", "--offload_on_evict=true",
                     "--default_kv_lease_ttl=1000", "--promotion_on_hit=true",
                     "--promotion_max_per_heartbeat=64"],
                    args.server_cpus, f"{work}/tiers-mooncake-master.log", env=env)
    wait_port(port)
    mc = [args.peers_python, f"{HERE}/mooncake_client.py", "--master", f"127.0.0.1:{port}"]
    ssd = f"{work}/tiers-mooncake-ssd"
    os.makedirs(ssd)
    holder = Server(mc + ["--hold", str(args.tiers_memory), "--ssd-dir", ssd, "--http-port",
                          str(http)], args.server_cpus, f"{work}/tiers-mooncake-holder.log",
                    ready="holding", env=env)

    def served():
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
            text = r.read().decode()
        found = re.search(r"^mooncake_ssd_read_ops_total(?:\{[^}]*\})? (\S+)$", text, re.M)
        return {"disk": float(found.group(1)) if found else 0.0}

    argv = python_data_client(mc + ["--zipf", str(args.tiers_theta)])
    return MooncakeTiers(args, System("mooncake", [master, holder], argv, env), served,
                         lambda: None)


def start_lmcache(args, work):
    """LMCache's cache engine in a client process, its CPU tier --tiers-memory,
    its disk tier in the work directory."""
    objects = working_set(args)
    argv = [args.lmcache_python, f"{HERE}/lmcache_engine_client.py", "--memory",
            str(args.tiers_memory), "--disk", str(4 * args.tiers_memory), "--disk-dir",
            f"{work}/tiers-lmcache", "--size", str(args.tiers_size), "--objects", str(objects),
            "--zipf", str(args.tiers_theta), "--warm", str(args.tiers_seconds), "--seconds",
            str(args.tiers_seconds)]
    return EngineTiers(args, "lmcache", argv, f"{work}/tiers-lmcache.log")


def measure_tiers(args, work):
    """{system: row} of the tiers workload, and the objects in its working
    set. A system that fails loses its own row, not the others'."""
    try:
        systems = {s.system.name: s for s in start_pikv(args, work)}
        for name, start in (("mooncake", start_mooncake), ("lmcache", start_lmcache)):
            if name == "lmcache" and not args.lmcache_python:
                continue
            try:
                systems[name] = start(args, work)
            except Exception as e:
                print(f"tiers: {name} did not start: {e!r}", file=sys.stderr)
        runs = {}
        for name, s in list(systems.items()):
            try:
                s.start()
            except Exception as e:
                print(f"tiers: {name} did not load: {e!r}", file=sys.stderr)
                runs[name] = None
        for _ in range(args.rounds):
            for name, s in systems.items():
                if name in runs and runs[name] is None:
                    continue
                try:
                    runs.setdefault(name, []).append(s.round())
                except Exception as e:
                    print(f"tiers: a round of {name} failed: {e!r}", file=sys.stderr)
                    runs[name] = None
        return {name: row(rs) for name, rs in runs.items()}, working_set(args)
    finally:
        Server.stop_all()


def row(runs):
    """A system's row from its rounds (None: it failed)."""
    if runs is None:
        return {"gbps": 0.0, "p50_us": 0, "p99_us": 0, "cpu_s_per_gib": 0.0,
                "served": dict.fromkeys(("memory", "disk", "miss"), 0.0), "failed": 1}
    failed = sum(r["failed"] for r in runs)
    moved = sum(r["bytes"] for r in runs)
    lat = [x for r in runs for x in r["latencies_us"]]
    served = {k: sum(r["served"][k] for r in runs) for k in ("memory", "disk", "miss")}
    gets = sum(served.values()) or 1
    return {"gbps": 0.0 if failed else statistics.median(
                r["bytes"] / r["seconds"] / 1e9 for r in runs),
            "p50_us": quantile(lat, 0.5), "p99_us": quantile(lat, 0.99),
            "cpu_s_per_gib": sum(r["cpu"] for r in runs) / (moved / (1 << 30)) if moved else 0.0,
            "served": {k: v / gets for k, v in served.items()}, "failed": failed}


def report_tiers(measured, args, figures):
    """Prints the tiers table, adds its figures; returns its errors."""
    rows, objects = measured
    base = rows.get("pikv")
    table = [(("system", "GB/s", "p50 ms", "p99 ms", "CPU s/GiB", "memory hits", "disk hits",
               "misses", "GB/s / pikv's"), 1)]
    errors = 0
    for name, r in rows.items():
        vs = r["gbps"] / base["gbps"] if base and base["gbps"] else 0.0
        table.append((name, f"{r['gbps']:.2f}", f"{r['p50_us'] / 1000:.2f}",
                      f"{r['p99_us'] / 1000:.2f}", f"{r['cpu_s_per_gib']:.2f}",
                      *(f"{100 * r['served'][k]:.1f} %" for k in ("memory", "disk", "miss")),
                      f"{vs:.2f}x"))
        figures[f"tiers_{name}_gbps"] = round(r["gbps"], 3)
        figures[f"tiers_{name}_p99_ms"] = round(r["p99_us"] / 1000, 3)
        figures[f"tiers_{name}_cpu_s_per_gib"] = round(r["cpu_s_per_gib"], 3)
        for k, v in r["served"].items():
            figures[f"tiers_{name}_{k}_share"] = round(v, 4)
        errors += r["failed"]
    print(f"Tiers: {objects} objects of {args.tiers_size // MiB} MiB, "
          f"{args.tiers_memory // MiB} MiB in memory, the rest on disk; one client reads by "
          f"Zipf({args.tiers_theta}) (the disk tiers' files sit in the page cache here)")
    print_table(table)
    return errors
