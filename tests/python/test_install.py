"""The package installs offline with pip into a fresh venv (Debian's torch
seen through --system-site-packages) and imports from there, not from the
build tree."""

import os
import subprocess

from conftest import SOURCE_DIR


def test_pip_installs_the_package_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.check_call(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # pip builds the extension in the checkout: paths relative to it in
    # ccache's hashes, so that a fresh clone (as CI makes) hits the cache.
    env.setdefault("CCACHE_BASEDIR", SOURCE_DIR)
    subprocess.check_call([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation",
                           SOURCE_DIR], env=env, cwd=tmp_path, timeout=1200)
    out = subprocess.check_output(
        [str(venv / "bin" / "python"), "-c",
         "import pikv, pikv.connector, pikv.tensors, torch; print(pikv.__file__); "
         "print(pikv.Client(pikv.Options.load('', {'local-node': '', 'controller': ''}))"
         ".key_of([1, 2, 3]))"], env=env, cwd=tmp_path, text=True)
    installed, key = out.split()
    assert installed.startswith(str(venv)), installed
    assert len(key) == 32
