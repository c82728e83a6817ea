"""`ot-server`'s flags and the C ABI's `ot_server_new_with_options` refuse a server option out of its range with one
message: OTServer's `SessionServer.Configuration.validate(naming:)` checks the range once, and each caller has it name
the setting as its user wrote it (the flag, or the `ot_server_options` member)."""
import ctypes
import os
import subprocess
import sys

import pytest

from otsession._lib import lib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python", "tests"))
from test_abi_robustness import _logged  # noqa: E402

CASES = [("--media-workers", "media_workers", v) for v in (0, -1, 65)] + \
        [("--turn-ttl", "turn_credential_ttl_s", v) for v in (59, 2_592_001, -9_223_372_036_854_775_808)]


@pytest.mark.parametrize("flag,member,value", CASES)
def test_a_bad_value_gets_the_same_message_from_the_flag_and_the_c_member(ot_server_binary, flag, member, value):
    r = subprocess.run([ot_server_binary, "--project", "4711:" + "ab" * 20, "--listen", "127.0.0.1:0", flag, str(value)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    cli = r.stderr.strip().removeprefix("ot-server: ")
    assert cli.startswith(f"{flag} {value} "), cli
    f, d = lib().fn, lib().decl
    options = d.structs["ot_server_options"]()
    assert f.ot_server_options_default(ctypes.byref(options)) == 0
    options.api_key, options.api_secret = b"4711", b"ab" * 20
    setattr(options, member, value)
    server, lines = _logged(lambda: f.ot_server_new_with_options(ctypes.byref(options)))
    assert not server
    expected = "ot_server_new_with_options: " + cli.replace(flag, member, 1)
    assert any(line.endswith(expected) for line in lines), (expected, lines)
