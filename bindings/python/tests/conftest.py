"""Fixtures shared by the binding's tests."""
import pytest

import otsession


@pytest.fixture
def server():
    """An embedded server on a free loopback port, stopped after the test."""
    with otsession.Server(api_key="4711", api_secret="ab" * 20) as s:
        yield s
