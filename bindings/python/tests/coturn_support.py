"""coturn's `turnserver` started by a test on 127.0.0.1 (no CLI, no daemon, a port and relay range picked at random),
stopped after: long-term credentials (USER/PASSWORD), or with `auth_secret` the shared-secret scheme
(`use-auth-secret`) whose credentials the session server mints (`ot-server --turn-secret`); with `tls` (certificate
and key files) also TURN over TLS (`turns:`) on the next port."""
import contextlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from plumbing import stop_process

USER, PASSWORD = "otuser", "otpass"


@contextlib.contextmanager
def coturn(auth_secret=None, tls=None):
    """Yields the TURN port (UDP and TCP; TLS on the port after it with `tls`); skips the test when coturn is missing
    or does not start."""
    if not os.path.exists("/usr/bin/turnserver"):
        pytest.skip("coturn is not installed")
    d = tempfile.mkdtemp(prefix="ot-coturn-")
    port = random.randint(20000, 29998)
    low = random.randint(0, 299) * 50 + 30000
    tls_lines = f"tls-listening-port={port + 1}\ncert={tls[0]}\npkey={tls[1]}\nno-tlsv1\nno-tlsv1_1\n" if tls else "no-tls\n"
    auth = f"use-auth-secret\nstatic-auth-secret={auth_secret}\n" if auth_secret else f"lt-cred-mech\nuser={USER}:{PASSWORD}\n"
    conf = os.path.join(d, "turnserver.conf")
    with open(conf, "w") as f:
        f.write(f"listening-ip=127.0.0.1\nrelay-ip=127.0.0.1\nlistening-port={port}\nmin-port={low}\nmax-port={low + 49}\n"
                f"{auth}realm=otsession.test\nallow-loopback-peers\n{tls_lines}no-dtls\n"
                f"no-cli\nno-rfc5780\nno-stdout-log\nlog-file={d}/turn.log\npidfile={d}/turn.pid\nuserdb={d}/turndb\n")
    proc = subprocess.Popen(["/usr/bin/turnserver", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while True:  # ready once its TCP listeners accept
            try:
                for p in (port, port + 1) if tls else (port,):
                    socket.create_connection(("127.0.0.1", p), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    pytest.skip("coturn did not start")
                time.sleep(0.05)
        yield port
    finally:
        stop_process(proc)
        shutil.rmtree(d, ignore_errors=True)
