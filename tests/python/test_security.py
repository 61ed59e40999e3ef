"""The Python side of a secure cluster: Admin and the client settings dial
with keys; without them, or with an engine's, the controller refuses."""

import pytest

import pikv


def test_admin_needs_a_listed_key_and_changes_need_the_admin_one(cluster):
    if not cluster.key_dir:
        pytest.skip("this run has security off (PIKV_TEST_SECURITY=off)")
    assert cluster.admin().health()["nodes_alive"] == 2
    keyless = pikv.Admin(cluster.controller, timeout_ms=500, curve_key="", curve_keyring="")
    with pytest.raises(pikv.Unavailable, match="no connection"):
        keyless.health()
    engine = cluster.admin("engine")
    assert engine.nodes()["nodes"], "reading is any listed key's"
    with pytest.raises(pikv.PermissionDenied):
        engine.clear()
    assert cluster.admin().clear()["forwarded_to"]


def test_a_secure_clusters_settings_name_the_keys(cluster):
    settings = cluster.security_settings()
    assert bool(settings) == bool(cluster.key_dir)
    options = pikv.Options.load("", {"local-node": cluster.nodes[0]["ipc"],
                                     "controller": cluster.controller, **settings})
    assert options.controller == cluster.controller
