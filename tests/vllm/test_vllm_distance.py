"""Documents stored at the distance they are used, inside vLLM itself
(prefixed mode with distance-buckets): engine 1 precomputes a RAG prompt's
documents, each at the bucket of its distance from the system prompt (the
system prompt loaded encoded that far back, so vLLM computes the document
as if that far from it); engine 2 answers the same documents in another
order after precomputing only the buckets it lacks, loading the rest P2P.
Its answers are checked against the independent reference
(tests/vllm/reference.py: a copy of the system prompt moved back by the
bucket before each document) and told apart from the adjacent form."""

from conftest import engine_settings, rag_prompt, run_engine
from reference import Reference, assert_exact
from test_vllm_e2e import F32_TOLERANCE, STEPS, answer_task, reordered


def pow2(d):
    """The bucket scheme "pow2", from its definition (docs/quality.md)."""
    if d == 0:
        return 0
    p = 1 << (d.bit_length() - 1)
    return 2 * p if d * d >= 2 * p * p else p


def test_documents_at_their_distance_bucket_answer_as_the_reference(
        cluster, make_model, tmp_path):
    family = "llama"  # the key and rotation rules are the model's own (any family)
    model = make_model(family, "float32")
    segments = rag_prompt(seed=69, vocab=2048)  # documents at 0, 60 (64), 150 (128)
    other = reordered(segments)  # at 0, 75 (64), 165 (128)
    chunk_tokens = sum(len(s) for s in segments[:-1])

    def settings(node):
        return dict(engine_settings(cluster, node, "prefixed"), **{"distance-buckets": "pow2"})

    one = run_engine(tmp_path, f"{family}-d1", model, "float32", settings(0), [
        {"op": "precompute", "segments": segments}, answer_task(segments)])
    assert one["answers"][0]["computed"] == len(segments) - 1
    assert one["answers"][1]["num_cached_tokens"] == chunk_tokens

    # The middle document sits in bucket 64 either way: loaded P2P; the
    # others are in new buckets, computed here.
    two = run_engine(tmp_path, f"{family}-d2", model, "float32", settings(1), [
        {"op": "precompute", "segments": other}, answer_task(other)])
    assert two["answers"][0]["computed"] == 2
    answer = two["answers"][1]
    assert answer["num_cached_tokens"] == chunk_tokens

    assert_exact(Reference(model), answer, other, STEPS, F32_TOLERANCE,
                 f"{family} distance buckets P2P", mode="prefixed", distance=pow2)
