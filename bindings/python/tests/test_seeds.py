"""The seeds' semantics through the Python package: mute all that stops what is sent, session navigation, one ordered
queue of a session's callbacks (thread mode and poll mode, also inside asyncio), and signal completions."""
import asyncio
import queue
import threading
import time

import pytest

import otsession
from otsession import AudioSource, CallbackMode, ErrorCode, OTError, Role, SessionStatus
from session_recorder import wait_until


class Client(otsession.Session):
    """A session that records, in one list, its own, its publisher's and its subscriber's callbacks with the thread
    each came on."""

    def __init__(self, server, sid, name, **kw):
        super().__init__(server.api_key, sid, server_url=server.url, **kw)
        self.name = name
        self.log = []
        self.streams_seen = queue.Queue()

    overlaps = 0
    _inside = 0

    def record(self, what, *values):
        # Counts callbacks that run while another of this session's is still running (there must be none).
        self._inside += 1
        if self._inside > 1:
            self.overlaps += 1
        time.sleep(0.001)
        self.log.append((what, threading.get_ident()) + values)
        self._inside -= 1

    def on_connected(self):
        self.record("session.connected")

    def on_stream_created(self, stream):
        self.record("session.stream_created", stream.id)
        self.streams_seen.put(stream)

    def on_mute_forced(self, info):
        self.record("session.mute_forced", info.active, info.stream_id)

    def on_status_changed(self, status):
        self.record("status", status)

    def on_disconnected(self):
        self.record("session.disconnected")

    def seen(self, what):
        return [e for e in self.log if e[0] == what]

    def index(self, what):
        return next((i for i, e in enumerate(self.log) if e[0] == what), -1)


class Pub(otsession.Publisher):
    def __init__(self, owner, name):
        super().__init__(name, width=160, height=120, fps=10, start_bitrate_kbps=150, audio_source=AudioSource.TONE)
        self.owner = owner

    def on_stream_created(self, stream):
        self.owner.record("publisher.stream_created", stream.own)

    def on_stream_destroyed(self, stream):
        self.owner.record("publisher.stream_destroyed")

    def on_mute_forced(self, active):
        self.owner.record("publisher.mute_forced", self.publish_audio)


class Sub(otsession.Subscriber):
    def __init__(self, owner, stream, **kw):
        super().__init__(stream, play_audio=False, **kw)
        self.owner = owner

    def on_connected(self, stream):
        self.owner.record("subscriber.connected", stream.id)

    def on_disconnected(self):
        self.owner.record("subscriber.disconnected")


def audio_packets(sub):
    return sub.stats["audio_packets_received"]


def audio_stops(sub, pump=time.sleep):
    """Whether the subscriber's received audio packets stay still for 600 ms (within 10 s)."""
    end, last, since = time.time() + 10, audio_packets(sub), time.time()
    while time.time() < end:
        pump(0.05)
        n = audio_packets(sub)
        if n != last:
            last, since = n, time.time()
        elif time.time() - since >= 0.6:
            return True
    return False


def connect(client, server, sid, role):
    client.connect(server.token(sid, role, data=f"name={client.name}"))
    assert wait_until(lambda: client.seen("session.connected"), 10)


def test_mute_all_stops_audio_everywhere_and_late_publishers_join_muted_until_disabled(server):
    sid = server.create_session()
    mod, a = Client(server, sid, "mod"), Client(server, sid, "a")
    late = Client(server, sid, "late")
    try:
        connect(mod, server, sid, Role.MODERATOR)
        connect(a, server, sid, Role.PUBLISHER)
        pub_m, pub_a = Pub(mod, "m"), Pub(a, "a")
        mod.publish(pub_m)
        a.publish(pub_a)
        stream_a = mod.streams_seen.get(timeout=10)
        stream_m = a.streams_seen.get(timeout=10)
        mod_from_a, a_from_m = Sub(mod, stream_a), Sub(a, stream_m)
        mod.subscribe(mod_from_a)
        a.subscribe(a_from_m)
        assert wait_until(lambda: audio_packets(mod_from_a) > 10 and audio_packets(a_from_m) > 10)

        # Navigation: the session's streams include its own, flagged; a stream names its owner with the token's data.
        streams = mod.streams
        assert set(streams) == {stream_a.id, stream_m.id}
        assert streams[stream_m.id].own and not streams[stream_a.id].own
        assert streams[stream_a.id].connection.data == "name=a"
        assert mod_from_a.stream.id == stream_a.id and not mod_from_a.stream.own
        assert mod.relayed is False
        assert set(mod.connections) == {a.connection.id}

        mod.force_mute_all()
        for c in (mod, a):
            assert wait_until(lambda: c.seen("publisher.mute_forced"), 10)
            # The session's message, then its publisher's; publish_audio is already False then.
            assert c.index("session.mute_forced") < c.index("publisher.mute_forced")
            assert c.seen("session.mute_forced")[0][2:] == (True, None)
            assert c.seen("publisher.mute_forced")[0][2] is False
        assert not pub_a.publish_audio and not pub_m.publish_audio
        assert audio_stops(mod_from_a) and audio_stops(a_from_m), "audio still reaches a subscriber"

        # A publisher that joins now starts muted; after the mute is disabled a new one keeps its audio.
        connect(late, server, sid, Role.PUBLISHER)
        pub_l = Pub(late, "l")
        late.publish(pub_l)
        assert wait_until(lambda: late.seen("publisher.mute_forced"), 10)
        assert not pub_l.publish_audio
        assert wait_until(lambda: any(not s.has_audio for s in late.streams.values() if s.own), 10)
        mod.disable_force_mute()
        assert wait_until(lambda: late.seen("session.mute_forced") and late.seen("session.mute_forced")[-1][2] is False, 10)
        late.unpublish(pub_l)
        pub_l2 = Pub(late, "l2")
        late.publish(pub_l2)
        assert wait_until(lambda: len(late.seen("publisher.stream_created")) == 2, 10)
        assert pub_l2.publish_audio
        assert len(late.seen("publisher.mute_forced")) == 1
        own = [s for s in late.streams.values() if s.own]
        assert len(own) == 1 and own[0].has_audio

        # The muted publisher unmutes itself: audio flows again.
        pub_a.publish_audio = True
        start = audio_packets(mod_from_a)
        assert wait_until(lambda: audio_packets(mod_from_a) > start + 20)

        # One stream's mute names the stream (not a mute all): only its publisher is muted.
        mod.force_mute_stream(stream_a.id)
        assert wait_until(lambda: len(a.seen("publisher.mute_forced")) == 2, 10)
        assert a.seen("session.mute_forced")[-1][2:] == (True, stream_a.id)
        assert not pub_a.publish_audio and pub_l2.publish_audio
        assert len(late.seen("publisher.mute_forced")) == 1
        assert audio_stops(mod_from_a)
        for sub in (mod_from_a, a_from_m):
            sub.close()
        for p in (pub_a, pub_m, pub_l, pub_l2):
            p.close()
    finally:
        for c in (late, a, mod):
            c.close()


def test_thread_mode_callbacks_of_a_session_come_one_at_a_time_in_order(server):
    sid = server.create_session()
    mod = Client(server, sid, "mod")
    try:
        connect(mod, server, sid, Role.MODERATOR)
        pub = Pub(mod, "m")
        mod.publish(pub)
        assert wait_until(lambda: mod.seen("publisher.stream_created"), 10)
        assert mod.seen("publisher.stream_created")[0][2] is True   # the publisher's stream is flagged own
        sub = Sub(mod, next(s for s in mod.streams.values() if s.own))
        mod.subscribe(sub)
        assert wait_until(lambda: mod.seen("subscriber.connected"), 10)
        mod.force_mute_all()
        assert wait_until(lambda: mod.seen("publisher.mute_forced"), 10)
        mod.disconnect()
        assert wait_until(lambda: mod.seen("session.disconnected"), 10)
        assert threading.get_ident() not in {e[1] for e in mod.log}, "callbacks come on a library thread"
        assert mod.overlaps == 0, "one at a time"
        assert mod.index("session.mute_forced") < mod.index("publisher.mute_forced")
        assert mod.index("publisher.stream_destroyed") < mod.index("session.disconnected")
        assert mod.log[-1][0] == "session.disconnected"
        assert not mod.seen("subscriber.disconnected"), "the session's end is not a subscriber event"
        assert [e[2] for e in mod.seen("status")] == [SessionStatus.CONNECTING, SessionStatus.CONNECTED,
                                                       SessionStatus.DISCONNECTING, SessionStatus.NOT_CONNECTED]
        assert mod.index("status") < mod.index("session.connected")
        sub.close()
        pub.close()
    finally:
        mod.close()


def test_poll_mode_in_asyncio_runs_every_callback_on_the_loop_thread(server):
    """A session in poll mode inside an asyncio loop: the fd wakes the loop, callbacks run there, between its tasks."""
    sid = server.create_session()

    async def main():
        loop_thread = threading.get_ident()
        otsession.attach_asyncio()
        mod = Client(server, sid, "mod", callback_mode=CallbackMode.POLL)
        try:
            mod.connect(server.token(sid, Role.MODERATOR))

            async def until(cond, timeout=15):
                end = time.time() + timeout
                while not cond():
                    assert time.time() < end, f"timed out; log: {[e[0] for e in mod.log]}"
                    await asyncio.sleep(0.02)

            await until(lambda: mod.seen("session.connected"))
            pub = Pub(mod, "m")
            mod.publish(pub)
            await until(lambda: mod.seen("publisher.stream_created"))
            sub = Sub(mod, next(s for s in mod.streams.values() if s.own))
            mod.subscribe(sub)
            await until(lambda: mod.seen("subscriber.connected"))
            # A signal's completion is a future the loop can await.
            await asyncio.wrap_future(mod.send_signal("hello", "all"))
            with pytest.raises(OTError) as e:
                await asyncio.wrap_future(mod.send_signal("hello", "x", to=otsession.Connection("nobody", "", 0, _handle=None)))
            mod.force_mute_all()
            await until(lambda: mod.seen("publisher.mute_forced"))
            mod.disconnect()
            await until(lambda: mod.seen("session.disconnected"))
            assert {e[1] for e in mod.log} == {loop_thread}, "every callback on the loop's thread"
            assert mod.index("session.mute_forced") < mod.index("publisher.mute_forced")
            assert mod.index("publisher.stream_destroyed") < mod.index("session.disconnected")
            sub.close()
            pub.close()
            return e.value
        finally:
            mod.close()
            otsession.detach_asyncio()

    err = asyncio.run(main())
    assert err.code == ErrorCode.INVALID_PARAM  # a connection without a handle is refused before sending


def test_poll_mode_runs_nothing_until_polled_and_signal_refusals_complete(server):
    sid = server.create_session()
    a = Client(server, sid, "a", callback_mode=CallbackMode.POLL)
    b = Client(server, sid, "b")
    try:
        a.connect(server.token(sid, Role.PUBLISHER))
        time.sleep(0.5)
        assert not a.seen("session.connected"), "nothing runs until polled"
        end = time.time() + 10
        while not a.seen("session.connected") and time.time() < end:
            otsession.poll(0.1)
        assert a.seen("session.connected") and all(e[1] == threading.get_ident() for e in a.log)
        connect(b, server, sid, Role.PUBLISHER)
        b_conn = None
        end = time.time() + 10
        while b_conn is None and time.time() < end:
            otsession.poll(0.1)
            b_conn = a.connections.get(b.connection.id)
        assert b_conn is not None
        b.close()
        done = []
        # The server refuses a signal to a connection that left: the completion says so (and the future fails).
        end = time.time() + 10
        while b_conn.id in a.connections and time.time() < end:
            otsession.poll(0.05)
        assert b_conn.id not in a.connections
        future = a.send_signal("x", "y", to=b_conn, on_complete=done.append)
        end = time.time() + 10
        while not future.done() and time.time() < end:
            otsession.poll(0.1)
        assert isinstance(done[0], OTError) and done[0].code == ErrorCode.INVALID_PARAM
        with pytest.raises(OTError):
            future.result(0)
    finally:
        a.close()
        b.close()
