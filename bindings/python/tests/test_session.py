"""Sessions through the Python package against the embedded server on loopback."""
import queue
import threading

import pytest

import otsession
from otsession import ErrorCode, OTError, Role, SessionStatus
from session_recorder import SessionRecorder


class Recorder(SessionRecorder):
    """A session that records its events (errors with their message, connections, signals, mutes) into a queue."""

    def on_error(self, code, message):
        self.events.put(("error", code, message))

    def on_connection_created(self, connection):
        self.events.put(("connection_created", connection))

    def on_connection_destroyed(self, connection):
        self.events.put(("connection_destroyed", connection))

    def on_signal_received(self, type, data, connection):
        self.events.put(("signal", type, data, connection))

    def on_mute_forced(self, info):
        self.events.put(("mute_forced", info.active, info.stream_id))


def test_connect_capabilities_and_connection(server):
    sid = server.create_session()
    with Recorder.connected(server, sid, Role.MODERATOR, data="name=alice") as mod:
        assert mod.status == SessionStatus.CONNECTED
        assert mod.session_id == sid
        assert mod.connection.data == "name=alice"
        caps = mod.capabilities
        assert caps.can_publish and caps.can_subscribe and caps.can_force_mute and caps.can_force_disconnect
        with Recorder.connected(server, sid, Role.SUBSCRIBER, t1=True) as sub:
            assert not sub.capabilities.can_publish
            joined = mod.expect("connection_created")[1]
            assert joined.id == sub.connection.id
            with pytest.raises(OTError) as e:
                sub.send_signal("chat", "hi")
            assert e.value.code == ErrorCode.FORCE_UNPUBLISH_OR_INVALID_STREAM


def test_signals_to_all_and_to_one(server):
    sid = server.create_session()
    with Recorder.connected(server, sid, "publisher") as a, Recorder.connected(server, sid, "publisher") as b, \
            Recorder.connected(server, sid, "publisher") as c:
        a.send_signal("chat", "hello all")
        for s in (b, c):
            _, t, d, frm = s.expect("signal")
            assert (t, d, frm.id) == ("chat", "hello all", a.connection.id)
        b_conn = a.expect("connection_created")[1]
        if b_conn.id != b.connection.id:
            b_conn = a.expect("connection_created")[1]
        a.send_signal("direct", "just b", to=b_conn)
        assert b.expect("signal")[1:3] == ("direct", "just b")
        with pytest.raises(queue.Empty):
            c.expect("signal", timeout=0.5)


@pytest.mark.parametrize("type_,data,code", [
    ("x" * 129, "d", ErrorCode.SIGNAL_TYPE_TOO_LONG),
    ("no spaces", "d", ErrorCode.INVALID_SIGNAL_TYPE),
    ("ok", "d" * 8193, ErrorCode.SIGNAL_DATA_TOO_LONG),
])
def test_signal_validation_codes(server, type_, data, code):
    sid = server.create_session()
    with Recorder.connected(server, sid, "publisher") as s:
        with pytest.raises(OTError) as e:
            s.send_signal(type_, data)
        assert e.value.code == code


def test_moderation_force_mute_and_disconnect(server):
    sid = server.create_session()
    with Recorder.connected(server, sid, "moderator") as mod, Recorder.connected(server, sid, "publisher") as pub:
        victim = mod.expect("connection_created")[1]
        mod.force_mute_all()
        assert pub.expect("mute_forced")[1:] == (True, None)
        mod.disable_force_mute()
        assert pub.expect("mute_forced")[1:] == (False, None)
        with pytest.raises(OTError) as e:
            pub.force_disconnect(victim)
        assert e.value.code == ErrorCode.UNABLE_TO_FORCE_DISCONNECT
        mod.force_disconnect(victim)
        pub.expect("disconnected")
        assert mod.expect("connection_destroyed")[1].id == victim.id
        assert len(mod.report_issue("testing")) > 8


def test_bad_token_and_unknown_session(server):
    sid = server.create_session()
    s = Recorder(server.api_key, sid, server_url=server.url)
    s.connect(server.token(sid)[:-4] + "AAAA")
    assert s.expect("error")[1] == ErrorCode.AUTHORIZATION_FAILURE
    s.close()
    with pytest.raises(OTError) as e:
        s.connect("x")
    assert e.value.code == ErrorCode.INVALID_HANDLE


def test_registered_listener_and_close_from_callback(server):
    sid = server.create_session()
    with Recorder.connected(server, sid, "publisher") as a:
        b = Recorder.connected(server, sid, "publisher")
        closed = threading.Event()

        def close_on_signal(type_, data, conn):
            b.close()            # deleting the session from inside its own callback is safe
            closed.set()
        b.on("signal_received", close_on_signal)
        a.send_signal("bye", "")
        assert closed.wait(10)
        a.expect("connection_destroyed")
        with pytest.raises(ValueError):
            a.on("no_such_event", print)


def test_token_helper_matches_server():
    sid_server = otsession.Server(api_key="55", api_secret="cd" * 20)
    sid_server.start()
    try:
        sid = sid_server.create_session(relayed=True)
        assert otsession.token("55", "cd" * 20, sid, Role.PUBLISHER).startswith("eyJ")
        assert otsession.token("55", "cd" * 20, sid, "subscriber", t1=True).startswith("T1==")
        with pytest.raises(OTError) as e:
            otsession.token("56", "cd" * 20, sid)  # a session of another project
        assert e.value.code == ErrorCode.INVALID_PARAM
    finally:
        sid_server.close()


def test_ice_config_is_validated():
    ice = otsession.ICEConfig(transport_policy=otsession.ICETransportPolicy.RELAY, filter_out_lan_candidates=True)
    ice.add_ice_server("stun:127.0.0.1:3478")
    ice.add_ice_server("turn:127.0.0.1:3479?transport=udp", "user", "secret")
    s = otsession.Session("123", "1_s", ice_config=ice)
    s.close()
    ice.add_ice_server("turn:127.0.0.1:3479?transport=tcp", "user", "secret")
    ice.add_ice_server("turns:turn.example.org:443", "user", "secret")   # TURN over TLS, a name resolved when used
    ice.add_ice_server("stun:stun.example.org")
    otsession.Session("123", "1_s", ice_config=ice).close()
    for url in ("stun://127.0.0.1", "stuns:127.0.0.1", "turns:127.0.0.1?transport=udp", "stun:exa mple.org",
                "turn:127.0.0.1?transport=sctp"):
        with pytest.raises(OTError) as e:
            otsession.Session("123", "1_s", ice_config=otsession.ICEConfig([otsession.ICEServer(url)]))
        assert e.value.code == ErrorCode.INVALID_PARAM, url
