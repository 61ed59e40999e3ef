"""A prompt's segments and chunk keys, without torch or an engine: what
the connector (pikv.connector, pikv.vllm) and the router (pikv.router)
must agree on, so a chunk the router scores is the chunk an engine loads.

A prompt is [system, chunk, ..., question]; every segment but the question
is a chunk the connector plans, loads and stores (the system prompt in
either reuse mode), keyed by the client's namespace (model, KV format,
dtype, RoPE, reuse mode, tenant) and, in prefixed mode, by the system
prompt's key too; a request with a cache salt or a LoRA adapter in its
scope (salt_scope).
"""

import hashlib
import hmac
import os

from pikv.errors import InvalidArgument

# The key settings when the connector's configuration names none (pikv.vllm's
# defaults, here so the router keys chunks as the connector does without
# importing vLLM), chosen by docs/quality.md's measurements on real weights:
# each document computed after the prompt's system prompt (prefixed), at
# the power-of-two bucket of the distance it is used at, keeps more of full
# prefill's answers than any other storable form measured.
DEFAULT_SETTINGS = {"attention-mode": "prefixed", "distance-buckets": "pow2"}
DEFAULT_MODE = DEFAULT_SETTINGS["attention-mode"]


# Why a prompt that asked for chunking got none (the label of
# unchunked_requests), and what its log line says.
UNCHUNKED_REASONS = {
    "segments_malformed": "pikv_segments is not a list of at least two positive integers",
    "segments_length": "pikv_segments do not add up to the prompt's length",
    "no_separator": "the prompt holds no separator",
    "leading_separator": "the prompt starts with the separator: no system prompt before it",
    "short_chunk": "a chunk is no longer than the separator",
    "distance_malformed": "pikv_distance is not a distance bucket (distance-buckets) of a "
                          "pikv_save request of [system prompt, document] in prefixed mode",
}


class NotChunked(InvalidArgument):
    """A prompt that asked for chunking (segment lengths, or an engine with
    a separator) and cannot be; `reason` is a key of UNCHUNKED_REASONS."""

    def __init__(self, reason):
        super().__init__(UNCHUNKED_REASONS[reason])
        self.reason = reason


def split_segments(tokens, separator=None, lengths=None):
    """[system, chunks..., question] covering `tokens` exactly.

    `lengths`: explicit segment lengths (their sum is len(tokens)). Else
    `separator` (a token sequence): each separator starts the segment after
    it, so the segments still concatenate to the prompt the engine sees and a
    chunk is stored with its separator (the question too starts with one).
    None when chunking was not asked for (no lengths, no separator); raises
    NotChunked when it was and the prompt does not split.
    """
    if tokens is None:
        return None
    tokens = list(tokens)
    if lengths is not None:
        # Lengths come from a request's parameters: anything but positive
        # integers that cover the prompt is refused.
        if (not isinstance(lengths, (list, tuple)) or len(lengths) < 2 or
                not all(type(n) is int and n > 0 for n in lengths)):
            raise NotChunked("segments_malformed")
        if sum(lengths) != len(tokens):
            raise NotChunked("segments_length")
        out, at = [], 0
        for n in lengths:
            out.append(tokens[at:at + n])
            at += n
        return out
    if not separator:
        return None
    sep, cuts, i = list(separator), [], 0
    while i + len(sep) <= len(tokens):
        if tokens[i:i + len(sep)] == sep:
            cuts.append(i)
            i += len(sep)
        else:
            i += 1
    if not cuts:
        raise NotChunked("no_separator")
    if cuts[0] == 0:
        raise NotChunked("leading_separator")
    bounds = [0] + cuts + [len(tokens)]
    out = [tokens[a:b] for a, b in zip(bounds, bounds[1:])]
    if not all(len(s) > len(sep) for s in out[1:]):
        raise NotChunked("short_chunk")
    return out


def chunk_keys(client, segments, scope=""):
    """The hex keys of a split prompt's chunks (every segment but the
    question), in the request's `scope` (salt_scope), as the client's
    planner names them (asked, not mirrored: the mode, the system prompt
    and the distance buckets are the client's rule)."""
    if not segments or len(segments) < 2:
        return []
    return [c.key for c in client.plan_keys([list(s) for s in segments], scope=scope).chunks]


MIN_SALT_KEY_BYTES = 16


def read_salt_key(path):
    """The secret the salt scopes are keyed with (salt-key-file), or None
    when none is configured. Raises on a key too short to be one."""
    if not path:
        return None
    with open(path, "rb") as f:
        key = f.read().strip()
    if len(key) < MIN_SALT_KEY_BYTES:
        raise InvalidArgument(f"salt-key-file {path}: a key of at least {MIN_SALT_KEY_BYTES} "
                              f"bytes is needed, it holds {len(key)}")
    return key


def adapter_digest(path):
    """SHA-256 of a LoRA adapter's files (names and bytes, in name order):
    what the adapter computes with, the same on every host whatever its
    path or vLLM's per-process id. None when it cannot be read."""
    h = hashlib.sha256()
    try:
        files = sorted(os.path.relpath(os.path.join(d, n), path)
                       for d, _, names in os.walk(path) for n in names)
        if not files:
            return None
        for name in files:
            h.update(name.encode() + b"\0")
            with open(os.path.join(path, name), "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    except OSError:
        return None
    return h.digest()


def salt_scope(salt, salt_key, adapter=None):
    """The scope of a cache salt and an adapter (name, files' digest):
    request_scope's, for a request with those."""
    if not salt and adapter is None:
        return ""
    parts = []
    if salt:
        if salt_key is None:
            return None
        parts += [b"salt", str(salt).encode()]
    if adapter is not None:
        parts += [b"lora", adapter[0].encode(), adapter[1]]
    message = b"".join(len(p).to_bytes(4, "little") + p for p in parts)
    # Without a salt the scope is no secret: a fixed key, so every engine agrees.
    key = salt_key if salt else b"pikv-scope-v1"
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]

