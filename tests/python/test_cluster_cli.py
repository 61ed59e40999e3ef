"""`pikv cluster`'s text form, as an operator reads it: a line per process it
started, with its pid first, and a Redis it did not start named as such."""

import os
import signal
import subprocess

from conftest import bin_dir


def test_the_text_form_names_each_process_by_pid_and_a_redis_it_did_not_start(cluster):
    proc = subprocess.Popen([os.path.join(bin_dir(), "pikv"), "cluster", "--nodes", "1",
                             "--insecure", "--redis", cluster.redis],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C stops it"):
                break
        processes = [line.split() for line in lines if line.startswith("pid ")]
        assert sorted(p[2] for p in processes) == ["controller", "node"], lines
        for p in processes:
            os.kill(int(p[1]), 0)  # each pid is a live process
        assert f"redis {cluster.redis} (not ours)" in lines, lines
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    for p in processes:
        try:
            os.kill(int(p[1]), 0)
            raise AssertionError(f"pid {p[1]} ({p[2]}) outlived its cluster")
        except ProcessLookupError:
            pass
