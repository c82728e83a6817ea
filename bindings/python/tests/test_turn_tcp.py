"""TURN over TCP through the Python package: relay-only sessions reach coturn (started here, on 127.0.0.1) over
TCP, and the test pattern arrives through the relay; a TCP TURN server nobody listens on fails the subscriber."""
import json
import queue
import socket
import threading
import time

import coturn_support
import pytest

import otsession
from otsession import Role
from coturn_support import PASSWORD, USER
from session_recorder import SubscriberRecorder


@pytest.fixture
def coturn():
    with coturn_support.coturn() as port:
        yield port


def relay_ice(url):
    return otsession.ICEConfig([otsession.ICEServer(url, USER, PASSWORD)], transport_policy=otsession.ICETransportPolicy.RELAY)


def publish_and_subscribe(server, pub_ice, sub_ice):
    sid = server.create_session(relayed=True)
    streams = queue.Queue()
    pub_s = otsession.Session(server.api_key, sid, server_url=server.url, ice_config=pub_ice)
    sub_s = otsession.Session(server.api_key, sid, server_url=server.url, ice_config=sub_ice)
    sub_s.on("stream_created", streams.put)
    for s in (pub_s, sub_s):
        done = threading.Event()
        s.on("connected", done.set)
        s.connect(server.token(sid, Role.PUBLISHER))
        assert done.wait(10)
    pub = otsession.Publisher("tcp-turn", width=160, height=120)
    pub_s.publish(pub)
    viewer = SubscriberRecorder(streams.get(timeout=10))
    sub_s.subscribe(viewer)
    return pub_s, sub_s, pub, viewer


def test_media_through_turn_over_tcp(coturn):
    with otsession.Server(api_key="778", api_secret="ab" * 20) as server:
        ice = relay_ice(f"turn:127.0.0.1:{coturn}?transport=tcp")
        pub_s, sub_s, pub, viewer = publish_and_subscribe(server, ice, ice)
        try:
            viewer.expect("connected")
            deadline = time.time() + 15
            while len(viewer.frames) < 15 and time.time() < deadline:
                time.sleep(0.05)
            stamped = [f.test_pattern[0] for f in viewer.frames if f.test_pattern]
            assert len(stamped) >= 10 and stamped == sorted(stamped)
            report = json.loads(viewer.rtc_stats_report())
            pair = next(o for o in report if o["type"] == "candidate-pair")
            local = next(o for o in report if o["id"] == pair["localCandidateId"])
            remote = next(o for o in report if o["id"] == pair["remoteCandidateId"])
            assert local["candidateType"] == "relay" and local["relayProtocol"] == "tcp"
            assert remote["candidateType"] == "relay"
        finally:
            viewer.close()
            pub.close()
            sub_s.close()
            pub_s.close()


def test_unreachable_turn_over_tcp_fails_the_subscriber(coturn):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with otsession.Server(api_key="779", api_secret="cd" * 20) as server:
        pub_s, sub_s, pub, viewer = publish_and_subscribe(server, relay_ice(f"turn:127.0.0.1:{coturn}?transport=tcp"),
                                                          relay_ice(f"turn:127.0.0.1:{dead}?transport=tcp"))
        try:
            _, (code, message) = viewer.expect("error")
            assert code == otsession.ErrorCode.SUBSCRIBER_WEBRTC and f"TURN: the TCP connection to 127.0.0.1:{dead}" in message
        finally:
            viewer.close()
            pub.close()
            sub_s.close()
            pub_s.close()
