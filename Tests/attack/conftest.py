"""Fixtures of the attack suite (tools in attacklib.py): the ot-server binary, a server per case, and the report
of every case printed at the end (and written as JSON to $ATTACK_REPORT when set)."""
import json
import os
import resource

import pytest

from attacklib import REPORT, Server, binary_path


@pytest.fixture(scope="session")
def binary():
    # The attacks open more sockets than a default soft limit of 1024 allows this process.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return binary_path()


@pytest.fixture
def server_factory(binary):
    made = []

    def make(*args, **kw):
        s = Server(binary, args, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def pytest_terminal_summary(terminalreporter):
    if not REPORT:
        return
    terminalreporter.write_sep("-", "attack suite: server peak RSS, legitimate join, answer")
    for r in REPORT:
        join = f"{r['join_s'] * 1000:.0f} ms" if r.get("join_s") is not None else "n/a"
        terminalreporter.write_line(f"{r['case']}: peak RSS {r['peak_rss_mb']:.0f} MB (start {r['start_rss_mb']:.0f} MB), "
                                    f"joined in {join}, {r['observed']}")
    path = os.environ.get("ATTACK_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(REPORT, f, indent=1)


