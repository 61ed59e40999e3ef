"""pikv's failures reach Python as pikv.Error's subclasses, one per status
code of the C++ side, with the message it gave."""

import os

import pytest

import pikv
from pikv import _pikv, errors

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "device", "model_configs")


def test_every_status_code_has_its_own_class():
    codes = _pikv.status_codes()
    assert "not_found" in codes and "permission_denied" in codes and "protocol" in codes
    for code in codes:
        error = errors.from_status(code, "why")
        assert type(error) is not pikv.Error, f"{code} has no class of its own"
        assert error.code == code and str(error) == f"{code}: why" and error.args == ("why",)
        assert getattr(pikv, type(error).__name__) is type(error), "exported from pikv"
    unknown = errors.from_status("a_newer_code", "why")
    assert type(unknown) is pikv.Error and unknown.code == "a_newer_code"


def test_pythons_own_exceptions_still_catch_them():
    assert issubclass(pikv.InvalidArgument, ValueError)
    assert issubclass(pikv.Timeout, TimeoutError)
    assert not issubclass(pikv.Unavailable, (RuntimeError, ValueError)), "pikv's own family"


def test_a_failure_in_cpp_raises_its_codes_class_with_its_message():
    options = pikv.Options.load("", {
        "model-config": os.path.join(CONFIGS, "llama-3.2-1b.json"), "model-id": "m",
        "dtype": "bf16", "local-node": "", "controller": ""})
    client = pikv.Client(options)
    with pytest.raises(pikv.InvalidArgument, match="not a chunk key"):
        client.store_with([1, 2, 3], 0, lambda view: None, sys_key="zz")
    nbytes = options.num_layers * 2 * 3 * options.num_kv_heads * options.head_dim * 2
    with pytest.raises(pikv.Unavailable, match="no local node") as raised:
        client.store_with([1, 2, 3], nbytes, lambda view: None)
    assert raised.value.code == "unavailable"
    with pytest.raises(pikv.InvalidArgument, match="cannot read"):
        pikv.model_info("/nonexistent/config.json")
