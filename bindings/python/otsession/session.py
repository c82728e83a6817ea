"""Sessions, the embedded server and tokens."""
from __future__ import annotations

import concurrent.futures
import ctypes
import enum
import itertools
import threading
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Union

from ._errors import OTError, check
from ._lib import lib
from .devices import DeviceKind

ID_BUFFER = 256
TOKEN_BUFFER = 32768


class SessionStatus(enum.IntEnum):
    NOT_CONNECTED = 0
    CONNECTED = 1
    CONNECTING = 2
    DISCONNECTING = 3
    FAILED = 4


class Role(enum.IntEnum):
    SUBSCRIBER = 0
    PUBLISHER = 1
    PUBLISHER_ONLY = 2
    MODERATOR = 3


class VideoType(enum.IntEnum):
    CAMERA = 0
    SCREEN = 1
    CUSTOM = 2


class ICETransportPolicy(enum.IntEnum):
    """Which ICE candidates are used (OTSessionICETransportPolicy)."""
    ALL = 0
    RELAY = 1


class ICEIncludeServers(enum.IntEnum):
    """Which ICE servers are used (OTSessionICEIncludeServers)."""
    ALL = 0
    CUSTOM = 1


@dataclass(frozen=True)
class ICEServer:
    """A custom ICE server: "stun:HOST[:PORT]", "turn:HOST[:PORT][?transport=udp|tcp]" or
    "turns:HOST[:PORT][?transport=tcp]" (TURN over TLS); HOST a name, an IPv4 address or [IPv6]; username/credential
    for TURN."""
    url: str
    username: Optional[str] = None
    credential: Optional[str] = None


@dataclass
class ICEConfig:
    """ICE settings of a session (OTSessionICEConfig)."""
    custom_servers: list[ICEServer] = field(default_factory=list)
    transport_policy: ICETransportPolicy = ICETransportPolicy.ALL
    include_servers: ICEIncludeServers = ICEIncludeServers.ALL
    filter_out_lan_candidates: bool = False

    def add_ice_server(self, url: str, username: Optional[str] = None, credential: Optional[str] = None) -> None:
        self.custom_servers.append(ICEServer(url, username, credential))


def _buffer_call(fn, *args, size: int = ID_BUFFER, context: str = "") -> str:
    buf = ctypes.create_string_buffer(size)
    check(fn(*args, buf, size), context)
    return buf.value.decode()


def _role(role) -> int:
    if isinstance(role, str):
        return Role[role.upper().replace("PUBLISHERONLY", "PUBLISHER_ONLY")]
    return int(role)


def token(api_key: str, api_secret: str, session_id: str, role: Role | str = Role.PUBLISHER,
          data: Optional[str] = None, t1: bool = False) -> str:
    """Mints a client token for a session with a project's key and secret."""
    return _buffer_call(lib().fn.ot_token_new, api_key.encode(), api_secret.encode(), session_id.encode(), _role(role),
                        None if data is None else data.encode(), 1 if t1 else 0, size=TOKEN_BUFFER, context="token")


class CallbackMode(enum.Enum):
    """Where a session's callbacks (and its publisher's and subscribers') run, in one order."""
    THREAD = 0  #: a library thread of the session's own
    POLL = 1    #: the thread that calls otsession.poll() (or an asyncio loop, see otsession.attach_asyncio)


@dataclass(frozen=True)
class MuteForcedInfo:
    """What a moderator's force mute changed (OTMuteForcedInfo, with the stream concerned)."""
    active: bool
    #: The one stream muted (force_mute_stream), or None for the whole session (force_mute_all, disable_force_mute).
    stream_id: Optional[str]
    #: A mute all's excluded streams (they keep their audio).
    excluded_stream_ids: tuple[str, ...] = ()

    @staticmethod
    def _from_c(ptr) -> "MuteForcedInfo":
        i = ptr.contents
        excluded = tuple(i.excluded_stream_ids[k].decode() for k in range(i.excluded_stream_count))
        return MuteForcedInfo(bool(i.active), i.stream_id.decode() if i.stream_id else None, excluded)


@dataclass(frozen=True)
class Connection:
    """A client's connection to a session."""
    id: str
    data: str
    creation_time: int
    _handle: Optional[int] = field(default=None, repr=False, compare=False)

    @staticmethod
    def _from_borrowed(ptr) -> "Connection":
        l = lib()
        info = l.decl.structs["ot_connection_info"]()
        check(l.fn.ot_connection_get_info(ptr, ctypes.byref(info)), "connection info")
        copy = l.fn.ot_connection_copy(ptr)
        conn = Connection(info.id.decode(), info.data.decode(), info.creation_time, copy)
        if copy:
            weakref.finalize(conn, l.fn.ot_connection_delete, copy)
        return conn

    @staticmethod
    def _from_copy(ptr) -> "Connection":
        """Takes over a handle the library made for us (released with the object)."""
        conn = Connection._from_borrowed(ptr)
        lib().fn.ot_connection_delete(ptr)
        return conn


@dataclass(frozen=True)
class Stream:
    """A stream published into a session."""
    id: str
    name: str
    connection_id: str
    has_audio: bool
    has_video: bool
    video_type: VideoType
    width: int
    height: int
    creation_time: int
    _handle: Optional[int] = field(default=None, repr=False, compare=False)
    #: Whether the publisher lets this stream's video be dropped for quality (audio fallback).
    audio_fallback_enabled: bool = True
    #: Published by this client (a stream of Session.streams, a publisher's, or a subscriber's own).
    own: bool = False

    @staticmethod
    def _from_borrowed(ptr) -> "Stream":
        l = lib()
        i = l.decl.structs["ot_stream_info"]()
        check(l.fn.ot_stream_get_info(ptr, ctypes.byref(i)), "stream info")
        copy = l.fn.ot_stream_copy(ptr)
        stream = Stream(i.id.decode(), i.name.decode(), i.connection_id.decode(), bool(i.has_audio), bool(i.has_video),
                        VideoType(i.video_type), i.width, i.height, i.creation_time, copy, bool(i.audio_fallback_enabled),
                        bool(i.own))
        if copy:
            weakref.finalize(stream, l.fn.ot_stream_delete, copy)
        return stream

    @staticmethod
    def _from_copy(ptr) -> "Stream":
        """Takes over a handle the library made for us (released with the object)."""
        stream = Stream._from_borrowed(ptr)
        lib().fn.ot_stream_delete(ptr)
        return stream

    @property
    def connection(self) -> Connection:
        """The connection that published the stream, with its data (known even when connection events are suppressed:
        signal or force-disconnect a stream's owner with it)."""
        if not self._handle:
            raise OTError(9001, "this stream has no handle")
        out = ctypes.c_void_p()
        check(lib().fn.ot_stream_get_connection(self._handle, ctypes.byref(out)), "stream connection")
        return Connection._from_copy(out.value)


@dataclass(frozen=True)
class Capabilities:
    can_publish: bool
    can_subscribe: bool
    can_force_mute: bool
    can_force_disconnect: bool


class Server:
    """An embedded session server (REST API and WebSocket signaling on one port, a media router on UDP).

    `tls_cert`/`tls_key`: PEM files for HTTPS and WSS on the port (`reload_tls()` reads them again). `ice_servers`:
    STUN/TURN URLs every client gets when it connects, TURN credentials minted per connection with coturn's
    use-auth-secret `turn_secret` (valid `turn_ttl` seconds). `media_host`/`media_port`: where the router binds;
    `media_advertise`: the IP clients are told for it (1:1 NAT); `media_workers`: UDP sockets with their own IO thread
    (1 to 64, one per core), each session's media going through one of them. Raises OTError(1011) for options the
    library refuses (the reason is logged)."""

    def __init__(self, api_key: str = "100", api_secret: str = "0" * 32, host: str = "127.0.0.1", port: int = 0,
                 tls_cert: Optional[str] = None, tls_key: Optional[str] = None, ice_servers: Iterable[str] = (),
                 turn_secret: Optional[str] = None, turn_ttl: int = 86400, media_host: Optional[str] = None,
                 media_port: int = 0, media_advertise: Optional[str] = None, media_workers: int = 1):
        self.api_key, self.api_secret = api_key, api_secret
        l = lib()
        o = l.decl.structs["ot_server_options"]()
        check(l.fn.ot_server_options_default(ctypes.byref(o)))
        keep = []

        def c_str(v):
            if v is None:
                return None
            b = str(v).encode()
            keep.append(b)
            return b
        o.host, o.port = c_str(host), port
        o.api_key, o.api_secret = c_str(api_key), c_str(api_secret)
        o.tls_cert_file, o.tls_key_file = c_str(tls_cert), c_str(tls_key)
        urls = [c_str(u) for u in ice_servers]
        arr = (ctypes.c_char_p * max(1, len(urls)))(*urls)
        o.ice_server_urls = ctypes.cast(arr, type(o.ice_server_urls)) if urls else None
        o.ice_server_url_count = len(urls)
        o.turn_secret, o.turn_credential_ttl_s = c_str(turn_secret), turn_ttl
        o.media_host, o.media_port, o.media_advertise = c_str(media_host), media_port, c_str(media_advertise)
        if not -2**31 <= media_workers < 2**31:
            raise OTError(1011, "Server: media_workers out of range")
        o.media_workers = media_workers
        self._h = l.fn.ot_server_new_with_options(ctypes.byref(o))
        if not self._h:
            raise OTError(1011, "Server: invalid options")
        self.port = 0

    def start(self) -> int:
        port = ctypes.c_int32()
        check(lib().fn.ot_server_start(self._h, ctypes.byref(port)), "Server.start")
        self.port = port.value
        return self.port

    @property
    def url(self) -> str:
        """Base URL for the REST API and for Session(server_url=...)."""
        return _buffer_call(lib().fn.ot_server_get_url, self._h, context="Server.url")

    def reload_tls(self) -> None:
        """Reads the TLS certificate and key again: new connections get the new certificate, sessions carry on."""
        check(lib().fn.ot_server_reload_tls(self._h), "Server.reload_tls")

    def create_session(self, relayed: bool = False, e2ee: bool = False) -> str:
        """A new session id: routed, or relayed (peer to peer); end-to-end encrypted when `e2ee` (routed only)."""
        return _buffer_call(lib().fn.ot_server_create_session_with_options, self._h, 1 if relayed else 0, 1 if e2ee else 0,
                            context="create_session")

    def session_placement(self, session_id: str) -> tuple[int, int]:
        """(media worker, UDP port) of a session of this server: the router worker its media goes through (sessions
        are spread over `media_workers` by id) and that worker's port. Needs a started server."""
        worker, port = ctypes.c_int32(), ctypes.c_int32()
        check(lib().fn.ot_server_get_session_placement(self._h, session_id.encode(), ctypes.byref(worker), ctypes.byref(port)),
              "Server.session_placement")
        return worker.value, port.value

    def token(self, session_id: str, role: Role | str = Role.PUBLISHER, data: Optional[str] = None, t1: bool = False) -> str:
        return _buffer_call(lib().fn.ot_server_new_token, self._h, session_id.encode(), _role(role),
                            None if data is None else data.encode(), 1 if t1 else 0, size=TOKEN_BUFFER, context="token")

    def close(self) -> None:
        if self._h:
            check(lib().fn.ot_server_delete(self._h), "Server.close")
            self._h = None

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_EVENTS = ("connected", "disconnected", "error", "connection_created", "connection_destroyed", "stream_created",
           "stream_destroyed", "stream_has_audio_changed", "stream_has_video_changed", "stream_video_dimensions_changed",
           "signal_received", "mute_forced", "reconnecting", "reconnected", "status_changed", "device_error")


class Session:
    """A client's session, as OTSession. Override the on_* methods or register
    functions with `session.on("signal_received", fn)`; callbacks run one at a
    time, in one order with its publisher's and subscribers': on a library
    thread, or with `callback_mode=CallbackMode.POLL` on the thread that calls
    otsession.poll() (or in an asyncio loop: otsession.attach_asyncio)."""

    def __init__(self, api_key: str, session_id: str, server_url: Optional[str] = None,
                 connection_events_suppressed: bool = False, relay_only: bool = False,
                 ice_config: Optional[ICEConfig] = None, callback_mode: CallbackMode = CallbackMode.THREAD,
                 connect_timeout: float = 15.0, ping_interval: float = 10.0, tls_ca_file: Optional[str] = None,
                 proxy_url: Optional[str] = None):
        """`server_url`: ws://, wss://, http:// or https:// host[:port] (names are resolved). `ice_config`: custom
        STUN/TURN servers, transport policy, which servers (the session server's too, or only the custom ones), LAN
        filter; `relay_only=True` is a shortcut for its RELAY transport policy. `connect_timeout` and
        `ping_interval` in seconds. `tls_ca_file`: a PEM file of CA certificates to trust instead of the system's
        (a certificate they do not vouch for fails connecting with 9200, TLS_CERTIFICATE_REJECTED). `proxy_url`:
        http://[user:password@]host:port, an HTTP CONNECT proxy for signaling and TURN over TCP/TLS. Raises
        OTError(1011) for settings the library refuses (e.g. a bad URL, a timeout out of range)."""
        l = lib()
        self._listeners: dict[str, list[Callable]] = {e: [] for e in _EVENTS}
        self._signals: dict[int, tuple[concurrent.futures.Future, Optional[Callable]]] = {}
        self._signal_ids = itertools.count(1)
        self._signal_lock = threading.Lock()
        self._signal_done = l.decl.callbacks["ot_signal_completion"](self._make_signal_trampoline())
        self._cb_struct = l.decl.structs["ot_session_callbacks"]()
        self._refs = []
        for name, ctype in self._cb_struct._fields_:
            if name.startswith("on_"):
                ref = ctype(self._make_trampoline(name[3:]))
                self._refs.append(ref)
                setattr(self._cb_struct, name, ref)
        settings = l.decl.structs["ot_session_settings"]()
        check(l.fn.ot_session_settings_default(ctypes.byref(settings)))
        self._url = None if server_url is None else server_url.encode()
        settings.server_url = self._url
        settings.connection_events_suppressed = int(connection_events_suppressed)
        ice = ice_config or ICEConfig()
        servers_t = l.decl.structs["ot_ice_server"] * max(1, len(ice.custom_servers))
        self._ice_strings = []  # kept alive during the call

        def enc(v: Optional[str]):
            if v is None:
                return None
            b = v.encode()
            self._ice_strings.append(b)
            return b
        servers = servers_t()
        for i, srv in enumerate(ice.custom_servers):
            servers[i].url = enc(srv.url)
            servers[i].username = enc(srv.username)
            servers[i].credential = enc(srv.credential)
        settings.ice_servers = ctypes.cast(servers, ctypes.POINTER(l.decl.structs["ot_ice_server"])) if ice.custom_servers else None
        settings.ice_server_count = len(ice.custom_servers)
        settings.ice_transport_policy = int(ICETransportPolicy.RELAY if relay_only else ice.transport_policy)
        settings.ice_include_servers = int(ice.include_servers)
        settings.ice_filter_out_lan_candidates = int(ice.filter_out_lan_candidates)
        settings.connect_timeout_ms = int(connect_timeout * 1000)
        settings.ping_interval_ms = int(ping_interval * 1000)
        settings.callback_mode = CallbackMode(callback_mode).value
        self._tls_ca = None if tls_ca_file is None else str(tls_ca_file).encode()
        self._proxy = None if proxy_url is None else proxy_url.encode()
        settings.tls_ca_file = self._tls_ca
        settings.proxy_url = self._proxy
        status = l.fn.ot_session_settings_validate(ctypes.byref(settings))
        if status != 0:
            raise OTError(status, f"Session: invalid settings (ICE servers: {[s.url for s in ice.custom_servers]})")
        self._h = l.fn.ot_session_new_with_settings(api_key.encode(), session_id.encode(), ctypes.byref(self._cb_struct),
                                                   ctypes.byref(settings))
        if not self._h:
            raise OTError(1011, "Session: api_key and session_id must be non-empty")

    # -- events -------------------------------------------------------------------------------------------

    def on(self, event: str, fn: Callable) -> None:
        """Registers `fn` for an event (same arguments as the on_<event> method)."""
        if event not in self._listeners:
            raise ValueError(f"unknown event {event!r}; events: {', '.join(_EVENTS)}")
        self._listeners[event].append(fn)

    def on_connected(self) -> None: ...
    def on_disconnected(self) -> None: ...
    def on_error(self, code: int, message: str) -> None: ...
    def on_connection_created(self, connection: Connection) -> None: ...
    def on_connection_destroyed(self, connection: Connection) -> None: ...
    def on_stream_created(self, stream: Stream) -> None: ...
    def on_stream_destroyed(self, stream: Stream) -> None: ...
    def on_stream_has_audio_changed(self, stream: Stream, has_audio: bool) -> None: ...
    def on_stream_has_video_changed(self, stream: Stream, has_video: bool) -> None: ...
    def on_stream_video_dimensions_changed(self, stream: Stream, width: int, height: int) -> None: ...
    def on_signal_received(self, type: str, data: str, connection: Optional[Connection]) -> None: ...
    def on_mute_forced(self, info: MuteForcedInfo) -> None:
        """A moderator muted one stream (info.stream_id), all but info.excluded_stream_ids (no stream id), or ended a
        mute all (not info.active). The publishers concerned get their own on_mute_forced."""
    def on_status_changed(self, status: SessionStatus) -> None:
        """`status` changed; comes before the callbacks of the change."""
    def on_reconnecting(self) -> None:
        """The connection dropped and is being resumed (status stays CONNECTED; `reconnecting` is True)."""
    def on_reconnected(self) -> None:
        """Resumed with the same connection; changes meanwhile follow as created/destroyed events."""
    def on_device_error(self, kind: DeviceKind, code: int, message: str) -> None:
        """The speaker (set_speaker) could not be opened (9100) or was lost (9101); playout goes on, discarded."""

    def _make_trampoline(self, event: str):
        convert = {
            "error": lambda code, msg: (int(code), msg.decode(errors="replace")),
            "connection_created": lambda c: (Connection._from_borrowed(c),),
            "connection_destroyed": lambda c: (Connection._from_borrowed(c),),
            "stream_created": lambda s: (Stream._from_borrowed(s),),
            "stream_destroyed": lambda s: (Stream._from_borrowed(s),),
            "stream_has_audio_changed": lambda s, v: (Stream._from_borrowed(s), bool(v)),
            "stream_has_video_changed": lambda s, v: (Stream._from_borrowed(s), bool(v)),
            "stream_video_dimensions_changed": lambda s, w, h: (Stream._from_borrowed(s), w, h),
            "signal_received": lambda t, d, c: (t.decode(errors="replace"), d.decode(errors="replace"),
                                                Connection._from_borrowed(c) if c else None),
            "mute_forced": lambda p: (MuteForcedInfo._from_c(p),),
            "status_changed": lambda st: (SessionStatus(st),),
            "device_error": lambda kind, code, msg: (DeviceKind(kind), int(code), msg.decode(errors="replace")),
        }.get(event, lambda: ())
        this = weakref.ref(self)

        def trampoline(_session, _user_data, *args):
            s = this()
            if s is None:
                return
            try:
                values = convert(*args)
                getattr(s, "on_" + event)(*values)
                for fn in list(s._listeners[event]):
                    fn(*values)
            except Exception:  # never let an exception unwind into C
                traceback.print_exc()
        return trampoline

    # -- calls --------------------------------------------------------------------------------------------

    def _handle(self):
        if not self._h:
            raise OTError(9001, "the session is closed")
        return self._h

    def connect(self, token: str) -> None:
        """Starts connecting; on_connected or on_error follows."""
        check(lib().fn.ot_session_connect(self._handle(), token.encode()), "connect")

    def disconnect(self) -> None:
        check(lib().fn.ot_session_disconnect(self._handle()), "disconnect")

    def set_encryption_secret(self, secret: str) -> None:
        """Sets the end-to-end encryption secret (8-256 characters) for publishers and subscribers created afterwards;
        raises OTError 1030 (INVALID_ENCRYPTION_SECRET) otherwise. See docs/e2ee.md."""
        check(lib().fn.ot_session_set_encryption_secret(self._handle(), secret.encode()), "set_encryption_secret")

    def set_speaker(self, sink: Optional[str] = None) -> None:
        """Plays subscribers' audio on a PulseAudio sink (a Device.id of devices(DeviceKind.SPEAKER); None: the system
        default, followed when it changes) instead of discarding it. Call before subscribing (OTError 1015 while
        audio plays); failures come to on_device_error."""
        check(lib().fn.ot_session_set_speaker(self._handle(), None if sink is None else sink.encode()), "set_speaker")

    @property
    def is_end_to_end_encrypted(self) -> bool:
        """Whether the connected session is end-to-end encrypted."""
        v = ctypes.c_int32()
        check(lib().fn.ot_session_is_end_to_end_encrypted(self._handle(), ctypes.byref(v)), "is_end_to_end_encrypted")
        return bool(v.value)

    @property
    def status(self) -> SessionStatus:
        v = ctypes.c_int32()
        check(lib().fn.ot_session_get_status(self._handle(), ctypes.byref(v)), "status")
        return SessionStatus(v.value)

    @property
    def reconnecting(self) -> bool:
        """True between on_reconnecting and on_reconnected (or the on_disconnected of a failed reconnection)."""
        v = ctypes.c_int()
        check(lib().fn.ot_session_is_reconnecting(self._handle(), ctypes.byref(v)), "reconnecting")
        return bool(v.value)

    @property
    def session_id(self) -> str:
        return _buffer_call(lib().fn.ot_session_get_id, self._handle(), context="session_id")

    @property
    def connection(self) -> Optional[Connection]:
        """This client's connection, once connected."""
        p = lib().fn.ot_session_get_connection(self._handle())
        return Connection._from_borrowed(p) if p else None

    @property
    def capabilities(self) -> Capabilities:
        c = lib().decl.structs["ot_session_capabilities"]()
        check(lib().fn.ot_session_get_capabilities(self._handle(), ctypes.byref(c)), "capabilities")
        return Capabilities(bool(c.can_publish), bool(c.can_subscribe), bool(c.can_force_mute), bool(c.can_force_disconnect))

    def send_signal(self, type: str, data: str = "", to: Optional[Connection] = None, retry_after_reconnect: bool = True,
                    on_complete: Optional[Callable[[Optional[OTError]], None]] = None) -> concurrent.futures.Future:
        """Sends a signal to everyone, or to one connection. While reconnecting it is queued and sent once
        reconnected; with retry_after_reconnect=False it is refused instead (OTError 1010). Checks that fail at once
        raise; the server's verdict comes later: the returned future resolves to None or fails with OTError (1015 rate
        limit, 1011 no such connection, 1022 lost with the connection), and `on_complete(error or None)` is called, in
        order with the session's callbacks (in asyncio: `await asyncio.wrap_future(future)`)."""
        if to is not None and not to._handle:
            raise OTError(1011, "send_signal: that connection has no handle")
        opts = lib().decl.structs["ot_signal_options"]()
        check(lib().fn.ot_signal_options_default(ctypes.byref(opts)))
        opts.retry_after_reconnect = int(retry_after_reconnect)
        future: concurrent.futures.Future = concurrent.futures.Future()
        key = next(self._signal_ids)
        with self._signal_lock:
            self._signals[key] = (future, on_complete)
        opts.on_complete = self._signal_done
        opts.user_data = key
        status = lib().fn.ot_session_send_signal_with_options(self._handle(), type.encode(), data.encode(),
                                                              to._handle if to else None, ctypes.byref(opts))
        if status != 0:
            with self._signal_lock:
                self._signals.pop(key, None)
            check(status, "send_signal")
        return future

    def _make_signal_trampoline(self):
        this = weakref.ref(self)

        def done(_session, user_data, status, message):
            s = this()
            if s is None:
                return
            with s._signal_lock:
                future, callback = s._signals.pop(user_data or 0, (None, None))
            if future is None:
                return
            error = OTError(status, f"signal: {message.decode(errors='replace')}") if status != 0 else None
            try:
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
                if callback is not None:
                    callback(error)
            except Exception:  # never let an exception unwind into C
                traceback.print_exc()
        return done

    def force_mute_all(self, excluded: Iterable[Union[str, Stream]] = ()) -> None:
        """Mutes every stream's audio but the excluded ones (given as streams or ids), this client's own included:
        their publishers stop sending audio and get on_mute_forced; streams published meanwhile start muted until
        disable_force_mute()."""
        ids = [(s.id if isinstance(s, Stream) else str(s)).encode() for s in excluded]
        arr = (ctypes.c_char_p * max(1, len(ids)))(*ids)
        check(lib().fn.ot_session_force_mute_all(self._handle(), arr, len(ids)), "force_mute_all")

    def force_mute_stream(self, stream_id: str) -> None:
        check(lib().fn.ot_session_force_mute_stream(self._handle(), stream_id.encode()), "force_mute_stream")

    def disable_force_mute(self) -> None:
        check(lib().fn.ot_session_disable_force_mute(self._handle()), "disable_force_mute")

    def force_disconnect(self, connection: Connection) -> None:
        if not connection._handle:
            raise OTError(1011, "force_disconnect: that connection has no handle")
        check(lib().fn.ot_session_force_disconnect(self._handle(), connection._handle), "force_disconnect")

    @property
    def streams(self) -> dict[str, Stream]:
        """The session's streams by id (as OTSession.streams): other clients' and this client's own (Stream.own)."""
        return {s.id: s for s in self._list("ot_session_get_streams", Stream)}

    @property
    def connections(self) -> dict[str, Connection]:
        """Other clients' connections by id (empty when connection events are suppressed: use Stream.connection)."""
        return {c.id: c for c in self._list("ot_session_get_connections", Connection)}

    def _list(self, fn: str, kind):
        f = getattr(lib().fn, fn)
        while True:
            count = ctypes.c_size_t()
            status = f(self._handle(), None, 0, ctypes.byref(count))
            if status == 0:
                return []
            if status != lib().constants["OT_ERR_BUFFER_TOO_SMALL"]:
                check(status, fn)
            arr = (ctypes.c_void_p * count.value)()
            status = f(self._handle(), arr, count.value, ctypes.byref(count))
            if status == 0:
                return [kind._from_copy(arr[i]) for i in range(count.value)]
            if status != lib().constants["OT_ERR_BUFFER_TOO_SMALL"]:  # it grew meanwhile: ask again
                check(status, fn)

    @property
    def relayed(self) -> bool:
        """Whether the connected session is relayed (peer to peer) rather than routed (through the media router)."""
        v = ctypes.c_int()
        check(lib().fn.ot_session_is_relayed(self._handle(), ctypes.byref(v)), "relayed")
        return bool(v.value)

    def report_issue(self, description: str) -> str:
        """Reports an issue; returns the id the server logged it under."""
        return _buffer_call(lib().fn.ot_session_report_issue, self._handle(), description.encode(), context="report_issue")

    def close(self) -> None:
        """Disconnects and releases the session; no callback runs after this returns."""
        if self._h:
            h, self._h = self._h, None
            check(lib().fn.ot_session_delete(h), "close")

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def poll(timeout: float = 0.0) -> int:
    """Runs the callbacks of poll-mode sessions (CallbackMode.POLL) on this thread: waits up to `timeout` seconds for
    one (None: without limit), then runs every one waiting; returns how many ran."""
    ran = ctypes.c_size_t()
    ms = -1 if timeout is None else max(0, int(timeout * 1000))
    check(lib().fn.ot_poll(ms, ctypes.byref(ran)), "poll")
    return ran.value


def poll_fd() -> int:
    """A file descriptor readable while poll-mode callbacks wait (for select/epoll/asyncio); owned by the library."""
    fd = ctypes.c_int32()
    check(lib().fn.ot_poll_get_fd(ctypes.byref(fd)), "poll_fd")
    return fd.value


def attach_asyncio(loop=None) -> None:
    """Runs poll-mode callbacks in an asyncio event loop (`loop.add_reader` on poll_fd()): they run on the loop's
    thread, between its other work. detach_asyncio() undoes it."""
    import asyncio
    loop = loop or asyncio.get_running_loop()
    loop.add_reader(poll_fd(), poll, 0.0)


def detach_asyncio(loop=None) -> None:
    import asyncio
    loop = loop or asyncio.get_running_loop()
    loop.remove_reader(poll_fd())
