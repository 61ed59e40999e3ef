"""pikv.router (`python -m pikv.router`, a subprocess) in front of two
stand-in vLLM servers (real HTTP/1.1 servers on asyncio: /health,
/tokenize, completions and chat completions as JSON or chunked SSE; each
records what it was asked and the exact bytes it answered) and a stand-in
controller answering GET /score by the contract of docs/routing.md from
holdings a test sets. Chunk keys come from the pikv binding, as the
router's do."""

import asyncio
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import pytest

_pikv = pytest.importorskip("pikv._pikv")
import pikv  # noqa: E402
from pikv.prompt import DEFAULT_SETTINGS, chunk_keys, read_salt_key, salt_scope  # noqa: E402

# A model just big enough to key chunks by (keys depend on it, not on weights).
SETTINGS = {"model-id": "router-test", "num-layers": "1", "num-kv-heads": "1", "head-dim": "8"}
PYTHONPATH = os.path.dirname(os.path.dirname(os.path.abspath(pikv.__file__)))


def key_client(mode="prefixed"):
    """A client keying chunks as the router does: its defaults, in `mode`."""
    options = _pikv.Options.load("", dict(SETTINGS, **{"local-node": "", "controller": ""}),
                                 dict(DEFAULT_SETTINGS, **{"attention-mode": mode}))
    return _pikv.Client(options)


def fake_tokens(text):
    """The stand-ins' tokenizer: a token per word, numbers as themselves."""
    return [int(w) if w.isdigit() else 1000 + sum(w.encode()) % 1000 for w in text.split()]


def chat_text(messages):
    """The stand-ins' chat template."""
    return " ".join(f"<{m['role']}> {m['content']}" for m in messages) + " <assistant>"


# --- the stand-ins ---------------------------------------------------------------


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    return method, target, headers, body


class FakeVllm:
    """A stand-in vLLM OpenAI server; `got`: (path, JSON body) of each
    completion, `sent`: the bytes of each completion's response."""

    def __init__(self, name):
        self.name = name
        self.got, self.sent, self.tokenized = [], [], []
        self.writers = set()

    async def start(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def kill(self):
        """As a killed process: the port refuses, open connections drop."""
        self.server.close()
        for w in list(self.writers):
            w.transport.abort()

    async def serve(self, reader, writer):
        self.writers.add(writer)
        try:
            while True:
                method, target, headers, body = await read_request(reader)
                await self.answer(target, json.loads(body) if body else None, writer)
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.writers.discard(writer)
            writer.close()

    async def answer(self, path, body, writer):
        if path == "/health":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        elif path == "/tokenize":
            self.tokenized.append(body)
            text = chat_text(body["messages"]) if "messages" in body else body["prompt"]
            tokens = fake_tokens(text)
            out = json.dumps({"count": len(tokens), "max_model_len": 4096, "tokens": tokens})
            writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         f"content-length: {len(out)}\r\n\r\n{out}".encode())
        elif path in ("/v1/completions", "/v1/chat/completions"):
            self.got.append((path, body))
            if body.get("stream"):
                await self.stream(body, writer)
            else:
                out = json.dumps({"id": f"cmpl-{self.name}-{len(self.got)}",
                                  "object": "text_completion", "backend": self.name,
                                  "choices": [{"text": " Ünïcode  answer\n", "index": 0}]},
                                 ensure_ascii=False).encode()
                data = (b"HTTP/1.1 200 OK\r\ndate: Sun, 29 Nov 2026 00:00:00 GMT\r\n"
                        b"X-Odd-Header:   spaced  \r\ncontent-type: application/json\r\n" +
                        f"content-length: {len(out)}\r\n\r\n".encode() + out)
                self.sent.append(data)
                writer.write(data)
        else:
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()

    async def stream(self, body, writer):
        """SSE over chunked transfer encoding; an event split across two
        chunks. As vLLM's, the head goes out at once, the first event after
        prefill (x_prefill seconds), the next ones x_delay apart."""
        sent = bytearray(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
        writer.write(bytes(sent))
        await writer.drain()
        await asyncio.sleep(body.get("x_prefill", 0))
        events = [f'data: {{"id":"{self.name}-{len(self.got)}","choices":[{{"text":"t{i} "}}]}}'
                  "\n\n" for i in range(body.get("x_events", 4))] + ["data: [DONE]\n\n"]
        pieces = []
        for e in events:
            pieces += [e[:7], e[7:]] if len(pieces) == 2 else [e]
        for p in pieces:
            chunk = f"{len(p.encode()):x}\r\n".encode() + p.encode() + b"\r\n"
            sent += chunk
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(body.get("x_delay", 0))
        sent += b"0\r\n\r\n"
        writer.write(b"0\r\n\r\n")
        self.sent.append(bytes(sent))


class FakeController:
    """GET /score from `holdings` (node -> {key: "cpu" | "disk"}) and
    `remote` (keys in the shared tier); `queries`: each query's params.
    `hang`: accept and never answer."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.holdings = {n: {} for n in nodes}
        self.remote = set()
        self.queries = []
        self.hang = False

    async def start(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def serve(self, reader, writer):
        try:
            _, target, _, _ = await read_request(reader)
            if self.hang:
                await asyncio.sleep(30)
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
            self.queries.append(query)
            out = json.dumps(self.score(query)).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" +
                         f"content-length: {len(out)}\r\n\r\n".encode() + out)
            await writer.drain()
        finally:
            writer.close()

    def score(self, query):
        keys = query["key"][0].split(",")
        tokens = [int(t) for t in query["tokens"][0].split(",")]
        nodes = query["node"][0].split(",") if "node" in query else self.nodes
        out = []
        for node in nodes:
            held = self.holdings[node]
            counts = dict.fromkeys(("cpu", "disk", "remote", "peer", "missing"), 0)
            prefix, in_prefix = 0, True
            for key, n in zip(keys, tokens):
                if key in held:
                    tier = held[key]
                elif key in self.remote:
                    tier = "remote"
                elif any(key in self.holdings[o] for o in self.nodes if o != node):
                    tier = "peer"
                else:
                    tier = "missing"
                counts[tier] += n
                in_prefix = in_prefix and key in held
                prefix += n if in_prefix else 0
            out.append({"id": node, "state": "alive", "host": "h", "tokens": counts,
                        "prefix_tokens": prefix, "load": {"requests_per_second": 0}})
        return {"keys": len(keys), "tokens": sum(tokens), "registry_filling": False,
                "nodes": out}


# --- fixtures and helpers ----------------------------------------------------------


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop

    async def cancel_the_rest():  # connections the stand-ins still serve
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(cancel_the_rest(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


class World:
    """Two stand-in servers (a on node-a, b on node-b), a controller, and
    the routers a test starts."""

    def __init__(self, loop):
        self.loop = loop
        self.a, self.b = FakeVllm("a"), FakeVllm("b")
        self.controller = FakeController(["node-a", "node-b"])
        for s in (self.a, self.b, self.controller):
            self.run(s.start())
        self.routers = []

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def call(self, fn):
        self.loop.call_soon_threadsafe(fn)

    def router(self, mode="chunks", controller=None, *extra):
        """Starts `python -m pikv.router`; its port once it says it is ready."""
        cmd = [sys.executable, "-m", "pikv.router", "--listen", "127.0.0.1:0", "--mode", mode,
               "--backend", f"{self.a.url}=node-a", "--backend", f"{self.b.url}=node-b",
               "--controller-http", f"127.0.0.1:{controller or self.controller.port}",
               "--health-interval", "60", *extra]
        cmd += [f"--client-setting={k}={v}" for k, v in SETTINGS.items()]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [PYTHONPATH, os.environ.get("PYTHONPATH", "")]))
        log = tempfile.TemporaryFile("w+")  # not a pipe: nobody reads it while it runs
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env, text=True)
        self.routers.append(p)
        ready, _, _ = select.select([p.stdout], [], [], 15)
        line = p.stdout.readline() if ready else ""
        if not line.startswith("pikv-router ready "):
            p.kill()
            log.seek(0)
            pytest.fail(f"the router did not start: {line!r} {log.read()}")
        return int(line.split(":")[-1])

    def stop(self):
        for p in self.routers:
            p.kill()
            p.wait()
        for s in (self.a, self.b):
            self.call(s.kill)
        self.call(self.controller.server.close)


@pytest.fixture
def world(loop):
    w = World(loop)
    yield w
    w.stop()


def http(port, method, path, payload=None, timeout=10):
    """The raw response bytes, read to the end (Connection: close)."""
    body = json.dumps(payload).encode() if payload is not None else b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                  f"Content-Type: application/json\r\nConnection: close\r\n\r\n".encode() + body)
        out = bytearray()
        while piece := s.recv(65536):
            out += piece
    return bytes(out)


def status_of(raw):
    return int(raw.split(b" ", 2)[1])


def stats(port):
    raw = http(port, "GET", "/router/stats")
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


# A RAG prompt as token ids: system, three documents, question.
SYSTEM, DOC1, DOC2, DOC3, QUESTION = ([base + i for i in range(n)] for base, n in
                                      ((10, 10), (100, 20), (200, 100), (300, 100), (400, 10)))


def completion(segments, **extra):
    return dict({"model": "m", "prompt": sum(segments, []), "max_tokens": 4,
                 "kv_transfer_params": {"pikv_segments": [len(s) for s in segments]}}, **extra)


def keys_of(segments):
    return chunk_keys(key_client(), segments)


def hold(world, node, segments, chunks, tier="cpu"):
    """Node `node` holds the prompt's chunks of these indices (0: the system
    prompt) in `tier`."""
    keys = keys_of(segments)
    world.controller.holdings[node].update({keys[i]: tier for i in chunks})


# --- tests ---------------------------------------------------------------------------


def test_help_runs():
    out = subprocess.run([sys.executable, "-m", "pikv.router", "--help"], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=PYTHONPATH), timeout=30)
    assert out.returncode == 0 and "--decode-weight" in out.stdout, out.stderr


@pytest.mark.parametrize("mode", ["prefixed", "isolated"])
def test_keys_are_the_planners(mode):
    """The router's keys are the ones the client's planner (what the
    connector loads and stores by) gives the same segments."""
    client = key_client(mode)
    segments = [SYSTEM, DOC1, DOC2, QUESTION]
    planned = [c.key for c in client.plan(segments).chunks]
    assert chunk_keys(client, segments) == planned
    assert len(planned) == 3  # the system prompt and the documents, not the question


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize("stream", [False, True])
def test_responses_pass_through_byte_for_byte(world, path, stream):
    port = world.router("chunks")
    if path == "/v1/chat/completions":
        body = {"model": "m", "messages": [{"role": "user", "content": "hi there"}]}
    else:
        body = {"model": "m", "prompt": "hi there"}
    body["stream"] = stream
    raw = http(port, "POST", path, body)
    backend = world.a if world.a.got else world.b
    assert backend.got == [(path, body)]
    assert raw == backend.sent[0]
    assert raw.endswith(b"0\r\n\r\n" if stream else b'"index": 0}]}')


@pytest.mark.parametrize("chat", [False, True])
def test_routes_to_the_node_holding_the_chunks(world, chat):
    """The same prompt goes to b while node-b holds its chunks, to a once
    node-a holds them (b then a peer); chat prompts are tokenized with their
    messages by a backend first."""
    port = world.router("chunks")
    if chat:
        messages = [{"role": "system", "content": "be brief"},
                    {"role": "user", "content": "document one two three"}]
        tokens = fake_tokens(chat_text(messages))
        segments = [tokens[:3], tokens[3:7], tokens[7:]]  # the last: "three <assistant>"
        body = {"model": "m", "messages": messages,
                "kv_transfer_params": {"pikv_segments": [3, 4, 2]}}
        path = "/v1/chat/completions"
    else:
        segments = [SYSTEM, DOC1, DOC2, QUESTION]
        body, path = completion(segments), "/v1/completions"
    hold(world, "node-b", segments, range(len(segments) - 1))
    for _ in range(2):
        assert status_of(http(port, "POST", path, body)) == 200
    assert len(world.b.got) == 2 and not world.a.got
    query = world.controller.queries[-1]
    assert query["key"] == [",".join(keys_of(segments))]
    assert query["tokens"] == [",".join(str(len(s)) for s in segments[:-1])]
    assert set(query["node"][0].split(",")) == {"node-a", "node-b"}
    if chat:
        assert world.a.tokenized + world.b.tokenized == [
            {"messages": messages, "model": "m"}] * 2
    world.controller.holdings = {"node-a": world.controller.holdings["node-b"], "node-b": {}}
    assert status_of(http(port, "POST", path, body)) == 200
    assert len(world.a.got) == 1


def test_salted_requests_are_scored_in_their_salts_scope(world, tmp_path):
    """A salted request's chunks are keyed in its salt's scope, as the
    engines key them under the same salt key; without the key the router
    cannot name them and routes the request by load."""
    key_file = tmp_path / "salt.key"
    key_file.write_bytes(b"the engines' salt key")
    segments = [SYSTEM, DOC1, DOC2, QUESTION]
    scope = salt_scope("user-7", read_salt_key(str(key_file)))
    salted = chunk_keys(key_client(), segments, scope)
    assert salted != keys_of(segments)
    port = world.router("chunks", None, "--salt-key-file", str(key_file))
    assert status_of(http(port, "POST", "/v1/completions",
                          completion(segments, cache_salt="user-7"))) == 200
    assert world.controller.queries[-1]["key"] == [",".join(salted)]
    unkeyed = world.router("chunks")
    asked = len(world.controller.queries)
    assert status_of(http(unkeyed, "POST", "/v1/completions",
                          completion(segments, cache_salt="user-7"))) == 200
    assert len(world.controller.queries) == asked, "no key: the salt's chunks cannot be named"
    assert stats(unkeyed)["unscoped_salts"] == 1


def test_prefix_mode_differs_from_chunks_mode(world):
    """node-a holds the system prompt and the small first document (the
    prefix); node-b the two big documents after it. Chunks mode counts
    node-b's credit; prefix mode sees only node-a's prefix."""
    segments = [SYSTEM, DOC1, DOC2, DOC3, QUESTION]
    hold(world, "node-a", segments, [0, 1])
    hold(world, "node-b", segments, [2, 3])
    body = completion(segments)
    chunks, prefix = world.router("chunks"), world.router("prefix")
    assert status_of(http(chunks, "POST", "/v1/completions", body)) == 200
    assert len(world.b.got) == 1 and not world.a.got
    assert status_of(http(prefix, "POST", "/v1/completions", body)) == 200
    assert len(world.a.got) == 1


def test_credit_settings_change_the_choice(world):
    """Disk on node-b against cpu on node-a for a smaller share: with disk
    credit 1.0 node-b wins, with 0.0 node-a."""
    segments = [SYSTEM, DOC1, DOC2, QUESTION]
    hold(world, "node-a", segments, [0, 1], "cpu")
    hold(world, "node-b", segments, [0, 1, 2], "disk")
    body = completion(segments)
    full = world.router("chunks", None, "--credit", "disk=1.0")
    none = world.router("chunks", None, "--credit", "disk=0,peer=0")
    assert status_of(http(full, "POST", "/v1/completions", body)) == 200
    assert [len(world.a.got), len(world.b.got)] == [0, 1]
    assert status_of(http(none, "POST", "/v1/completions", body)) == 200
    assert [len(world.a.got), len(world.b.got)] == [1, 1]


@pytest.mark.parametrize("load", ["prefill", "running"])
def test_load_counts_against_a_backend(world, load):
    """node-a holds the chunks, which spares 6 tokens of compute there. A
    second request while the first is in prefill on a (no response body
    yet: its 10 pending tokens count, decode weight 0) or decoding there (a
    running request weighs 64) goes to b. The third goes to a again: at
    decode weight 0 as soon as a's first event is out, else once the first
    request has ended."""
    segments = [SYSTEM, DOC1, QUESTION]
    hold(world, "node-a", segments, [0, 1])
    if load == "prefill":
        port = world.router("chunks", None, "--decode-weight", "0")
        slow = completion(segments, stream=True, x_prefill=0.8, x_delay=0.8, x_events=2)
    else:
        port = world.router("chunks")
        slow = completion(segments, stream=True, x_delay=0.8, x_events=2)
    first = threading.Thread(target=http, args=(port, "POST", "/v1/completions", slow))
    started = time.monotonic()
    first.start()
    time.sleep(0.3)
    assert status_of(http(port, "POST", "/v1/completions", completion(segments))) == 200
    assert [len(world.a.got), len(world.b.got)] == [1, 1]
    if load == "prefill":
        time.sleep(started + 1.2 - time.monotonic())  # a is decoding now
        assert first.is_alive()
    else:
        first.join()
    assert status_of(http(port, "POST", "/v1/completions", completion(segments))) == 200
    assert [len(world.a.got), len(world.b.got)] == [2, 1]
    first.join()


def test_round_robin_alternates(world):
    port = world.router("round-robin")
    segments = [SYSTEM, DOC1, QUESTION]
    hold(world, "node-b", segments, [0, 1])  # ignored in this mode
    for _ in range(4):
        assert status_of(http(port, "POST", "/v1/completions", completion(segments))) == 200
    assert [len(world.a.got), len(world.b.got)] == [2, 2]
    assert not world.controller.queries


def test_request_to_a_dead_backend_is_retried(world):
    """a dies unseen (no health check for 60 s): the request sent to it is
    retried on b, a is marked down and skipped after."""
    port = world.router("round-robin")
    body = completion([SYSTEM, DOC1, QUESTION])
    assert status_of(http(port, "POST", "/v1/completions", body)) == 200
    first = world.a if world.a.got else world.b
    other = world.b if first is world.a else world.a
    world.call(first.kill)
    time.sleep(0.1)
    for _ in range(3):
        assert status_of(http(port, "POST", "/v1/completions", body)) == 200
    assert len(other.got) == 3
    s = stats(port)
    assert s["retries"] == 1
    assert [b["healthy"] for b in s["backends"] if b["url"] == first.url] == [False]


def test_backend_killed_mid_stream(world):
    """node-a holds the chunks, a streams slowly and is killed mid-stream:
    that client's connection closes early; every later request succeeds on
    b though the controller still ranks node-a first."""
    port = world.router("chunks")
    segments = [SYSTEM, DOC1, DOC2, QUESTION]
    hold(world, "node-a", segments, [0, 1, 2])
    body = completion(segments, stream=True, x_delay=0.2, x_events=20)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        data = json.dumps(body).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                  f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        got = s.recv(65536)
        while b"data:" not in got:
            got += s.recv(65536)
        world.call(world.a.kill)
        while piece := s.recv(65536):
            got += piece
    assert got.startswith(b"HTTP/1.1 200 OK") and not got.endswith(b"0\r\n\r\n")
    plain = completion(segments)
    for i in range(6):
        raw = http(port, "POST", "/v1/completions", dict(plain, max_tokens=i + 1))
        assert status_of(raw) == 200 and raw == world.b.sent[-1]
    assert len(world.b.got) == 6 and len(world.a.got) == 1
    s = stats(port)
    assert s["broken_streams"] == 1 and s["retries"] == 0  # a was known dead: none sent there


@pytest.mark.parametrize("how", ["refused", "hung"])
def test_controller_down_requests_still_served(world, how):
    if how == "hung":
        world.controller.hang = True
        controller = world.controller.port
    else:
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            controller = s.getsockname()[1]
    port = world.router("chunks", controller)
    body = completion([SYSTEM, DOC1, QUESTION])
    started = time.monotonic()
    for _ in range(4):
        assert status_of(http(port, "POST", "/v1/completions", body)) == 200
    assert time.monotonic() - started < 3  # 200 ms score timeout each
    assert [len(world.a.got), len(world.b.got)] == [2, 2]  # least-loaded: in turn
    assert stats(port)["score_fallbacks"] == 4


def test_other_paths_go_to_a_healthy_backend(world):
    port = world.router("chunks")
    assert status_of(http(port, "GET", "/health")) == 200
    assert status_of(http(port, "GET", "/v1/models")) == 404  # the stand-ins have none


@pytest.mark.parametrize("params", [
    {"pikv_segments": [3]},  # too few
    {"pikv_segments": [1, 1]},  # do not cover the prompt
    {"pikv_segments": "3,3"},
])
def test_requests_that_cannot_be_scored_are_still_served(world, params):
    port = world.router("chunks")
    body = {"model": "m", "prompt": [1, 2, 3], "kv_transfer_params": params}
    assert status_of(http(port, "POST", "/v1/completions", body)) == 200
    # Token ids the binding refuses (past int32): not scored, still served.
    body = {"model": "m", "prompt": [2**40, 2], "kv_transfer_params": {"pikv_segments": [1, 1]}}
    assert status_of(http(port, "POST", "/v1/completions", body)) == 200
    assert stats(port)["score_fallbacks"] == 1 and not world.controller.queries


def test_a_kept_alive_connection_carries_several_requests(world):
    """A streamed response, then another request on the same connection:
    the router ends each response where its framing does (the stand-ins
    keep their connections open too)."""
    port = world.router("round-robin")
    stream = json.dumps({"model": "m", "prompt": "hi", "stream": True}).encode()
    plain = json.dumps({"model": "m", "prompt": "hi"}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" +
                  f"Content-Length: {len(stream)}\r\n\r\n".encode() + stream)
        got = b""
        while not got.endswith(b"0\r\n\r\n"):
            got += s.recv(65536)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                  f"Content-Length: {len(plain)}\r\n\r\n".encode() + plain)
        second = b""
        while piece := s.recv(65536):
            second += piece
    assert sorted([got, second]) == sorted(world.a.sent + world.b.sent)
