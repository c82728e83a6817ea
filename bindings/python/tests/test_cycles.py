"""100 connect/publish/subscribe/unsubscribe/unpublish/disconnect/close cycles from Python, routed and relayed, leave
nothing behind: file descriptors and threads return to their level after a warm-up, and the live heap does not grow
(counted exactly by the repository's allocation counter, preloaded into a child Python)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
COUNTER = ROOT / "Sources" / "COTAllocCounter"


@pytest.fixture(scope="module")
def counter_library(tmp_path_factory):
    out = tmp_path_factory.mktemp("counter") / "liballoc_counter.so"
    subprocess.run(["cc", "-std=gnu11", "-O2", "-shared", "-fPIC", f"-I{COUNTER / 'include'}",
                    str(COUNTER / "alloc_counter.c"), "-o", str(out)], check=True)
    return out


@pytest.mark.parametrize("kind", ["routed", "relayed"])
def test_hundred_cycles_release_everything(counter_library, kind):
    env = dict(os.environ, LD_PRELOAD=str(counter_library))
    child = pathlib.Path(__file__).with_name("cycles_child.py")
    run = subprocess.run([sys.executable, str(child), kind, "100"], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"[figures] Python {kind}: {r}")
    (fds, fds_after), (threads, threads_after) = r["fds"], r["threads"]
    assert fds_after <= fds + 2, f"file descriptors {fds} -> {fds_after}"
    assert threads_after <= threads + 4, f"threads {threads} -> {threads_after}"
    # As in the C cycles test: warm-up may grow the early batch (per-thread state of threads started meanwhile, caches
    # filling up); the late batch grows by a leak's share only, so it must grow by fewer blocks than half its cycles
    # (a leak of one block every other cycle fails).
    batch = r["count"] // 2
    early_bytes = r["live_bytes"][1] - r["live_bytes"][0]
    late_blocks = r["live_blocks"][2] - r["live_blocks"][1]
    assert early_bytes <= 64 * 1024, f"live heap grew {early_bytes} bytes in the early batch: {r}"
    assert late_blocks < batch // 2, f"live heap grew {late_blocks} blocks in the late batch of {batch} cycles: {r}"
