"""pikv route: an OpenAI-compatible HTTP router in front of several vLLM
servers, each attached to its pikv node, that sends each request where its
prompt's chunks are cheapest to have.

    python -m pikv.router --listen 0.0.0.0:8100 \\
        --backend http://gpu1:8000=node1 --backend http://gpu2:8000=node2 \\
        --controller-http controller:7380 --client-settings client.yaml

POST /v1/completions and /v1/chat/completions are routed; every other path
(GET /v1/models, /health, /tokenize, ...) goes to a healthy backend in turn;
GET /router/stats answers the router's own counters as JSON. Requests and
responses pass through unchanged, byte for byte (status line, headers as
sent, chunked and SSE bodies as they arrive): the router reads only the
request's JSON body and the response's framing.

How a backend is chosen (docs/routing.md, "How pikv route chooses"). The
prompt is split as the connector splits it (pikv.prompt.split_segments:
kv_transfer_params {"pikv_segments": [...]} or the --separator token ids)
into [system, chunk..., question], over the token ids the backends' own
tokenizer gives (vLLM's POST /tokenize; chat requests with their messages,
so the chat template applies; a prompt of token ids is used as is). Every
segment but the question is a chunk the connector loads and stores, the
system prompt included; its key is computed by the pikv client with the
engines' client settings (model, dtype, reuse mode, tenant), its weight is
its length in tokens. The controller's GET /score says, per node, how
many of those tokens it holds in cpu, on disk, in the shared remote tier,
on a peer, or nowhere (missing). For backend n:

    expected_compute(n) = sum over tier of (1 - credit[tier]) * t_tier(n)
                          + t_missing(n) + question_tokens
    cost(n) = pending_prefill(n) + expected_compute(n)
              + decode_weight * running(n)

pending_prefill(n): the expected_compute of the requests sent to n that
have no response body byte yet (vLLM sends the headers before prefill
ends; the first body byte comes after it); running(n): requests in flight
on n. The lowest cost wins; ties go to fewer in flight, then round-robin
order. Credit is the share of a chunk's prefill a tier saves (cpu=1.0,
disk=0.9, peer=0.8, remote=0.7 by default, --credit), decode_weight what
one running request costs a new one, in prefill tokens (--decode-weight).
`--mode prefix`: expected_compute(n) = total_tokens - prefix_tokens(n)
(what a prefix cache bound to its node would spare), with the same load
terms; `--mode round-robin`: healthy backends in turn. A request that is
not chunked, or whose score cannot be had (the controller down, slow past
--score-timeout, /tokenize failing), is scored as all missing: the
least-loaded backend wins (counted as a fallback); a request never fails
because the controller or a tokenizer does.

Health: each backend's GET /health every --health-interval; a backend that
fails it, or refuses a connection, is skipped until it answers again. A
request whose backend fails before any response byte reached the client is
retried once on the next best backend; once bytes were passed on, the
client's connection is closed (nothing can be retried).

One asyncio loop, one thread: the counters need no lock. Standard library
only, and the pikv binding for the chunk keys (not needed in round-robin
mode).
"""

import argparse
import asyncio
import json
import logging
import sys
import urllib.parse
from dataclasses import dataclass, field

from pikv.prompt import (DEFAULT_SETTINGS, NotChunked, chunk_keys, read_salt_key, salt_scope,
                         split_segments)

log = logging.getLogger("pikv.router")

ROUTED_PATHS = ("/v1/completions", "/v1/chat/completions")
STATS_PATH = "/router/stats"
MODES = ("chunks", "prefix", "round-robin")
TIERS = ("cpu", "disk", "peer", "remote")
DEFAULT_CREDIT = {"cpu": 1.0, "disk": 0.9, "peer": 0.8, "remote": 0.7}
# Chunks scored per /score query: their keys and counts (~38 bytes each)
# keep the query inside the controller's 8 KiB HTTP request head.
MAX_SCORE_KEYS = 160
MAX_HEAD = 64 << 10  # a request's or response's start line and headers
MAX_BODY = 64 << 20  # a request body the router reads
COPY_BYTES = 64 << 10
BYTES_PER_TOKEN = 4  # a prompt not tokenized weighs its body's bytes / this
# Fields of a chat request that change its tokens (vLLM's TokenizeChatRequest).
CHAT_TOKENIZE_FIELDS = ("add_generation_prompt", "continue_final_message", "add_special_tokens",
                        "chat_template", "chat_template_kwargs", "tools")


class HttpError(Exception):
    """A malformed or oversized HTTP message."""


class BackendFailed(Exception):
    """The backend failed; `sent` says whether bytes of its response had
    already reached the client (then nothing may be retried)."""

    def __init__(self, why, sent):
        super().__init__(why)
        self.sent = sent


class ClientGone(Exception):
    """The client stopped reading: not the backend's fault."""


# --- HTTP/1.1 framing -----------------------------------------------------------


@dataclass
class Head:
    """A request's or response's head: its bytes as received (forwarded
    unchanged) and, parsed, the start line's parts and the headers."""
    raw: bytes
    start: list
    headers: dict  # lower-case name -> value (the last one)

    def get(self, name, default=""):
        return self.headers.get(name, default)


async def read_head(reader):
    """The next head on `reader`; None at a clean end of stream before it."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise HttpError("the stream ended inside a head") from e
    except asyncio.LimitOverrunError as e:
        raise HttpError("head too large") from e
    lines = raw[:-4].decode("latin-1").split("\r\n")
    start = lines[0].split(" ", 2)
    if len(start) < 2:
        raise HttpError(f"bad start line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(f"bad header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    return Head(raw, start, headers)


def body_framing(head, request_method=None):
    """How the body after `head` ends: ("chunked", 0), ("length", n),
    ("close", 0) (a response read to the end of the stream) or ("none", 0).
    `request_method`: the request's, when `head` is a response."""
    if request_method is not None:
        status = int(head.start[1])
        if request_method == "HEAD" or status < 200 or status in (204, 304):
            return "none", 0
    if "chunked" in head.get("transfer-encoding").lower():
        return "chunked", 0
    if head.get("content-length"):
        n = int(head.get("content-length"))
        if n < 0:
            raise HttpError("negative content-length")
        return ("length", n) if n else ("none", 0)
    return ("close", 0) if request_method is not None else ("none", 0)


async def copy_body(reader, framing, raw_sink, data_sink=None, limit=None):
    """Reads one body off `reader` by its framing and hands every piece,
    as read, to `raw_sink` (async; the bytes on the wire, chunk sizes
    included) and its payload to `data_sink` (sync, optional). The pieces
    go on as they arrive: an SSE event is forwarded when it comes, not at
    the end of the response."""
    kind, n = framing
    seen = 0

    async def take(count):  # `count` bytes, or to the end of the stream when None
        nonlocal seen
        while count is None or count > 0:
            piece = await reader.read(COPY_BYTES if count is None else min(COPY_BYTES, count))
            if not piece:
                if count is None:
                    return
                raise asyncio.IncompleteReadError(piece, count)
            seen += len(piece)
            if limit is not None and seen > limit:
                raise HttpError("body too large")
            await raw_sink(piece)
            if count is not None:
                count -= len(piece)
            yield piece

    data_sink = data_sink or (lambda piece: None)
    if kind == "length":
        async for piece in take(n):
            data_sink(piece)
    elif kind == "close":
        async for piece in take(None):
            data_sink(piece)
    elif kind == "chunked":
        while True:
            line = await reader.readuntil(b"\r\n")
            await raw_sink(line)
            size = int(line.split(b";")[0].strip() or b"x", 16)
            if size == 0:
                break
            async for piece in take(size):
                data_sink(piece)
            async for _ in take(2):  # the CRLF after the chunk
                pass
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
            await raw_sink(line)
        await raw_sink(line)


async def read_request_body(reader, head):
    """The request body: (bytes as received, payload)."""
    raw, data = bytearray(), bytearray()

    async def keep(piece):
        raw.extend(piece)

    await copy_body(reader, body_framing(head), keep, data.extend, limit=MAX_BODY)
    return bytes(raw), bytes(data)


def parse_hostport(text):
    """(host, port) of "host:port" or of an http:// URL."""
    if "//" in text:
        url = urllib.parse.urlsplit(text)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"{text!r}: an http://host:port URL")
        return url.hostname, url.port or 80
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{text!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


async def fetch_json(hostport, method, target, payload=None, timeout=1.0):
    """(status, decoded JSON or None) of one small call (a /score, a
    /tokenize, a /health): its own connection, closed after it; raises on
    a refused connection or past `timeout`."""
    async def call():
        reader, writer = await asyncio.open_connection(*hostport, limit=MAX_HEAD)
        try:
            body = json.dumps(payload).encode() if payload is not None else b""
            head = (f"{method} {target} HTTP/1.1\r\nHost: {hostport[0]}:{hostport[1]}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n")
            if payload is not None:
                head += "Content-Type: application/json\r\n"
            writer.write(head.encode() + b"\r\n" + body)
            await writer.drain()
            reply = await read_head(reader)
            if reply is None:
                raise ConnectionError("no reply")
            data = bytearray()

            async def ignore(piece):
                pass

            await copy_body(reader, body_framing(reply, method), ignore, data.extend,
                            limit=MAX_BODY)
            try:
                return int(reply.start[1]), json.loads(data) if data else None
            except ValueError:
                return int(reply.start[1]), None
        finally:
            writer.close()

    return await asyncio.wait_for(call(), timeout)


def reply_bytes(status, reason, payload):
    """A small JSON response of the router's own."""
    body = json.dumps(payload, indent=1).encode() + b"\n"
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


# --- what a request costs where ------------------------------------------------


@dataclass
class Backend:
    """A vLLM server and the pikv node it is attached to."""
    url: str
    node: str
    hostport: tuple
    healthy: bool = True
    in_flight: int = 0  # running(n)
    pending_prefill: float = 0.0  # pending_prefill(n), in tokens
    requests: int = 0  # attempts sent here, retries included
    failures: int = 0  # refused, died, or failed a health check

    def stats(self):
        return {"url": self.url, "node": self.node, "healthy": self.healthy,
                "requests": self.requests, "in_flight": self.in_flight,
                "pending_prefill": self.pending_prefill, "failures": self.failures}


@dataclass
class PromptScore:
    """What routing knows of a request's prompt (token counts; None where
    unknown) and, in chunks and prefix modes, the controller's answer."""
    total_tokens: float
    question_tokens: float = 0
    keys: list = field(default_factory=list)
    key_tokens: list = field(default_factory=list)
    nodes: dict = None  # node id -> /score's entry; None: no score (all missing)


def expected_compute(mode, prompt, node, credit):
    """The prompt tokens backend's node `node` would compute (see the module
    docstring): with no score, or a node the score does not list, all of
    them."""
    entry = (prompt.nodes or {}).get(node)
    if entry is None:
        return prompt.total_tokens
    if mode == "prefix":
        return max(0.0, prompt.total_tokens - entry.get("prefix_tokens", 0))
    tokens = entry.get("tokens", {})
    # Chunks past MAX_SCORE_KEYS were not scored: missing on every node.
    unscored = sum(prompt.key_tokens[MAX_SCORE_KEYS:])
    return (sum((1.0 - credit[t]) * tokens.get(t, 0) for t in TIERS) +
            tokens.get("missing", 0) + unscored + prompt.question_tokens)


def cost(backend, compute, decode_weight):
    """cost(n) = pending_prefill(n) + expected_compute(n) + decode_weight * running(n)."""
    return backend.pending_prefill + compute + decode_weight * backend.in_flight


def parse_credit(text):
    """--credit cpu=1.0,disk=0.9,...: each tier's share of a chunk's prefill
    it saves; tiers not named keep their default."""
    credit = dict(DEFAULT_CREDIT)
    for part in filter(None, (p.strip() for p in text.split(","))):
        tier, sep, value = part.partition("=")
        if tier not in credit or not sep:
            raise ValueError(f"--credit: {part!r} is not tier=value, tier one of {TIERS}")
        credit[tier] = float(value)
        if not 0.0 <= credit[tier] <= 1.0:
            raise ValueError(f"--credit: {tier} must be within 0..1")
    return credit


def key_client(settings_file, settings, tenant):
    """A pikv client that only names chunks (dials nothing): the engines'
    client settings, so its keys are theirs (model-id as vLLM's --model,
    model-config, dtype, max-model-len, attention-mode, tenant)."""
    from pikv import _pikv
    settings = dict(settings, **{"local-node": "", "controller": ""})
    if tenant:
        settings["tenant"] = tenant
    options = _pikv.Options.load(settings_file, settings, DEFAULT_SETTINGS)
    if options.num_layers == 0:
        raise ValueError("chunk keys need the engines' model: --client-setting "
                         "model-config=config.json (and model-id, dtype as the engines') or "
                         "--client-settings FILE")
    return _pikv.Client(options)


# --- the router ------------------------------------------------------------------


@dataclass
class Settings:
    listen: tuple
    backends: list  # (url, node id)
    controller: tuple = None
    mode: str = "chunks"
    credit: dict = field(default_factory=lambda: dict(DEFAULT_CREDIT))
    decode_weight: float = 64.0
    health_interval: float = 2.0
    score_timeout: float = 0.2
    tokenize_timeout: float = 0.5
    connect_timeout: float = 1.0
    tenant: str = ""
    separator: list = None
    salt_key: bytes = None  # the engines' salt-key-file: salted requests' chunk scopes


class Router:
    def __init__(self, settings, keys=None):
        self.s = settings
        self.keys = keys  # a pikv client naming chunks (chunks and prefix modes)
        self.backends = [Backend(url, node, parse_hostport(url)) for url, node in settings.backends]
        self.turn = 0  # round-robin position
        self.counters = {"requests": 0, "routed": 0, "retries": 0, "score_fallbacks": 0,
                         "tokenize_failures": 0, "unchunked": 0, "no_backend": 0,
                         "broken_streams": 0, "unscoped_salts": 0}

    # --- choosing ---------------------------------------------------------------

    def rotation(self):
        """Every backend, healthy first, in round-robin order from this turn."""
        n = len(self.backends)
        start, self.turn = self.turn, self.turn + 1
        turned = [self.backends[(start + i) % n] for i in range(n)]
        return [b for b in turned if b.healthy] + [b for b in turned if not b.healthy]

    async def score_prompt(self, path, payload, body_bytes, tokenizer):
        """The request's PromptScore: tokens (from `tokenizer`, a backend),
        chunk keys, and the controller's /score for the healthy backends'
        nodes."""
        prompt = PromptScore(total_tokens=len(body_bytes) / BYTES_PER_TOKEN)
        if not isinstance(payload, dict):
            return prompt
        params = payload.get("kv_transfer_params")
        lengths = params.get("pikv_segments") if isinstance(params, dict) else None
        if lengths is None and not self.s.separator:
            self.counters["unchunked"] += 1
            return prompt
        # A salted request's chunks are in its salt's scope, as the engines key them.
        scope = salt_scope(payload.get("cache_salt"), self.s.salt_key)
        if scope is None:
            self.counters["unscoped_salts"] += 1
            return prompt
        tokens = await self.prompt_tokens(path, payload, tokenizer)
        if tokens is None:
            return prompt
        prompt.total_tokens = len(tokens)
        try:
            segments = split_segments(tokens, self.s.separator, lengths)
        except NotChunked:
            segments = None
        if not segments:
            self.counters["unchunked"] += 1
            return prompt
        prompt.question_tokens = len(segments[-1])
        prompt.keys = chunk_keys(self.keys, segments, scope)
        prompt.key_tokens = [len(s) for s in segments[:-1]]
        prompt.nodes = await self.score(prompt)
        return prompt

    async def prompt_tokens(self, path, payload, backend):
        """The prompt's token ids: as given, or from `backend`'s POST
        /tokenize (chat: its messages, so the chat template applies); None
        for a batch of prompts or when no tokenizer answers in time."""
        if path == "/v1/chat/completions":
            if not isinstance(payload.get("messages"), list):
                return None
            ask = {"messages": payload["messages"]}
            ask.update({k: payload[k] for k in CHAT_TOKENIZE_FIELDS if k in payload})
        else:
            prompt = payload.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if isinstance(prompt, list) and all(type(t) is int for t in prompt):
                return prompt
            if not isinstance(prompt, str):
                return None
            ask = {"prompt": prompt, "add_special_tokens": payload.get("add_special_tokens", True)}
        if "model" in payload:
            ask["model"] = payload["model"]
        try:
            status, reply = await fetch_json(backend.hostport, "POST", "/tokenize", ask,
                                             self.s.tokenize_timeout)
            if status == 200 and isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
                return reply["tokens"]
            log.warning("pikv-router: %s /tokenize answered %s", backend.url, status)
        except (OSError, asyncio.TimeoutError, HttpError, ValueError) as e:
            log.warning("pikv-router: %s /tokenize failed: %r", backend.url, e)
        self.counters["tokenize_failures"] += 1
        return None

    async def score(self, prompt):
        """/score's nodes by id, or None (counted) when the controller does
        not answer 200 within --score-timeout."""
        nodes = sorted({b.node for b in self.backends if b.healthy})
        query = {"key": ",".join(prompt.keys[:MAX_SCORE_KEYS]),
                 "tokens": ",".join(str(n) for n in prompt.key_tokens[:MAX_SCORE_KEYS])}
        if nodes:
            query["node"] = ",".join(nodes)
        if self.s.tenant:
            query["tenant"] = self.s.tenant
        target = "/score?" + urllib.parse.urlencode(query, safe=",")
        try:
            if self.s.controller is None:
                raise ConnectionError("no --controller-http")
            status, reply = await fetch_json(self.s.controller, "GET", target,
                                             timeout=self.s.score_timeout)
            if status == 200 and isinstance(reply, dict):
                return {n["id"]: n for n in reply.get("nodes", []) if isinstance(n, dict)}
            log.warning("pikv-router: /score answered %s %s", status, reply)
        except (OSError, asyncio.TimeoutError, HttpError, ValueError, KeyError) as e:
            log.debug("pikv-router: /score failed: %r", e)
        self.counters["score_fallbacks"] += 1
        return None

    async def choose(self, path, payload, body_bytes):
        """[(backend, expected_compute)], best first: healthy backends by
        cost (ties: fewer in flight, then round-robin order), then the
        others (a stale mark should not fail a request when all are down)."""
        order = self.rotation()
        if self.s.mode == "round-robin":
            compute = len(body_bytes) / BYTES_PER_TOKEN
            return [(b, compute) for b in order]
        try:
            prompt = await self.score_prompt(path, payload, body_bytes, order[0])
            computes = [expected_compute(self.s.mode, prompt, b.node, self.s.credit)
                        for b in order]
        except Exception as e:  # whatever a request or a reply holds: route by load
            log.warning("pikv-router: not scored: %r", e)
            self.counters["score_fallbacks"] += 1
            computes = [len(body_bytes) / BYTES_PER_TOKEN] * len(order)
        ranked = []
        for rank, (b, compute) in enumerate(zip(order, computes)):
            ranked.append(((not b.healthy, cost(b, compute, self.s.decode_weight), b.in_flight,
                            rank), b, compute))
        ranked.sort(key=lambda r: r[0])
        log.debug("pikv-router: costs %s", [(b.url, key[1]) for key, b, _ in ranked])
        return [(b, compute) for _, b, compute in ranked]

    # --- passing a request through ------------------------------------------------

    async def forward(self, backend, method, request, client, on_body):
        """Sends `request` (its bytes as received) to `backend` and its
        response back to `client`, byte for byte, as it arrives. Returns
        whether the response leaves the connection open. Raises
        BackendFailed (its `sent`: whether the client got bytes already)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*backend.hostport, limit=MAX_HEAD),
                self.s.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise BackendFailed(f"connect: {e!r}", sent=False) from e
        sent = False
        try:
            writer.write(request)
            await writer.drain()
            head = await read_head(reader)
            while head is not None and head.start[1].startswith("1"):  # 100 Continue: ours
                head = await read_head(reader)
            if head is None:
                raise BackendFailed("closed before a response", sent=False)
            await self.send(client, head.raw)
            sent = True
            first = True

            async def pass_on(piece):
                nonlocal first
                if first:
                    first = False
                    on_body()
                await self.send(client, piece)

            framing = body_framing(head, method)
            await copy_body(reader, framing, pass_on)
            return framing[0] != "close" and head.get("connection").lower() != "close"
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, HttpError,
                ValueError) as e:
            raise BackendFailed(repr(e), sent) from e
        finally:
            writer.close()

    @staticmethod
    async def send(client, data):
        try:
            client.write(data)
            await client.drain()
        except (OSError, RuntimeError) as e:
            raise ClientGone() from e

    async def route(self, head, body_raw, body, client):
        """One request through the best backend (retried once on the next
        before any byte was sent). Returns whether the client's connection
        may stay open."""
        method, target = head.start[0], head.start[1]
        path = target.split("?", 1)[0]
        self.counters["requests"] += 1
        if path in ROUTED_PATHS and method == "POST":
            self.counters["routed"] += 1
            try:
                payload = json.loads(body) if body else None
            except ValueError:
                payload = None
            order = await self.choose(path, payload, body)
        else:
            order = [(b, 0.0) for b in self.rotation()]
        if not order:
            self.counters["no_backend"] += 1
            await self.send(client, reply_bytes(502, "Bad Gateway", {"error": "no backend"}))
            return True
        for attempt, (backend, compute) in enumerate(order[:2]):
            if attempt:
                self.counters["retries"] += 1
            keep = await self.attempt(backend, compute, method, head.raw + body_raw, client)
            if keep is not None:
                return keep
        self.counters["no_backend"] += 1
        await self.send(client, reply_bytes(502, "Bad Gateway",
                                            {"error": "no backend answered"}))
        return True

    async def attempt(self, backend, compute, method, request, client):
        """One try on `backend`, accounted in its load. Returns whether the
        connection may stay open; None when it failed before any response
        byte reached the client (retry); raises BackendFailed after."""
        backend.requests += 1
        backend.in_flight += 1
        backend.pending_prefill += compute
        pending = [compute]

        def prefill_done():
            backend.pending_prefill -= pending.pop() if pending else 0.0

        try:
            return await self.forward(backend, method, request, client, prefill_done)
        except BackendFailed as e:
            backend.failures += 1
            if backend.healthy:
                log.warning("pikv-router: %s marked down: %s", backend.url, e)
            backend.healthy = False
            if e.sent:
                self.counters["broken_streams"] += 1
                raise
            return None
        finally:
            prefill_done()
            backend.in_flight -= 1

    def stats(self):
        return dict(self.counters, mode=self.s.mode,
                    backends=[b.stats() for b in self.backends])

    # --- connections and health --------------------------------------------------

    async def serve_client(self, reader, writer):
        """A client connection: requests one after another (keep-alive)
        until either side closes."""
        try:
            while (head := await read_head(reader)) is not None:
                if head.get("expect").lower() == "100-continue":
                    await self.send(writer, b"HTTP/1.1 100 Continue\r\n\r\n")
                body_raw, body = await read_request_body(reader, head)
                if head.start[1].split("?", 1)[0] == STATS_PATH:
                    await self.send(writer, reply_bytes(200, "OK", self.stats()))
                    keep = True
                else:
                    keep = await self.route(head, body_raw, body, writer)
                closing = (head.get("connection").lower() == "close" or
                           head.start[2:] == ["HTTP/1.0"])
                if not keep or closing:
                    break
        except HttpError as e:
            try:
                await self.send(writer, reply_bytes(400, "Bad Request", {"error": str(e)}))
            except ClientGone:
                pass
        except (BackendFailed, ClientGone, OSError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, ValueError):
            pass
        except Exception:  # a bug: this connection ends, the router serves on
            log.exception("pikv-router: connection failed")
        finally:
            writer.close()

    async def check(self, backend):
        """One health check: GET /health answers 200."""
        try:
            status, _ = await fetch_json(backend.hostport, "GET", "/health",
                                         timeout=max(0.2, min(2.0, self.s.health_interval)))
            ok = status == 200
        except (OSError, asyncio.TimeoutError, HttpError, ValueError):
            ok = False
        if ok != backend.healthy:
            log.warning("pikv-router: %s is %s", backend.url, "up" if ok else "down")
            if not ok:
                backend.failures += 1
        backend.healthy = ok

    async def check_all(self):
        await asyncio.gather(*(self.check(b) for b in self.backends))

    async def health_loop(self):
        while True:
            await asyncio.sleep(self.s.health_interval)
            await self.check_all()

    async def run(self):
        """Checks the backends once, listens, says so on stdout, serves."""
        await self.check_all()
        server = await asyncio.start_server(self.serve_client, *self.s.listen, limit=MAX_HEAD)
        host, port = server.sockets[0].getsockname()[:2]
        print(f"pikv-router ready {host}:{port}", flush=True)
        health = asyncio.create_task(self.health_loop())
        try:
            async with server:
                await server.serve_forever()
        finally:
            health.cancel()


# --- command line -------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m pikv.router",
        description="An OpenAI-compatible HTTP router in front of vLLM servers attached to pikv "
                    "nodes: each completion goes where its prompt's chunks cost least "
                    "(docs/routing.md).")
    p.add_argument("--listen", default="127.0.0.1:8100", help="host:port (default %(default)s)")
    p.add_argument("--backend", action="append", required=True, metavar="URL=NODE_ID",
                   help="a vLLM server (http://host:port) and the id of the pikv node it is "
                        "attached to; repeat for each")
    p.add_argument("--controller-http", metavar="HOST:PORT",
                   help="the pikv controller's HTTP endpoint, asked GET /score (chunks and "
                        "prefix modes)")
    p.add_argument("--mode", choices=MODES, default="chunks",
                   help="chunks: by chunk credit per tier and load; prefix: by the node's "
                        "cached prefix and load; round-robin (default %(default)s)")
    p.add_argument("--credit", default="", metavar="TIER=X,...",
                   help="share of a chunk's prefill each tier saves, 0..1 (default " +
                        ",".join(f"{k}={v}" for k, v in DEFAULT_CREDIT.items()) + ")")
    p.add_argument("--decode-weight", type=float, default=64.0,
                   help="what one running request costs a new one, in prefill tokens "
                        "(default %(default)s)")
    p.add_argument("--health-interval", type=float, default=2.0,
                   help="seconds between GET /health checks of each backend (default "
                        "%(default)s)")
    p.add_argument("--score-timeout", type=float, default=0.2,
                   help="seconds to wait for /score before routing by load (default "
                        "%(default)s)")
    p.add_argument("--tokenize-timeout", type=float, default=0.5,
                   help="seconds to wait for a backend's /tokenize (default %(default)s)")
    p.add_argument("--salt-key-file", default="",
                   help="the engines' salt-key-file: salted requests are scored in their "
                        "salt's scope (without it they are routed by load)")
    p.add_argument("--tenant", default="",
                   help="the engines' tenant: passed to /score and part of the chunk keys")
    p.add_argument("--separator", default="", metavar="ID,ID,...",
                   help="token ids that start each chunk, as the connector's separator")
    p.add_argument("--client-settings", default="", metavar="FILE",
                   help="the engines' pikv client settings (YAML, deploy/client.example.yaml): "
                        "what chunk keys depend on")
    p.add_argument("--client-setting", action="append", default=[], metavar="KEY=VALUE",
                   help="one client setting (model-id, model-config, dtype, max-model-len, "
                        "attention-mode ...), over the file; repeatable")
    p.add_argument("--log-level", default="WARNING")
    return p.parse_args(argv)


def settings_from(args):
    """Settings from the command line; ValueError names a bad one."""
    backends = []
    for spec in args.backend:
        url, sep, node = spec.rpartition("=")
        if not sep or not node:
            raise ValueError(f"--backend {spec!r} is not URL=NODE_ID")
        parse_hostport(url)
        backends.append((url, node))
    if args.mode != "round-robin" and not args.controller_http:
        raise ValueError(f"--mode {args.mode} needs --controller-http")
    return Settings(
        listen=parse_hostport(args.listen), backends=backends,
        controller=parse_hostport(args.controller_http) if args.controller_http else None,
        mode=args.mode, credit=parse_credit(args.credit), decode_weight=args.decode_weight,
        health_interval=args.health_interval, score_timeout=args.score_timeout,
        tokenize_timeout=args.tokenize_timeout, tenant=args.tenant,
        salt_key=read_salt_key(args.salt_key_file),
        separator=[int(t) for t in args.separator.split(",") if t.strip()] or None)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(message)s")
    try:
        settings = settings_from(args)
        keys = None
        if settings.mode != "round-robin":
            pairs = [kv.partition("=") for kv in args.client_setting]
            if any(not sep for _, sep, _ in pairs):
                raise ValueError("--client-setting takes KEY=VALUE")
            keys = key_client(args.client_settings, {k: v for k, _, v in pairs}, settings.tenant)
    except Exception as e:  # bad configuration: say which, exit 2
        print(f"pikv-router: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(Router(settings, keys).run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
