"""pikv beside its peers on one machine (issue 35): the data plane
(workload 1), between hosts (2), lookup (3), failover (4), tiers under
pressure (5, in tiers.py) and reuse semantics (6); one table each, then one
JSON line of every figure. What the workloads share is in harness.py.

Data plane:

Starts, for each object size, a pikv-node (CPU tier), redis-server, a
Mooncake Store (mooncake_master and a process lending it a segment), each
given the same memory, and LMCache's cache server (lmcache_server, which
neither evicts nor bounds its memory), all pinned to the same server cores;
then runs every cell (operation, clients, batch) for every system, the
systems interleaved round by round so machine noise hits them alike. Each
client is a separate process on the client cores (peer_data_client for pikv
and Redis, mooncake_client.py for Mooncake, lmcache_data_client.py for
LMCache); they set up, then start together.

Per cell and system it reports GB/s (successful bytes over the slowest
client's time, median round), p50/p99 of one successful call (all rounds), and
CPU-seconds per GiB moved, summed over every process: the clients' timed
loops and the servers' (master and segment holder for Mooncake) over the
same span. A cell with any failed operation reports no throughput.

Lookup: a registry of --lookup-keys keys (pikv: a pikv-controller told of
them by a simulated node's admit events; Mooncake: its master, the keys
stored as 64-byte objects in the holder's segment; LMCache: its controller,
told by one worker of admitted chunk hashes); one client asks where 32
random keys are, call after call: pikv's locate, Mooncake's batch_is_exist
and batch_get_replica_desc, LMCache's batched P2P lookup (which answers a
prefix length on one worker, not a location per key). It reports calls/s, p50/p99 of a
call, CPU-microseconds per call (client and servers) and the registry's
resident bytes per key (its RSS growth while filled over the keys).

Between hosts: the data plane's get cells with the store on host a and the
clients on host b, two network namespaces on a veth pair (Hosts): pikv's
get from node a, a P2P pull by node b from node a, Mooncake's get/get_into
from a segment on host a.

Failover: per trial and system a fresh one-member etcd and a leader plus a
standby on it (pikv's controllers; Mooncake's HA masters, with and without
its op log), --failover-keys keys stored; a prober looks up 32 random keys,
call after call, and the leader is SIGKILLed 2 s in. Reported: seconds from
the kill to the first answer, to the first call that found every key, and
the keys locatable at the end as a share of those before.

Reuse semantics: build/bin/e2e_bench's RAG trace (a random-weight model, two
engines on two pikv-nodes): the share of prompt tokens computed by a full
prefill, by a prefix cache (the peers' key scheme: chained block hashes, 16
tokens as vLLM and Mooncake behind it, 256 as LMCache; shared, never
evicting) and by pikv's position-independent chunks (the isolated mask).

  bench/peers/run.sh [--workloads data,hosts,lookup,failover,tiers,reuse]
                     [--sizes 1MiB,32MiB,512MiB]
                     [--rounds 3] [--seconds 1] [--lookup-keys 1000000] [--smoke]
"""
import argparse
import glob
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from harness import (MiB, Hosts, Server, System, data_client, die_with_parent, free_port,
                     parse_size, python_data_client, print_table, quantile, resident_bytes,
                     run_clients, size_name, wait_port, wait_ready)
from tiers import measure_tiers, report_tiers

HERE = os.path.dirname(os.path.abspath(__file__))


def redis_flushall(port):
    """Redis evicts by sampling (approximate LRU), so a get set loaded after a
    put cell can lose its own keys; it starts empty instead."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        if not s.recv(64).startswith(b"+OK"):
            raise RuntimeError("redis FLUSHALL failed")


def mooncake_env(args):
    return dict(os.environ, **dict(kv.split("=", 1) for kv in args.mooncake_env))


# Mooncake's eviction in the data plane's put cells: it sweeps only above
# the high watermark (default 0.9), 5 % of the objects a pass, and a put that
# finds no room fails (-200) rather than waiting for it, so a put stream into
# a full segment was refused from about 2/3 full. Sweeping from half full,
# a fifth at a time, every put lands (measured: docs/benchmarks.md, section 1).
DATA_PLANE_EVICTION = ("--eviction_high_watermark_ratio=0.5", "--eviction_ratio=0.2")


def start_mooncake_master(args, work, env, log, where=(), host="127.0.0.1", flags=()):
    """A mooncake_master on the server cores (in `where`'s namespace), with
    `flags` and then --mooncake-master-flags; it and the argv prefix of a
    mooncake_client.py client of it."""
    port = free_port()
    master = Server([args.mooncake_master, f"--rpc_port={port}", f"--metrics_port={free_port()}",
                     "--enable_metric_reporting=false", "--rpc_thread_num=2", *flags,
                     *args.mooncake_master_flags.split()],
                    args.server_cpus, f"{work}/{log}", env=env, prefix=where)
    wait_port(port, host=host, prefix=where)
    return master, [args.peers_python, f"{HERE}/mooncake_client.py", "--master", f"{host}:{port}"]


def mooncake_clear(mc, env):
    """Empties the store of client prefix `mc` (Mooncake evicts in the background)."""
    return lambda: subprocess.run(mc + ["--op", "clear"], check=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=env, timeout=60,
                                  preexec_fn=die_with_parent)


def start_mooncake(args, work, segment, hosts=None, master_flags=()):
    """A Mooncake Store on the server cores: its master and a process lending
    it a segment of `segment` bytes (on host a, when `hosts`). Returns both
    servers, the argv prefix of a mooncake_client.py client of it (one on
    host b, when `hosts`), and the environment of its processes."""
    env = mooncake_env(args)
    where = hosts.prefix(0) if hosts else []
    address = hosts.ADDRESS if hosts else ("127.0.0.1", "127.0.0.1")
    master, mc = start_mooncake_master(args, work, env, "mooncake_master.log", where, address[0],
                                       master_flags)
    holder = Server(mc + ["--hold", str(segment), "--host", address[0]], args.server_cpus,
                    f"{work}/mooncake_holder.log", ready="holding", env=env, prefix=where)
    return master, holder, mc + ["--host", address[1]], env


def start_systems(args, capacity, work):
    """Every system, each holding `capacity` bytes, on the server cores."""
    cpus = args.server_cpus
    systems = []

    def start_node(bin_dir, name):
        port = free_port()
        ipc = f"ipc://{work}/{name}.sock"
        node = Server([f"{bin_dir}/pikv-node", "--endpoint", f"tcp://127.0.0.1:{port}", ipc,
                       "--data-dir", f"{work}/{name}", "--disk", "false", "--prefault", "true",
                       "--cpu-capacity", str(capacity), "--controller", "", "--node-id", name,
                       "--log-level", "warn"],
                      cpus, f"{work}/{name}.log", ready=f"pikv-node {name} ready")
        return node, f"tcp://127.0.0.1:{port}", ipc

    node, tcp, ipc = start_node(args.bin_dir, "peers")
    systems.append(System("pikv", [node], data_client(args, "pikv", tcp)))
    if args.before_bin_dir:  # another build's node and client, measured beside this one
        before, before_tcp, _ = start_node(args.before_bin_dir, "before")
        systems.append(System("pikv_before", [before], data_client(
            args, "pikv", before_tcp, bin_dir=args.before_bin_dir)))
    # Its best path on one host (peer_data_client --system pikv-local): a
    # put written into reserved arena space and sealed there, a get leased
    # in place and copied once into the reader's memory.
    systems.append(System("pikv_local", [node], data_client(args, "pikv-local", ipc)))

    redis_port = free_port()
    redis = Server([args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--maxmemory", str(capacity),
                    "--maxmemory-policy", "allkeys-lru", "--proto-max-bulk-len", "2gb",
                    "--client-query-buffer-limit", "2gb", "--dir", work], cpus,
                   f"{work}/redis.log")
    wait_port(redis_port)
    systems.append(System("redis", [redis], data_client(args, "redis",
                                                        f"127.0.0.1:{redis_port}")))
    systems[-1].flush = lambda: redis_flushall(redis_port)

    master, holder, mc, env = start_mooncake(args, work, capacity,
                                             master_flags=DATA_PLANE_EVICTION)

    systems.append(System("mooncake", [master, holder], python_data_client(mc), env))
    systems[-1].flush = mooncake_clear(mc, env)
    systems.append(System("mooncake_into", [master, holder], python_data_client(mc, ["--into"]),
                          env))
    systems[-1].puts = False  # the same put as "mooncake"
    if "mooncake_local" in args.systems:
        systems.append(start_mooncake_local(args, work, capacity))
    if args.lmcache_python and "lmcache" in args.systems:
        systems.append(start_lmcache_server(args, work))
    return systems


def start_mooncake_local(args, work, capacity):
    """Mooncake's same-host path: a second store (its own master) whose
    segment a real client (the wheel's mooncake_client binary) holds on the
    server cores; clients are dummy clients of it over shared memory, reading
    with get_into."""
    env = mooncake_env(args)
    master, mc = start_mooncake_master(args, work, env, "mooncake_local_master.log",
                                       flags=DATA_PLANE_EVICTION)
    client_port = free_port()
    real = Server([os.path.join(os.path.dirname(args.mooncake_master), "mooncake_client"),
                   f"--master_server_address={mc[-1]}", "--metadata_server=P2PHANDSHAKE",
                   f"--global_segment_size={capacity}", f"--port={client_port}",
                   "--host=127.0.0.1", "--protocol=tcp"],
                  args.server_cpus, f"{work}/mooncake_local_client.log", env=env)
    wait_port(client_port)
    system = System("mooncake_local", [master, real], python_data_client(
        mc, ["--dummy", f"127.0.0.1:{client_port}", "--into"]), env)
    system.flush = mooncake_clear(mc, env)
    return system


def start_lmcache_server(args, work):
    """LMCache's cache server (the remote tier of its engines, lm://) on the
    server cores. It neither evicts nor bounds its memory: it holds at most
    the put cells' key space (its client overwrites one key space)."""
    port = free_port()
    server = Server([args.lmcache_python, "-m", "lmcache.v1.server", "127.0.0.1", str(port),
                     "cpu"], args.server_cpus, f"{work}/lmcache_server.log")
    wait_port(port, timeout=120)  # it imports torch first
    return System("lmcache", [server], python_data_client(
        [args.lmcache_python, f"{HERE}/lmcache_data_client.py", "--server", f"127.0.0.1:{port}"]))


def load(args, systems, size, objects):
    """Stores objects 0..objects-1 in every system, untimed."""
    seen = set()
    for s in systems:
        if id(s.servers[0]) in seen:
            continue
        seen.add(id(s.servers[0]))
        s.flush()
        r = run_clients(args, s, "load", size, objects, 1, 1, 0)
        if r["failed"] or r["ok"] < objects:
            raise RuntimeError(f"{s.name}: loading {objects} objects of {size} failed: {r}")


def cells_for(size, args, put_objects):
    """(op, clients, batch) cells measured for objects of `size`: those whose
    clients hold at most --client-memory of objects (a put client holds its
    whole key space)."""
    cells = []
    for op in ("put", "get"):
        for clients in args.clients:
            if op == "put" and clients * (put_objects + 1) * size > args.client_memory:
                continue
            cells.append((op, clients, 1))
        if size * 32 <= 64 * MiB and not args.smoke:
            cells.append((op, 1, 32))
    return cells


def measure_cells(args, systems, size, cells, put_objects, get_objects, rows):
    """Runs `cells` ((op, clients, batch)) on `systems`, interleaved round
    by round; adds a row per cell and system to `rows`."""
    # A client finishes only a few calls of 256 MiB and up in --seconds, so
    # the slowest one's last call would set the round's time: longer rounds.
    seconds = args.seconds * (3 if size >= 256 * MiB else 1)
    for op, clients, batch in cells:
        objects = put_objects if op == "put" else get_objects
        if op == "get":  # a put cell before evicted part of the get set
            load(args, systems, size, get_objects)
        per_round = {}
        for round_ in range(args.rounds):
            for s in systems:
                if op == "put" and not s.puts:
                    continue
                # Each put round a key space of its own: no put finds its
                # key stored by an earlier round (a store that has it
                # answers without moving the bytes).
                seed = 1 + round_ if op == "put" else 0
                per_round.setdefault(s.name, []).append(
                    run_clients(args, s, op, size, objects, batch, clients, seconds, seed))
        for name, runs in per_round.items():
            failed = sum(r["failed"] for r in runs)
            gbps = [r["bytes"] / r["seconds"] / 1e9 for r in runs if r["seconds"] > 0]
            moved = sum(r["bytes"] for r in runs)
            lat = [x for r in runs for x in r["latencies_us"]]
            rows[(size, op, clients, batch, name)] = {
                "gbps": 0.0 if failed else statistics.median(gbps),
                "p50_us": quantile(lat, 0.5), "p99_us": quantile(lat, 0.99),
                "cpu_s_per_gib": sum(r["cpu"] for r in runs) / (moved / (1 << 30))
                if moved else 0.0,
                "failed": failed}
            if failed:
                print(f"{name} {op} {size_name(size)} c{clients} b{batch}: {failed} failed",
                      file=sys.stderr)


def objects_for(args, size):
    """(capacity, put objects, get objects) for objects of `size`."""
    capacity = max(args.capacity, 3 * size)
    put_objects = max(8, 2 * capacity // size)      # more than the servers hold
    # All resident, with room for Redis's reply buffers (it counts them
    # against maxmemory and evicts keys for them).
    get_objects = max(1, min(256, capacity // (4 * size)))
    return capacity, put_objects, get_objects


def measure_data_plane(args, work):
    rows = {}  # (size, op, clients, batch, system) -> figures
    for size in args.sizes:
        capacity, put_objects, get_objects = objects_for(args, size)
        try:
            systems = [s for s in start_systems(args, capacity, work) if s.name in args.systems]
            measure_cells(args, systems, size, cells_for(size, args, put_objects), put_objects,
                          get_objects, rows)
        finally:  # every server started, whether its system was measured or not
            Server.stop_all()
    return rows


def start_two_hosts(args, capacity, work, hosts):
    """Host a: a pikv-controller, pikv-node a (CPU tier, `capacity`) and a
    Mooncake Store (master and segment holder); host b: pikv-node b. The
    systems' clients run on host b: a get from node a, a pull by node b
    from node a, Mooncake's get/get_into from the segment on host a."""
    cpus, (a, b) = args.server_cpus, hosts.ADDRESS
    ctl_port, port_a, port_b = free_port(), free_port(), free_port()
    controller = f"tcp://{a}:{ctl_port}"
    ctl = Server([f"{args.bin_dir}/pikv-controller", "--endpoint", controller, "--http", "",
                  "--log-level", "warn"], cpus, f"{work}/controller.log",
                 ready="pikv-controller ready", prefix=hosts.prefix(0))

    # Host b's node shares the client cores, as Mooncake's receiving side
    # (the client process) does.
    def node(host, address, port, extra):
        return Server([f"{args.bin_dir}/pikv-node", "--endpoint", f"tcp://{address}:{port}",
                       "--data-dir", f"{work}/node-{host}", "--disk", "false", "--prefault",
                       "true", "--cpu-capacity", str(capacity), "--controller", controller,
                       "--node-id", host, "--host", f"host-{host}", "--log-level", "warn"]
                      + extra, cpus if host == "a" else args.client_cpus, f"{work}/node-{host}.log",
                      ready=f"pikv-node {host} ready",
                      prefix=hosts.prefix(0 if host == "a" else 1))
    node_a = node("a", a, port_a, [])
    node_b = node("b", b, port_b, ["--endpoint", f"ipc://{work}/node-b.sock"])
    get = System("pikv_get", [node_a], data_client(args, "pikv", f"tcp://{a}:{port_a}"))
    pull = System("pikv_pull", [node_a, node_b, ctl],
                  data_client(args, "pikv-pull", f"ipc://{work}/node-b.sock",
                              ["--from", f"tcp://{a}:{port_a}"]))
    pull.disjoint_gets = True  # each deletes what it pulled
    # load() stores the get set once per first server: node a's by pikv_get.
    master, holder, mc, env = start_mooncake(args, work, capacity, hosts)
    mooncake = System("mooncake", [master, holder], python_data_client(mc), env)
    mooncake_into = System("mooncake_into", [master, holder], python_data_client(mc, ["--into"]), env)
    mooncake_into.puts = False
    systems = [s for s in (get, pull, mooncake, mooncake_into)
               if s.name in args.systems or s.name.split("_")[0] in args.systems]
    for s in systems:
        s.prefix = hosts.prefix(1)
    return systems


def measure_between_hosts(args, work):
    """Gets of each size by clients on host b from a store on host a."""
    rows = {}
    try:
        hosts = Hosts()
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"between hosts: skipped, network namespaces need root ({e})", file=sys.stderr)
        return rows
    try:
        for size in args.sizes:
            capacity, put_objects, get_objects = objects_for(args, size)
            # An object for each pull client, and room for them all on node b.
            get_objects = max(get_objects, max(args.clients))
            capacity = max(capacity, (get_objects + 1) * size)
            try:
                systems = start_two_hosts(args, capacity, work, hosts)
                cells = [(op, c, b) for op, c, b in cells_for(size, args, put_objects)
                         if op == "get"]
                measure_cells(args, systems, size, cells, put_objects, get_objects, rows)
            finally:
                Server.stop_all()
    finally:
        hosts.close()
    return rows


def fill_registry(args, system, registry, argv):
    """Runs `argv` (a client that fills `registry`'s process with
    --lookup-keys keys); returns (resident bytes per key, fill seconds)."""
    before = resident_bytes(registry.proc.pid)
    out = subprocess.run(["taskset", "-c", args.client_cpus] + argv, check=True, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=system.env,
                         timeout=1800, preexec_fn=die_with_parent).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if result["ok"] != args.lookup_keys:
        raise RuntimeError(f"{system.name}: filled {result['ok']} of {args.lookup_keys} keys")
    return (resident_bytes(registry.proc.pid) - before) / args.lookup_keys, result["seconds"]


def start_registries(args, work):
    """pikv's controller and Mooncake's master, each filled with
    --lookup-keys keys. Returns the query systems and, per registry, its
    (resident bytes per key, fill seconds)."""
    n, cpus = args.lookup_keys, args.server_cpus
    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    # The simulated node never heartbeats: it stays alive for the run.
    controller = Server([f"{args.bin_dir}/pikv-controller", "--endpoint", endpoint, "--http", "",
                         "--suspect-after", "30m", "--dead-after", "60m", "--log-level", "warn"],
                        cpus, f"{work}/controller.log")
    wait_port(port)
    client = f"{args.bin_dir}/peer_lookup_client"
    pikv = System("pikv", [controller], lambda op, size, objects, first, batch, seconds, seed: [
        client, "--endpoint", endpoint, "--op", "locate", "--keys", str(objects), "--batch",
        str(batch), "--seconds", str(seconds), "--sync"])
    filled = {"pikv": fill_registry(args, pikv, controller, [
        client, "--endpoint", endpoint, "--op", "fill", "--keys", str(n)])}

    # Its objects' bytes live in the holder's segment, not in the master.
    master, holder, mc, env = start_mooncake(args, work, max(256 * MiB, n * 256))

    def mc_query(query):
        return lambda op, size, objects, first, batch, seconds, seed: mc + [
            "--op", query, "--objects", str(objects), "--batch", str(batch), "--seconds",
            str(seconds), "--sync"]
    exist = System("mooncake_exist", [master, holder], mc_query("exist"), env)
    filled["mooncake"] = fill_registry(args, exist, master,
                                       mc + ["--op", "fill-keys", "--objects", str(n)])
    replicas = System("mooncake_replicas", [master, holder], mc_query("replicas"), env)
    systems = [pikv, exist, replicas]
    if args.lmcache_python:
        systems.append(start_lmcache_registry(args, work, filled))
    return systems, filled


def start_lmcache_registry(args, work, filled):
    """LMCache's controller, told by one worker (lmcache_client.py) that it
    holds --lookup-keys chunks; its query system."""
    http, pull, reply = free_port(), free_port(), free_port()
    controller = Server([os.path.join(os.path.dirname(args.lmcache_python), "lmcache_controller"),
                         "--host", "127.0.0.1", "--port", str(http), "--monitor-ports",
                         json.dumps({"pull": pull, "reply": reply})],
                        args.server_cpus, f"{work}/lmcache_controller.log")
    wait_port(reply, timeout=180)  # it imports torch first
    client = [args.lmcache_python, f"{HERE}/lmcache_client.py", "--pull", str(pull), "--reply",
              str(reply)]
    lmcache = System("lmcache", [controller], lambda op, size, objects, first, batch, seconds,
                     seed: client + ["--op", "lookup", "--objects", str(objects), "--batch",
                                     str(batch), "--seconds", str(seconds), "--sync"])
    filled["lmcache"] = fill_registry(args, lmcache, controller,
                                      client + ["--op", "fill", "--objects", str(args.lookup_keys)])
    return lmcache


def measure_lookup(args, work):
    """Per query system: calls/s (median round), p50/p99 of a call, CPU-us
    per call; and per registry its bytes per key and fill time."""
    rows = {}
    try:
        systems, filled = start_registries(args, work)
        per_round = {}
        for _ in range(args.rounds):
            for s in systems:
                per_round.setdefault(s.name, []).append(run_clients(
                    args, s, "locate", 0, args.lookup_keys, 32, 1, args.seconds))
        for name, runs in per_round.items():
            calls = [r["ok"] / 32 / r["seconds"] for r in runs if r["seconds"] > 0]
            lat = [x for r in runs for x in r["latencies_us"]]
            all_calls = max(1, sum((r["ok"] + r["failed"]) / 32 for r in runs))
            bytes_per_key, fill_seconds = filled[name.split("_")[0]]
            rows[name] = {"calls_per_s": statistics.median(calls) if calls else 0.0,
                          "p50_us": quantile(lat, 0.5), "p99_us": quantile(lat, 0.99),
                          "cpu_us_per_call": sum(r["cpu"] for r in runs) * 1e6 / all_calls,
                          "server_cpu_us_per_call":
                              sum(r["server_cpu"] for r in runs) * 1e6 / all_calls,
                          "bytes_per_key": bytes_per_key, "fill_s": fill_seconds,
                          "failed": sum(r["failed"] for r in runs)}
    finally:
        Server.stop_all()
    return rows


def report_lookup(rows, args, figures):
    """Prints the lookup table, adds its figures; returns its errors."""
    table = [(("system", "calls/s", "p50 us", "p99 us", "CPU us/call", "of it servers",
               "bytes/key", "fill s", "p50 / pikv's"), 1)]
    base = rows.get("pikv")
    errors = 0
    for name, r in rows.items():
        vs = r["p50_us"] / base["p50_us"] if base and base["p50_us"] else 0
        table.append((name, "FAILED" if r["failed"] else f"{r['calls_per_s']:.0f}",
                      f"{r['p50_us']:.0f}", f"{r['p99_us']:.0f}", f"{r['cpu_us_per_call']:.0f}",
                      f"{r['server_cpu_us_per_call']:.0f}", f"{r['bytes_per_key']:.0f}", f"{r['fill_s']:.1f}", f"{vs:.2f}x"))
        for key in ("calls_per_s", "p50_us", "p99_us", "cpu_us_per_call",
                    "server_cpu_us_per_call", "bytes_per_key"):
            figures[f"lookup_{name}_{key}"] = round(r[key], 1)
        errors += r["failed"]
    print(f"Lookup: 32 random keys of {args.lookup_keys} per call, one client")
    print_table(table)
    return errors


def reuse(args, figures):
    """Runs e2e_bench's trace; prints the share of prompt tokens each scheme
    computes, adds its figures; returns its errors."""
    done = subprocess.run([f"{args.bin_dir}/e2e_bench", "--prompts", str(args.prompts)],
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          timeout=1800, preexec_fn=die_with_parent)
    e2e = json.loads(done.stdout.strip().splitlines()[-1])
    total = e2e["tokens_total"]
    schemes = [("full", "full prefill", "", 1.0),
               ("prefix16", "prefix cache, 16-token blocks", "vLLM; Mooncake Store behind it",
                e2e["prefix16_computed_fraction"]),
               ("prefix256", "prefix cache, 256-token chunks", "LMCache (prefix mode)",
                e2e["prefix256_computed_fraction"]),
               ("pikv", "position-independent chunks", "pikv (isolated mask)",
                e2e["computed_fraction"])]
    table = [(("scheme", "whose", "tokens computed", "share", "tokens / pikv's"), 2)]
    for key, name, whose, fraction in schemes:
        table.append((name, whose, f"{fraction * total:.0f}", f"{100 * fraction:.1f} %",
                      f"{fraction / e2e['computed_fraction']:.2f}x"))
        figures[f"reuse_{key}_computed_fraction"] = round(fraction, 4)
    print(f"Reuse: prompt tokens computed over {args.prompts} RAG prompts ({total:.0f} "
          f"tokens). Prefix caches answer as full attention does; pikv's chunks attend within "
          f"themselves (an approximation of it), and its answers equal a from-scratch pass "
          f"under that mask (max |logit error| {e2e['max_logit_error']:.1e}). LMCache's "
          f"position-independent mode (CacheBlend) runs on GPUs only.")
    print_table(table)
    return done.returncode


def start_etcd(work, name):
    """A one-member etcd (Debian's) on free loopback ports; its client URL."""
    client, peer = free_port(), free_port()
    Server(["etcd", "--name", name, "--data-dir", f"{work}/{name}", "--listen-client-urls",
            f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}", "--initial-cluster", f"{name}=http://127.0.0.1:{peer}"],
           "0-1024", f"{work}/{name}.log")
    wait_port(client)
    return f"127.0.0.1:{client}"


def pikv_failover_cluster(args, work, trial):
    """pikv: two controllers on one etcd (the first leads), a node following
    the leader by etcd:// holding --failover-keys objects of 4 KiB. Returns
    the leader's server and the prober's argv."""
    cpus, name = args.server_cpus, f"pikv-{trial}"
    etcd = start_etcd(work, f"etcd-{name}")

    def controller(i):
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        return Server([f"{args.bin_dir}/pikv-controller", "--endpoint", endpoint, "--http", "",
                       "--etcd", etcd, "--cluster", name, "--log-level", "warn"], cpus,
                      f"{work}/{name}-controller-{i}.log", ready="pikv-controller ready"), endpoint
    leader, endpoint = controller(0)
    deadline = time.time() + 30
    while time.time() < deadline:  # it leads before the standby starts
        health = subprocess.run([f"{args.bin_dir}/pikv", "admin", "--controller", endpoint,
                                 "--timeout", "500ms", "--json", "health"], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if health.returncode == 0 and json.loads(health.stdout).get("role") == "leader":
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("pikv's first controller did not lead in 30 s")
    controller(1)
    node_port = free_port()
    Server([f"{args.bin_dir}/pikv-node", "--endpoint", f"tcp://127.0.0.1:{node_port}",
            "--data-dir", f"{work}/{name}-node", "--disk", "false", "--cpu-capacity", "256MiB",
            "--controller", f"etcd://{etcd}/{name}", "--node-id", "n1", "--log-level", "warn"],
           cpus, f"{work}/{name}-node.log", ready="pikv-node n1 ready")
    subprocess.run([f"{args.bin_dir}/peer_data_client", "--system", "pikv", "--endpoint",
                    f"tcp://127.0.0.1:{node_port}", "--op", "load", "--size", "4096",
                    "--objects", str(args.failover_keys)], check=True, stdout=subprocess.DEVNULL,
                   timeout=300, preexec_fn=die_with_parent)
    probe = [f"{args.bin_dir}/peer_lookup_client", "--endpoint", f"etcd://{etcd}/{name}",
             "--op", "probe", "--keys", str(args.failover_keys), "--object-size", "4096",
             "--seconds", str(args.failover_seconds), "--sync"]
    return leader, probe, None


def mooncake_failover_cluster(args, work, trial, oplog):
    """Mooncake: two masters with HA on one etcd (the first leads; with
    --enable_oplog the standby replays the leader's log), a holder lending a
    segment, --failover-keys objects of 64 bytes. Returns the leader's
    server, the prober's argv and its environment."""
    cpus, name = args.server_cpus, f"mooncake{'-oplog' if oplog else ''}-{trial}"
    etcd = start_etcd(work, f"etcd-{name}")
    env = mooncake_env(args)

    def master(i):
        port = free_port()
        server = Server([args.mooncake_master, "--enable_ha=true", f"--etcd_endpoints={etcd}",
                         "--rpc_address=127.0.0.1", f"--rpc_port={port}",
                         f"--metrics_port={free_port()}", "--enable_metric_reporting=false",
                         "--rpc_thread_num=2", f"--enable_oplog={'true' if oplog else 'false'}"],
                        cpus, f"{work}/{name}-master-{i}.log", env=env)
        return server, port
    leader, port = master(0)
    wait_port(port, timeout=60)  # a new leader serves after a 5 s warm-up
    master(1)
    mc = [args.peers_python, f"{HERE}/mooncake_client.py", "--master", f"etcd://{etcd}"]
    Server(mc + ["--hold", str(64 * MiB)], cpus, f"{work}/{name}-holder.log", ready="holding",
           env=env)
    subprocess.run(mc + ["--op", "fill-keys", "--objects", str(args.failover_keys)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=300,
                   preexec_fn=die_with_parent)
    probe = mc + ["--op", "probe", "--objects", str(args.failover_keys), "--batch", "32",
                  "--seconds", str(args.failover_seconds), "--sync"]
    return leader, probe, env


def recovery(events, killed):
    """(s from `killed` to the first answer after an outage, s to the first
    call that found every key after one missed): 0 when none was lost, None
    when never back. `events` are a prober's [start, end, outcome] of calls
    whose outcome changed or that took over 100 ms (0: no answer, 1: keys
    missing, 2: every key found). A call across the kill had no answer until
    it returned; until the first event after the kill, the outcome before it
    held."""
    after, prior = [], None
    for start, end, outcome in events:
        if end < killed:
            prior = outcome
            continue
        if start < killed and not after:
            after.append((0.0, 0))
        after.append((end - killed, outcome))
    if prior is not None and (not after or after[0] != (0.0, 0)):
        after.insert(0, (0.0, prior))

    def recovered(lost, back):
        first = next((i for i, (_, outcome) in enumerate(after) if lost(outcome)), None)
        if first is None:
            return 0.0
        return next((t for t, outcome in after[first:] if back(outcome)), None)
    return (recovered(lambda o: o == 0, lambda o: o > 0),
            recovered(lambda o: o < 2, lambda o: o == 2))


def failover_trial(args, leader, probe, env):
    """Kills the leader 2 s into the prober's run; returns (s until the first
    answer after it, s until a call found every key (None: never), the keys
    locatable at the end as a share of those locatable before)."""
    proc = subprocess.Popen(["taskset", "-c", args.client_cpus] + probe, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                            preexec_fn=die_with_parent)
    try:
        wait_ready(proc, "the failover prober")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(2)
        killed = time.monotonic()
        leader.proc.kill()
        out, _ = proc.communicate(timeout=args.failover_seconds + 120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = out.strip().splitlines()
    if not lines:
        raise RuntimeError(f"the failover prober printed nothing: {probe}")
    r = json.loads(lines[-1])
    answered, whole = recovery(r["events"], killed)
    if r["found_before"] <= 0:
        raise RuntimeError(f"none of {r['keys']} keys was locatable before the kill: {probe}")
    return answered, whole, r["found_after"] / r["found_before"]


def print_log_tails(pattern, lines=20):
    """The last lines of each server log matching `pattern`, to stderr: what
    a failed trial leaves to diagnose it by."""
    for path in sorted(glob.glob(pattern)):
        with open(path, errors="replace") as f:
            tail = f.readlines()[-lines:]
        print(f"-- {path}:\n{''.join(tail)}", file=sys.stderr, end="")


def measure_failover(args, work):
    """Per system, per trial: a fresh etcd and cluster, the leader SIGKILLed
    under a prober's load."""
    rows = {}
    systems = [("pikv", lambda t: pikv_failover_cluster(args, work, t)),
               ("mooncake", lambda t: mooncake_failover_cluster(args, work, t, False)),
               ("mooncake_oplog", lambda t: mooncake_failover_cluster(args, work, t, True))]
    for trial in range(args.failover_trials):
        for name, start in systems:
            try:
                leader, probe, env = start(trial)
                rows.setdefault(name, []).append(failover_trial(args, leader, probe, env))
            except Exception as e:  # this trial is lost, not the others
                print(f"failover {name} trial {trial}: {e!r}", file=sys.stderr)
                print_log_tails(f"{work}/*{name.replace('_', '-')}-{trial}*.log")
                rows.setdefault(name, []).append(None)
            finally:
                Server.stop_all()
    return rows


def report_failover(rows, args, figures):
    """Prints the failover table, adds its figures; returns its errors."""
    def seconds(values, q):  # "never" sorts last
        v = quantile([math.inf if x is None else x for x in values], q)
        return None if v == math.inf else v

    def text(v):
        return "never" if v is None else f"{v:.2f}"
    errors = 0
    table = [(("system", "trials", "first answer s (median, max)",
               "first call all found s (median, max)", "keys locatable after"), 1)]
    for name, trials in rows.items():
        errors += trials.count(None)
        trials = [t for t in trials if t]
        if not trials:
            table.append((name, "0", "FAILED", "FAILED", ""))
            continue
        answered = [t[0] for t in trials]
        whole = [t[1] for t in trials]
        share = min(t[2] for t in trials)

        def median_max(values):
            return f"{text(seconds(values, 0.5))}, {text(seconds(values, 1))}"
        table.append((name, str(len(trials)), median_max(answered), median_max(whole),
                      f"{100 * share:.1f} %"))
        figures[f"failover_{name}_first_answer_s"] = seconds(answered, 0.5)
        figures[f"failover_{name}_all_found_s"] = seconds(whole, 0.5)
        figures[f"failover_{name}_locatable_after"] = round(share, 4)
    print(f"Failover: the leader SIGKILLed 2 s into a prober's lookups of 32 random keys of "
          f"{args.failover_keys} (seconds after the kill; keys locatable at the end as a share "
          f"of those before, the worst trial)")
    print_table(table)
    return errors


def report_data_plane(rows, figures, title="Data plane", prefix=""):
    """Prints a data-plane table, adds its figures (keys starting `prefix`);
    returns its errors."""
    table = [(("size", "op", "clients", "batch", "system", "GB/s", "p50 ms", "p99 ms",
               "CPU s/GiB", "GB/s / pikv's"), 5)]
    errors = 0
    for (size, op, clients, batch, name), r in rows.items():
        # A peer's same-host path is compared with pikv's own (pikv_local),
        # everything else (pikv_local too) with pikv over tcp.
        same_host_peer = name.endswith("_local") and not name.startswith("pikv")
        bases = ("pikv_local", "pikv") if same_host_peer else ("pikv", "pikv_get")
        base = next((rows[k] for k in ((size, op, clients, batch, b) for b in bases) if k in rows),
                    None)
        vs = (r["gbps"] / base["gbps"]) if base and base["gbps"] and not r["failed"] else 0
        table.append((size_name(size), op, str(clients), str(batch), name,
                      "FAILED" if r["failed"] else f"{r['gbps']:.2f}",
                      f"{r['p50_us'] / 1000:.2f}", f"{r['p99_us'] / 1000:.2f}",
                      f"{r['cpu_s_per_gib']:.2f}", f"{vs:.2f}x"))
        cell = f"{prefix}{name}_{op}_{size_name(size)}_c{clients}_b{batch}"
        figures[cell + "_gbps"] = round(r["gbps"], 3)
        figures[cell + "_p99_ms"] = round(r["p99_us"] / 1000, 3)
        figures[cell + "_cpu_s_per_gib"] = round(r["cpu_s_per_gib"], 3)
        if not name.startswith("pikv") and base and r["gbps"]:
            figures[f"{prefix}pikv_vs_{name}_{op}_{size_name(size)}_c{clients}_b{batch}"] = round(
                base["gbps"] / r["gbps"], 3)
        errors += r["failed"]
    print(title)
    print_table(table)
    return errors

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin-dir", required=True, help="pikv's build/bin")
    p.add_argument("--peers-python", required=True, help="the peers' virtualenv's python")
    p.add_argument("--mooncake-master", required=True)
    p.add_argument("--lmcache-python", help="LMCache's virtualenv's python (none: no LMCache)")
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    p.add_argument("--sizes", default="1MiB,32MiB,512MiB")
    p.add_argument("--clients", default="1,4")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--capacity", default="256MiB", help="memory each system holds (at least "
                   "3 objects)")
    p.add_argument("--client-memory", default="6GiB",
                   help="skip put cells whose clients would hold more objects than this")
    p.add_argument("--mooncake-env", nargs="*", default=[],
                   help="KEY=VALUE for every Mooncake process (its transport's settings; "
                   "MC_TCP_SLICE_SIZE 64 KiB, 1 MiB and 4 MiB measured alike here)")
    p.add_argument("--mooncake-master-flags", default="",
                   help="more flags for the Mooncake masters of the data, hosts and lookup "
                   "workloads, given with '=' (--mooncake-master-flags='--eviction_ratio=0.2')")
    p.add_argument("--systems", default="pikv,pikv_local,redis,mooncake,mooncake_into,mooncake_local,lmcache")
    p.add_argument("--before-bin-dir", help="another build's bin dir: its node and tcp client "
                   "measured too, as pikv_before, round by round beside pikv's (data plane)")
    p.add_argument("--server-cpus", default="0")
    p.add_argument("--client-cpus", default="1")
    p.add_argument("--workloads", default="data,hosts,lookup,failover,tiers,reuse")
    p.add_argument("--failover-trials", type=int, default=3)
    p.add_argument("--failover-keys", type=int, default=10_000)
    p.add_argument("--failover-seconds", type=float, default=20, help="each prober's run")
    p.add_argument("--prompts", type=int, default=200, help="prompts in the RAG trace (reuse)")
    p.add_argument("--lookup-keys", type=int, default=1_000_000, help="keys in each registry "
                   "(lookup)")
    p.add_argument("--tiers-memory", default="256MiB", help="each system's memory tier (tiers)")
    p.add_argument("--tiers-size", default="1MiB", help="object size (tiers)")
    p.add_argument("--tiers-theta", type=float, default=0.9, help="the Zipf skew (tiers)")
    p.add_argument("--tiers-seconds", type=float, default=5, help="each timed round (tiers)")
    p.add_argument("--smoke", action="store_true", help="one small object per system, briefly")
    args = p.parse_args()
    if args.smoke:
        args.sizes, args.clients, args.rounds, args.seconds = "1MiB", "1", 1, 0.2
        args.lookup_keys, args.prompts = 10_000, 10
        args.failover_trials, args.failover_keys = 1, 1000
        args.tiers_memory, args.tiers_seconds = "16MiB", 0.5
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.clients = [int(c) for c in args.clients.split(",")]
    args.capacity = parse_size(args.capacity)
    args.tiers_memory, args.tiers_size = parse_size(args.tiers_memory), parse_size(args.tiers_size)
    args.systems = args.systems.split(",") + (["pikv_before"] if args.before_bin_dir else [])
    args.client_memory = parse_size(args.client_memory)
    args.workloads = args.workloads.split(",")
    unknown = set(args.workloads) - {"data", "hosts", "lookup", "failover", "tiers", "reuse"}
    if unknown:
        p.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    # Stopped from outside: the servers (each in its own session) go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="pikv-peers-")
    figures = {"bench": "peers", "rounds": args.rounds, "seconds_per_cell": args.seconds,
               "seconds_per_cell_256mib_up": 3 * args.seconds}
    errors = 0
    workloads = {
        "data": lambda: report_data_plane(measure_data_plane(args, work), figures),
        "hosts": lambda: report_data_plane(
            measure_between_hosts(args, work), figures,
            "Between hosts (clients on host b, the store on host a)", "hosts_"),
        "lookup": lambda: report_lookup(measure_lookup(args, work), args, figures),
        "failover": lambda: report_failover(measure_failover(args, work), args, figures),
        "tiers": lambda: report_tiers(measure_tiers(args, work), args, figures),
        "reuse": lambda: reuse(args, figures)}
    try:
        for name in args.workloads:
            try:  # a workload that breaks loses its own table, not the others'
                errors += workloads[name]()
            except Exception as e:
                print(f"{name}: failed: {e!r}", file=sys.stderr)
                figures[f"{name}_failed"] = str(e)
                errors += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures["errors"] = errors
    print(json.dumps(figures))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
