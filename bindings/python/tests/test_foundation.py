"""The foundation of the Python package: loading, version, errors, logging."""
import os
import re
import subprocess
import sys
import threading

import otsession


def test_version_is_semver():
    assert re.fullmatch(r"\d+\.\d+\.\d+", otsession.version())


def test_error_codes_match_opentok_numbers():
    E = otsession.ErrorCode
    assert (E.AUTHORIZATION_FAILURE, E.INVALID_SESSION, E.CONNECTION_FAILED, E.NOT_CONNECTED) == (1004, 1005, 1006, 1010)
    assert (E.SIGNAL_DATA_TOO_LONG, E.SIGNAL_TYPE_TOO_LONG, E.INVALID_SIGNAL_TYPE) == (1413, 1414, 1461)
    assert E.INVALID_PARAM == 1011 and E.ILLEGAL_STATE == 1015


def test_status_message_for_known_and_unknown_codes():
    assert "not connected" in otsession.status_message(1010)
    assert otsession.status_message(0) == "ok"
    assert otsession.status_message(123456) == "unknown status code"


def test_invalid_log_level_raises_with_code():
    try:
        otsession.set_log_level(42)
    except otsession.OTError as e:
        assert e.code == otsession.ErrorCode.INVALID_PARAM
        assert "1011" in str(e)
    else:
        raise AssertionError("set_log_level(42) did not raise")


def test_log_callback_receives_lines_then_can_be_removed():
    got = []
    done = threading.Event()

    def on_log(level, message):
        got.append((level, message))
        done.set()

    otsession.set_log_callback(on_log)
    try:
        otsession.set_log_level(otsession.LogLevel.INFO)
        assert done.wait(5)
        assert any("log level set to info" in m for _, m in got), got
        assert all(isinstance(l, otsession.LogLevel) for l, _ in got)
    finally:
        otsession.set_log_callback(None)
        otsession.set_log_level(otsession.LogLevel.WARN)
    before = len(got)
    otsession.set_log_level(otsession.LogLevel.INFO)
    otsession.set_log_level(otsession.LogLevel.WARN)
    assert len(got) == before, "no line reaches a removed callback"


def test_missing_library_error_lists_what_was_tried():
    env = dict(os.environ, OTSESSION_LIBRARY="/nonexistent/libotsession.so", PKG_CONFIG_PATH="/nonexistent",
               LD_LIBRARY_PATH="")
    code = "import otsession; otsession.version()"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "LibraryNotFound" in r.stderr
    assert "$OTSESSION_LIBRARY: /nonexistent/libotsession.so" in r.stderr
    assert "system loader" in r.stderr
