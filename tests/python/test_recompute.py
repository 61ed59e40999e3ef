"""pikv.recompute's policies and positions, without vLLM (its run inside
vLLM itself, and the plugin that hands it the model:
tests/vllm/test_vllm_recompute.py)."""

import pytest
import torch

from pikv.errors import InvalidArgument
from pikv.recompute import (ModelRecompute, Policy, count_of, document_spans, first_positions,
                            parse_policy)


@pytest.mark.parametrize("text,policy", [
    ("none", Policy()), ("", Policy()), ("first:0.15", Policy("first", 0.15)),
    ("blend:1", Policy("blend", 1.0)), (" blend:0.05 ", Policy("blend", 0.05))])
def test_a_policy_is_named_with_its_share(text, policy):
    assert parse_policy(text) == policy
    assert parse_policy(str(policy)) == policy


@pytest.mark.parametrize("text", ["first", "first:0", "blend:1.5", "tail:0.1", "first:x",
                                  "blend:nan", "first:-0.1", "first:0.1:2"])
def test_anything_else_is_refused_by_name(text):
    with pytest.raises(InvalidArgument, match="recompute"):
        parse_policy(text)


def test_first_takes_the_start_of_each_document_never_the_system_prompt():
    segments = [[0] * 10, [1] * 20, [2] * 7, [3] * 5]  # system, two documents, question
    assert document_spans(segments, 37) == [(10, 30), (30, 37)]
    assert document_spans(segments, 25) == [(10, 25)]  # a load cut short: what was loaded
    assert first_positions(document_spans(segments, 37), 0.1) == [10, 11, 30]
    assert count_of(0.01, 7) == 1 and count_of(1.0, 7) == 7 and count_of(0.5, 0) == 0
    assert first_positions([], 0.5) == []


class _CausalLM(torch.nn.Module):
    def compute_logits(self, hidden):
        return hidden


def test_a_model_recompute_does_not_drive_is_refused_by_name():
    with pytest.raises(InvalidArgument, match="_CausalLM"):
        ModelRecompute(_CausalLM(), [], None)
