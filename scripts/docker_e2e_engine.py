"""The engine side of scripts/docker-e2e.sh: pikv's Python package on the
host, talking to the compose cluster only through its published loopback
ports (a node's 127.0.0.1:740N, the controllers' 127.0.0.1:7300 and 7301), as an
engine on a node's host would over tcp.

  python3 docker_e2e_engine.py p2p KEYDIR STATE.json   # store on node1, load through node2
  python3 docker_e2e_engine.py locate KEYDIR STATE.json NODE TIER...  # until NODE holds both in a TIER
  python3 docker_e2e_engine.py locate KEYDIR STATE.json NODE none     # until NODE holds neither
  python3 docker_e2e_engine.py unlisted KEYDIR BADKEY  # an unlisted key gets nothing

KEYDIR holds the engine key pair (engine.key, engine.pub) and the keyring,
copied out of the compose keys volume. Each command prints what it checked,
and exits non-zero on the first thing that is not as it should be.
"""

import json
import os
import sys
import time

import numpy as np

import pikv
from pikv.connector import ConnectorCore

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_CONFIG = os.path.join(HERE, "..", "tests", "device", "model_configs", "llama-3.2-1b.json")
CONTROLLER = "tcp://127.0.0.1:7300,tcp://127.0.0.1:7301"
NODES = {"node1": "tcp://127.0.0.1:7401", "node2": "tcp://127.0.0.1:7402",
         "node3": "tcp://127.0.0.1:7403"}
BLOCK = 16
MODEL_ID = "pikv-docker-e2e"


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def settings(node, key, keyring, fast=False):
    return {
        "local-node": NODES[node], "local-node-id": node, "host": node,
        "controller": CONTROLLER, "model-id": MODEL_ID, "model-config": MODEL_CONFIG,
        "dtype": "f32", "curve-key": key, "curve-keyring": keyring,
        # Generous for a loaded CI machine; tight where nothing should answer.
        "node-timeout": "1s" if fast else "10s",
        "controller-timeout": "1s" if fast else "5s",
        "locate-budget": "1s" if fast else "5s",
        "fetch-timeout": "2s" if fast else "20s",
    }


def engine(node, keydir, blocks=8):
    """A ConnectorCore over numpy paged caches in vLLM's flash layout."""
    core = ConnectorCore(settings(node, os.path.join(keydir, "engine"),
                                  os.path.join(keydir, "keyring")), block_size=BLOCK)
    o = core.options
    shape = (2, blocks, BLOCK, o.num_kv_heads, o.head_dim)
    layers = [np.zeros(shape, dtype=np.float32) for _ in range(o.num_layers)]
    core.register_kv_caches(layers)
    return core, layers


def admin(keydir):
    return pikv.Admin(CONTROLLER, timeout_ms=5000, curve_key=os.path.join(keydir, "engine"),
                      curve_keyring=os.path.join(keydir, "keyring"))


def holders(admin_, keys):
    """{key: [(node, tier), ...]} from the controller's locate."""
    out = {}
    for k in admin_.locate(keys)["keys"]:
        out[k["key"]] = [(loc.get("node_id") or loc.get("node") or "", loc.get("tier", ""))
                         for loc in k["locations"]]
    return out


def wait_held(admin_, keys, node, tiers, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            where = holders(admin_, keys)
        except pikv.Error as e:  # a restarted controller answers again soon
            where = {"error": str(e)}
        if all(any(n == node and t in tiers for n, t in where.get(k, [])) for k in keys):
            return where
        if time.monotonic() > deadline:
            fail(f"after {timeout}s the controller does not list {node} holding every chunk "
                 f"in {'/'.join(tiers)}: {where}")
        time.sleep(0.2)


def slots(layers, block_ids, start, count):
    """The KV of positions start..start+count-1 in blocks block_ids, per layer:
    (layer, plane, token, head, dim)."""
    idx = [(block_ids[p // BLOCK], p % BLOCK) for p in range(start, start + count)]
    return np.stack([np.stack([layer[:, b, o] for b, o in idx], axis=1) for layer in layers])


def p2p(keydir, state_path):
    rng = np.random.default_rng(20261124)
    sys_tokens = [int(t) for t in rng.integers(1, 120000, 16)]
    doc = [int(t) for t in rng.integers(1, 120000, 48)]
    question = [int(t) for t in rng.integers(1, 120000, 5)]

    # Engine 1 on node1: computes the system prompt and the document alone
    # (from position 0; here: random KV) and stores them through node1.
    a, a_layers = engine("node1", keydir)
    for layer in a_layers:
        layer[:] = rng.standard_normal(layer.shape, dtype=np.float32)
    t0 = time.monotonic()
    if not a.save(sys_tokens, [0]) or not a.save(doc, [1, 2, 3]):
        fail(f"engine on node1 could not store: {a.client.stats()}")
    keys = [a.client.key_of(sys_tokens), a.client.key_of(doc)]
    print(f"stored 2 chunks through node1 (127.0.0.1:7401) in {time.monotonic() - t0:.2f}s: "
          f"{keys[0]} (16 tokens), {keys[1]} (48 tokens), "
          f"{sum(l.nbytes for l in a_layers) * 64 // (8 * BLOCK) // 1024} KiB of KV")
    adm = admin(keydir)
    wait_held(adm, keys, "node1", ("cpu", "disk"), 30)
    print("controller: node1 holds both")

    # Engine 2 on node2: the same chunks in a prompt, the document at 16.
    b, b_layers = engine("node2", keydir)
    prompt = sys_tokens + doc + question
    lengths = [16, 48, 5]
    plan = b.client.plan([sys_tokens, doc, question])
    sources = [(c.source, c.peer_id) for c in plan.chunks]
    print(f"engine on node2 plans: {sources}")
    if [s for s, _ in sources] != ["peer", "peer"] or any(p != "node1" for _, p in sources):
        fail(f"node2's engine should pull both chunks from node1, plans {sources}")
    matched = b.num_matched_tokens(prompt, lengths)
    if matched != 64:
        fail(f"node2's engine matched {matched} tokens, not 64")
    t0 = time.monotonic()
    loaded = b.load(prompt, [0, 1, 2, 3, 4], matched, lengths)
    took = time.monotonic() - t0
    stats = b.client.stats()
    if loaded.loaded_tokens != 64 or loaded.failed_block_ids:
        fail(f"node2's engine loaded {loaded.loaded_tokens} of 64 tokens: {stats}")
    if stats["fetched"] != 2 or stats["peer_direct"] != 0 or stats["corrupt"] != 0:
        fail(f"not a P2P pull through node2: {stats}")
    print(f"engine on node2: 64 tokens loaded in {took:.2f}s by node2 pulling from node1 "
          f"(fetched {stats['fetched']}, direct {stats['peer_direct']})")

    # Exact: the system prompt stays at 0 (its KV byte for byte); the
    # document moved to 16 (V byte for byte; K re-rotated, byte for byte what
    # node1's own engine remaps from its local copy).
    got_sys = slots(b_layers, [0, 1, 2, 3, 4], 0, 16)
    if got_sys.tobytes() != slots(a_layers, [0], 0, 16).tobytes():
        fail("the system prompt's KV on node2 is not the stored bytes")
    got_doc = slots(b_layers, [0, 1, 2, 3, 4], 16, 48)
    stored_doc = slots(a_layers, [1, 2, 3], 0, 48)
    if got_doc[:, 1].tobytes() != stored_doc[:, 1].tobytes():
        fail("the document's V on node2 is not the stored bytes")
    if np.array_equal(got_doc[:, 0], stored_doc[:, 0]):
        fail("the document's K was not re-rotated to position 16")
    c, c_layers = engine("node1", keydir)
    local = c.load(prompt, [0, 1, 2, 3, 4], c.num_matched_tokens(prompt, lengths), lengths)
    cs = c.client.stats()
    if local.loaded_tokens != 64 or cs["planned_peer"] or cs["planned_local"] != 2 * cs["plans"]:
        fail(f"node1's engine did not load locally: {c.client.stats()}")
    if slots(c_layers, [0, 1, 2, 3, 4], 0, 64).tobytes() != \
            slots(b_layers, [0, 1, 2, 3, 4], 0, 64).tobytes():
        fail("node2's remap differs from node1's remap of its local copy")
    print("remap exact: system prompt and V byte-equal to what was stored, K byte-equal to "
          "node1's own remap of its local copy")
    where = wait_held(adm, keys, "node2", ("cpu", "disk"), 30)
    print(f"controller: node2 holds both after the pull: {where}")
    with open(state_path, "w") as f:
        json.dump({"keys": keys, "sys": sys_tokens, "doc": doc}, f)


def locate(keydir, state_path, node, tiers):
    """Waits until the controller lists NODE holding both chunks in one of
    TIERS, or (TIERS = none) holding neither."""
    with open(state_path) as f:
        keys = json.load(f)["keys"]
    t0 = time.monotonic()
    adm = admin(keydir)
    if tiers == ("none",):
        deadline = t0 + 60
        while True:
            try:
                where = holders(adm, keys)
            except pikv.Error as e:  # not answering is not an answer
                where = {"error": str(e)}
            if "error" not in where and \
                    not any(n == node for k in keys for n, _ in where.get(k, [])):
                break
            if time.monotonic() > deadline:
                fail(f"after 60s the controller still lists {node}: {where}")
            time.sleep(0.2)
        print(f"controller: {node}'s copies dropped from locate "
              f"({time.monotonic() - t0:.1f}s): {where}")
        return
    where = wait_held(adm, keys, node, tiers, 60)
    print(f"controller: {node} holds both chunks in {'/'.join(tiers)} "
          f"({time.monotonic() - t0:.1f}s): {where}")


def unlisted(keydir, bad_key):
    """A key pair not in the keyring: no node and no controller answers it."""
    keyring = os.path.join(keydir, "keyring")
    t0 = time.monotonic()
    try:
        pikv.Admin(CONTROLLER, timeout_ms=1000, curve_key=bad_key, curve_keyring=keyring).nodes()
        fail("the controller answered an unlisted key")
    except pikv.Error as e:
        print(f"controller 127.0.0.1:7300, unlisted key: refused in "
              f"{time.monotonic() - t0:.2f}s ({e})")
    for node in ("node1", "node2"):
        t0 = time.monotonic()
        core = ConnectorCore(settings(node, bad_key, keyring, fast=True), block_size=BLOCK)
        o = core.options
        layers = [np.ones((2, 4, BLOCK, o.num_kv_heads, o.head_dim), dtype=np.float32)
                  for _ in range(o.num_layers)]
        core.register_kv_caches(layers)
        tokens = list(range(1000, 1016))
        plan = core.client.plan([tokens, [1, 2]])
        if plan.local_node_answered or plan.controller_answered:
            fail(f"{node} or the controller answered an unlisted key: "
                 f"local {plan.local_node_answered}, controller {plan.controller_answered}")
        if core.save(tokens, [0]):
            fail(f"{node} took a store from an unlisted key")
        took = time.monotonic() - t0
        if took > 15:
            fail(f"refusing took {took:.1f}s")
        print(f"{node} {NODES[node][6:]}, unlisted key: no answer to plan or store "
              f"({took:.2f}s, {core.client.stats()['store_failures']} store failed)")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "p2p":
        p2p(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 6 and sys.argv[1] == "locate":
        locate(sys.argv[2], sys.argv[3], sys.argv[4], tuple(sys.argv[5:]))
    elif len(sys.argv) == 4 and sys.argv[1] == "unlisted":
        unlisted(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
