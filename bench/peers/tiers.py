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
import re
import statistics
import time
import urllib.request

from harness import (MiB, Server, System, data_client, free_port, print_table, quantile,
                     run_clients)


class TierSystem:
    """A system of this workload: its harness.System (servers, clients) and
    `served()`, its cumulative gets by where they were served
    {"memory", "disk", "miss"}."""

    def __init__(self, system, served):
        self.system = system
        self.served = served


def metric(text, name, labels):
    """One sample of a Prometheus text page; 0 when absent."""
    found = re.search(rf"^{name}\{{{labels}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def start_pikv(args, work):
    """A pikv-node with its CPU and RocksDB tiers, --tiers-memory in CPU."""
    port, http = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    node = Server([f"{args.bin_dir}/pikv-node", "--endpoint", endpoint, "--data-dir",
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
                "disk": metric(text, "pikv_node_tier_hits_total", 'tier="disk"'),
                "miss": metric(text, "pikv_node_tier_misses_total", 'tier="disk"')}

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

    system = System("pikv", [node], data_client(args, "pikv", endpoint,
                                                ["--zipf", str(args.tiers_theta)]))
    system.settled = settled
    return TierSystem(system, served)


def measure_tiers(args, work):
    """{system: row} of the tiers workload."""
    objects = 2 * args.tiers_memory // args.tiers_size
    systems = [start_pikv(args, work)]
    for s in systems:
        r = run_clients(args, s.system, "load", args.tiers_size, objects, 1, 1, 0)
        if r["failed"] or r["ok"] < objects:
            raise RuntimeError(f"{s.system.name}: loading {objects} objects failed: {r}")
        getattr(s.system, "settled", lambda: None)()
    for s in systems:  # the memory tier shaped by the mix, not by the load order
        run_clients(args, s.system, "get", args.tiers_size, objects, 1, 1, args.tiers_seconds)
    runs, served = {}, {}
    for _ in range(args.rounds):
        for s in systems:
            before = s.served()
            runs.setdefault(s.system.name, []).append(run_clients(
                args, s.system, "get", args.tiers_size, objects, 1, 1, args.tiers_seconds))
            after = s.served()
            total = served.setdefault(s.system.name, dict.fromkeys(after, 0.0))
            for k in after:
                total[k] += after[k] - before[k]
    rows = {}
    for name, rs in runs.items():
        failed = sum(r["failed"] for r in rs)
        moved = sum(r["bytes"] for r in rs)
        lat = [x for r in rs for x in r["latencies_us"]]
        gets = sum(served[name].values()) or 1
        rows[name] = {
            "gbps": 0.0 if failed else statistics.median(
                r["bytes"] / r["seconds"] / 1e9 for r in rs),
            "p50_us": quantile(lat, 0.5), "p99_us": quantile(lat, 0.99),
            "cpu_s_per_gib": sum(r["cpu"] for r in rs) / (moved / (1 << 30)) if moved else 0.0,
            "served": {k: v / gets for k, v in served[name].items()}, "failed": failed}
    return rows, objects


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
