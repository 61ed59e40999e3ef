"""A real model's weights (SmolLM2-135M-Instruct, float32) in vLLM with
pikv's connector, in each reuse mode: engine 1 precomputes the documents of
a chat prompt, engine 2 on the other node answers them in another order,
every chunk pulled P2P. Its answers equal the mode's independent reference
(tests/vllm/reference.py) within 1e-3 per logprob; and, judged against full
prefill (vLLM alone on the ordinary prompt), documents computed after the
system prompt (prefixed) continue a sentence from a document better than
documents computed alone (isolated)."""

import pytest

from conftest import default_form_settings, engine_settings, node_chunks, run_engine
from reference import Reference, assert_exact

F32_TOLERANCE = 1e-3
STEPS = 4

SYSTEM = "You are a careful assistant. Answer from the documents the user gives."
DOCUMENTS = [
    "The lighthouse on Marrow Point was built in 1871 from granite quarried on the island. "
    "Its keeper logged every passing ship in a leather book that is now kept in the town "
    "library, and the lamp was converted to electric power in 1923.",
    "Tidewater oysters grow slowly in the cold estuary, taking three years to reach market "
    "size. Farmers move the cages twice a season so that silt does not smother the shells, "
    "and the harvest ends when the water warms in late spring.",
    "The town council meets on the first Tuesday of each month in the old customs house. "
    "Residents may speak for three minutes on any item, and the minutes are posted on the "
    "harbour noticeboard the following morning.",
]
# Continuations: a sentence's first half from a document as the question,
# its true second half scored (its tokens are part of the prompt).
CONTINUATIONS = [
    ("Its keeper logged every passing ship in", " a leather book that is now kept in the town "
     "library"),
    ("Farmers move the cages twice a season so that", " silt does not smother the shells"),
    ("Residents may speak for three minutes on", " any item, and the minutes are posted on the "
     "harbour noticeboard"),
]


def chat_segments(tokenizer, order, question, system=SYSTEM):
    """[system, documents..., question] token ids of a chat prompt, each
    segment tokenized alone (a document's tokens are the same wherever it
    sits)."""
    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    system = ids(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n")
    docs = [ids(DOCUMENTS[i] + "\n\n") for i in order]
    return [system] + docs + [ids(question)]


def generate(segments, chunked=True, max_tokens=STEPS):
    return {"op": "generate", "prompt": sum(segments, []), "max_tokens": max_tokens,
            "segments": [len(s) for s in segments] if chunked else None}


def continuation_nll(answer, prompt_len, scored):
    """Mean negative logprob vLLM gave the last `scored` prompt tokens."""
    steps = answer["prompt_logprobs"][prompt_len - scored:prompt_len]
    tokens = answer["prompt"][prompt_len - scored:prompt_len]
    return -sum(step[str(t)] for step, t in zip(steps, tokens)) / scored


def stored_then_pulled(cluster, model, tmp_path, name, settings_of, stored, read,
                       write_more=(), read_more=()):
    """Engine 1 (node 1) precomputes `stored`'s documents, then runs
    `write_more`; engine 2 (node 2) answers `read` with every chunk pulled
    P2P, then runs `read_more`. Their outputs."""
    held = node_chunks(cluster, 1)
    one = run_engine(tmp_path, f"{name}-writer", model, "float32", settings_of(0),
                     [{"op": "precompute", "segments": stored}] + list(write_more))
    assert one["answers"][0]["computed"] == len(stored) - 1
    two = run_engine(tmp_path, f"{name}-reader", model, "float32", settings_of(1),
                     [generate(read)] + list(read_more))
    assert two["answers"][0]["num_cached_tokens"] == sum(len(s) for s in read[:-1])
    assert node_chunks(cluster, 1) - held == len(read) - 1, "every chunk came P2P"
    return one, two


MEASURED = {}  # mode -> (full prefill's continuation NLL, the mode's), nats/token


@pytest.fixture(scope="module")
def tokenizer(real_model):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(real_model)


@pytest.mark.parametrize("mode", ["isolated", "prefixed"])
def test_real_weights_in_vllm_answer_as_the_mode_reference_and_prefixed_keeps_quality(
        cluster, real_model, tokenizer, tmp_path, mode):
    question = ("Which year was the lighthouse converted to electric power?<|im_end|>\n"
                "<|im_start|>assistant\n")
    segments = chat_segments(tokenizer, [0, 1, 2], question)
    other = chat_segments(tokenizer, [2, 0, 1], question)
    ends = [chat_segments(tokenizer, [2, 0, 1], first + rest) for first, rest in CONTINUATIONS]
    scored = [len(tokenizer(rest, add_special_tokens=False)["input_ids"])
              for _, rest in CONTINUATIONS]
    one, two = stored_then_pulled(
        cluster, real_model, tmp_path, mode, lambda node: engine_settings(cluster, node, mode),
        segments, other, [generate(e, chunked=False, max_tokens=1) for e in ends],
        [generate(e, max_tokens=1) for e in ends])
    assert_exact(Reference(real_model), two["answers"][0], other, STEPS, F32_TOLERANCE,
                 f"SmolLM2 {mode}", distinct=False, mode=mode)

    # Quality against full prefill: continuation loss in nats/token.
    full = [continuation_nll(dict(a, prompt=sum(e, [])), len(sum(e, [])), n)
            for a, e, n in zip(one["answers"][1:], ends, scored)]
    reused = [continuation_nll(dict(a, prompt=sum(e, [])), len(sum(e, [])), n)
              for a, e, n in zip(two["answers"][1:], ends, scored)]
    print(f"continuation NLL: full prefill {full}, {mode} {reused}")
    MEASURED[mode] = (sum(full) / len(full), sum(reused) / len(reused))


def test_prefixed_keeps_more_of_full_prefills_quality_than_isolated():
    """Judged against full prefill, with real weights (the figures at
    scale: docs/quality.md)."""
    if len(MEASURED) < 2:
        pytest.skip("needs both modes measured above")
    (full, isolated), (_, prefixed) = MEASURED["isolated"], MEASURED["prefixed"]
    print(f"\ncontinuation NLL: full {full:.3f}, prefixed {prefixed:.3f}, isolated {isolated:.3f}")
    assert prefixed < isolated


def test_real_weights_in_the_connectors_default_form_answer_as_its_reference(
        cluster, real_model, tokenizer, tmp_path):
    """The connector's defaults (pikv.vllm: documents stored at their
    power-of-two distance bucket, the first tokens of each recomputed in
    place at load), on SmolLM2's real weights: vLLM's answer equals the
    reference of exactly that form (every chunk pulled P2P)."""
    from test_vllm_distance import pow2
    from test_vllm_recompute import first_positions

    from pikv.vllm import DEFAULT_RECOMPUTE, DEFAULT_SETTINGS
    assert DEFAULT_SETTINGS == {"attention-mode": "prefixed", "distance-buckets": "pow2"}, \
        "the reference below computes the default form: follow it there"
    policy, _, ratio = DEFAULT_RECOMPUTE.partition(":")
    assert policy == "first"

    question = ("Which year was the lighthouse converted to electric power?<|im_end|>\n"
                "<|im_start|>assistant\n")
    # A system prompt of its own: the module's cluster holds the other tests' chunks.
    other = chat_segments(tokenizer, [2, 0, 1], question, SYSTEM + " Be brief.")
    _, two = stored_then_pulled(cluster, real_model, tmp_path, "default",
                                lambda node: default_form_settings(cluster, node), other, other)
    assert_exact(Reference(real_model), two["answers"][0], other, STEPS, F32_TOLERANCE,
                 "SmolLM2 default form", distinct=False, mode="prefixed", distance=pow2,
                 recompute=first_positions(other, float(ratio)))
