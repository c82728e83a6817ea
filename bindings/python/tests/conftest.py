"""Fixtures shared by the binding's tests."""
import sys
from pathlib import Path

import pytest

import otsession

# The test plumbing these tests share with the interop and attack suites (stopping a child process, the TCP pump).
sys.path.append(str(Path(__file__).resolve().parents[3] / "Tests" / "interop"))


@pytest.fixture
def server():
    """An embedded server on a free loopback port, stopped after the test."""
    with otsession.Server(api_key="4711", api_secret="ab" * 20) as s:
        yield s
