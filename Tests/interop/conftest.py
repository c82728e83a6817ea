"""Builds and starts our `ot-server` on a free loopback port for the interop tests; builds `ot-demo`; starts one
headless Chromium for the browser tests."""
import os
import socket
import subprocess
import time

import pytest

from plumbing import stop_process

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _binary(product="ot-server", env="OT_SERVER_BIN"):
    path = os.environ.get(env)
    if path:
        return path
    subprocess.run(["swift", "build", "--product", product], cwd=ROOT, check=True)
    out = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True)
    return os.path.join(out.stdout.strip(), product)


@pytest.fixture(scope="session")
def ot_server_binary():
    return _binary()


@pytest.fixture(scope="session")
def ot_demo():
    return _binary("ot-demo", "OT_DEMO_BIN")


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory):
    """A certificate authority made for this run (testca.py), trusted by `chromium` as a user's installed CA."""
    from testca import TestCA

    return TestCA(str(tmp_path_factory.mktemp("ca")))


@pytest.fixture(scope="session")
def chromium(tmp_path_factory, test_ca):
    """One headless Chromium for every browser test of the run (browser.py), trusting `test_ca`."""
    import browser

    work = tmp_path_factory.mktemp("chromium")
    driver = browser.launch(work, home=browser.trusting_home(work, test_ca.ca_file))
    yield driver
    driver.quit()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, port, key, secret, proc):
        self.binary, self.port, self.key, self.secret, self.proc = binary, port, key, secret, proc
        self.api_url = f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def ot_server():
    binary = _binary()
    key, secret = subprocess.run([binary, "keygen"], check=True, capture_output=True, text=True).stdout.strip().split(":")
    for _ in range(5):
        port = _free_port()
        proc = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--project", f"{key}:{secret}",
                                 "--reconnect-grace", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = proc.stdout.readline()
        if "listening" in line:
            break
        proc.wait(timeout=5)
    else:
        raise RuntimeError("ot-server did not start")
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield Server(binary, port, key, secret, proc)
    stop_process(proc)
