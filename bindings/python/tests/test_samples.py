"""The Python samples run and report success."""
import os
import pathlib
import subprocess
import sys

import pytest

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"


@pytest.mark.parametrize("mode", ["routed", "relayed"])
def test_publish_subscribe_sample(mode):
    r = subprocess.run([sys.executable, str(SAMPLES / "publish_subscribe.py"), "2", mode], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")
    assert "frames=" in r.stdout
