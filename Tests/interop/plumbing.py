"""Test plumbing shared by the interop and attack suites: the byte pump of the TCP proxies tests start, and stopping a
child process (a server the test started) without leaving it behind."""
import socket
import subprocess


def pump(src, dst, forward=None):
    """Copies what `src` receives to `dst` until `src` ends or fails, then shuts both down (so the pump of the other
    direction ends too) and closes `src`. `forward(src)` returning False drops what arrives instead (a frozen path)."""
    try:
        src.settimeout(None)
        while data := src.recv(65536):
            if forward is None or forward(src):
                dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        src.close()


def stop_process(proc, timeout=10):
    """SIGTERM, then SIGKILL if `proc` has not exited within `timeout` seconds; returns once it is reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
