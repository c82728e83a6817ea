"""The official `opentok` Python SDK (PyPI) drives our ot-server; clients speak docs/protocol.md
through a standard-library WebSocket client. Run: python3 -m pytest Tests/interop"""
import base64
import json
import time

import jwt as pyjwt
import pytest
from opentok import Client, MediaModes, Roles
from opentok.exceptions import AuthError, ForceDisconnectError

from plumbing import stop_process
from wsclient import Closed, SignalingClient


@pytest.fixture(scope="module")
def sdk(ot_server):
    return Client(ot_server.key, ot_server.secret, api_url=ot_server.api_url)


def join(server, sid, token, suppressed=False):
    c = SignalingClient(server.port)
    m = c.connect(server.key, sid, token, suppressed)
    assert m["type"] == "connected", m
    c.info = m
    c.cid = m["connection"]["id"]
    return c


def refused(server, sid, token):
    c = SignalingClient(server.port)
    m = c.connect(server.key, sid, token)
    assert m["type"] == "error", m
    with pytest.raises(Closed):
        c.recv(timeout=5)
    return m["code"]


def publish(c, name="cam", **kw):
    rid = c.request({"type": "publish", "stream": dict({"name": name, "hasAudio": True, "hasVideo": True,
                                                        "videoType": "camera", "width": 640, "height": 480}, **kw)})
    r = c.reply(rid)
    assert "code" not in r, r
    return r["stream"]


def test_create_session_formats(sdk, ot_server):
    routed = sdk.create_session(media_mode=MediaModes.routed)
    relayed = sdk.create_session(media_mode=MediaModes.relayed)
    e2ee = sdk.create_session(media_mode=MediaModes.routed, e2ee=True)
    for s, flags in ((routed, "R"), (relayed, "P"), (e2ee, "RE")):
        sid = s.session_id
        assert sid.startswith("1_") and len(sid) <= 255
        assert all(ch.isalnum() or ch in "_-" for ch in sid)
        fields = base64.urlsafe_b64decode(sid[2:] + "=" * (-len(sid[2:]) % 4)).decode().split("~")
        assert fields[1] == ot_server.key
        assert fields[5] == flags
    c = join(ot_server, relayed.session_id, sdk.generate_token(relayed.session_id))
    assert c.info["relayed"] is True and c.info["e2ee"] is False
    c2 = join(ot_server, e2ee.session_id, sdk.generate_token(e2ee.session_id))
    assert c2.info["e2ee"] is True and c2.info["relayed"] is False
    c.close(); c2.close()


def test_bad_credentials_are_refused(ot_server):
    wrong = Client(ot_server.key, "0" * 40, api_url=ot_server.api_url)
    with pytest.raises(Exception) as e:
        wrong.create_session()
    assert "invalid credentials" in str(e.value) or isinstance(e.value, AuthError)


def test_sdk_tokens_jwt_and_t1_connect(sdk, ot_server):
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    jwt_token = sdk.generate_token(sid, role=Roles.moderator, data="name=ann", initial_layout_class_list=["focus", "big"])
    t1_token = sdk.generate_token(sid, role=Roles.subscriber, data="name=bo b", use_jwt=False)
    assert jwt_token.startswith("eyJ") and t1_token.startswith("T1==")
    a = join(ot_server, sid, jwt_token)
    b = join(ot_server, sid, t1_token)
    assert a.info["role"] == "moderator" and a.info["connection"]["data"] == "name=ann"
    assert b.info["role"] == "subscriber" and b.info["connection"]["data"] == "name=bo b"
    assert [c["id"] for c in b.info["connections"]] == [a.cid]
    created = a.wait_for(lambda m: m["type"] == "connectionCreated")
    assert created["connection"]["id"] == b.cid
    for role in (Roles.publisher, Roles.publisher_only):
        c = join(ot_server, sid, sdk.generate_token(sid, role=role))
        assert c.info["role"] == role.value
        c.close()
    a.close(); b.close()


def test_refused_tokens(sdk, ot_server):
    sid = sdk.create_session().session_id
    other = sdk.create_session().session_id
    good = sdk.generate_token(sid)
    head, body, sig = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["role"] = "moderator"
    forged_body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert refused(ot_server, sid, f"{head}.{forged_body}.{sig}") == 1004          # tampered claims
    assert refused(ot_server, sid, good[:-2] + ("AA" if good[-2:] != "AA" else "BB")) == 1004  # tampered signature
    now = int(time.time())
    expired = pyjwt.encode({"iss": ot_server.key, "ist": "project", "iat": now - 100, "exp": now - 10,
                            "session_id": sid, "role": "publisher", "scope": "session.connect", "nonce": 1},
                           ot_server.secret, algorithm="HS256")
    assert refused(ot_server, sid, expired) == 1004
    assert refused(ot_server, sid, sdk.generate_token(other)) == 1004                # another session
    wrong_key = Client(ot_server.key, "ab" * 20, api_url=ot_server.api_url)
    assert refused(ot_server, sid, wrong_key.generate_token(sid)) == 1004             # another secret
    t1 = sdk.generate_token(sid, use_jwt=False)
    raw = base64.b64decode(t1[4:]).decode().replace("role=publisher", "role=moderator")
    assert refused(ot_server, sid, "T1==" + base64.b64encode(raw.encode()).decode()) == 1004
    assert refused(ot_server, "1_bm90LWEtc2Vzc2lvbg", good) == 1005                   # unknown session


def test_signals_from_rest_and_clients(sdk, ot_server):
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    a = join(ot_server, sid, sdk.generate_token(sid))
    b = join(ot_server, sid, sdk.generate_token(sid))
    sdk.send_signal(sid, {"type": "chat", "data": "from the server"})
    for c in (a, b):
        m = c.wait_for(lambda m: m["type"] == "signal")
        assert m["signalType"] == "chat" and m["data"] == "from the server" and "from" not in m
    sdk.send_signal(sid, {"type": "dm", "data": "only b"}, b.cid)
    m = b.wait_for(lambda m: m["type"] == "signal")
    assert (m["signalType"], m["data"]) == ("dm", "only b")
    rid = a.request({"type": "signal", "signalType": "hello", "data": "from a", "to": b.cid})
    assert "code" not in a.reply(rid)
    m = b.wait_for(lambda m: m["type"] == "signal")
    assert m["from"] == a.cid and m["data"] == "from a"
    for bad, code in (({"signalType": "x" * 129, "data": ""}, 1414), ({"signalType": "a b", "data": ""}, 1461),
                      ({"signalType": "ok", "data": "x" * 8193}, 1413)):
        rid = a.request(dict({"type": "signal"}, **bad))
        assert a.reply(rid)["code"] == code
    with pytest.raises(Exception):
        sdk.send_signal(sid, {"type": "ok", "data": "x" * 8193})
    a.close(); b.close()


def test_subscriber_cannot_signal_or_publish_even_raw(sdk, ot_server):
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    sub = join(ot_server, sid, sdk.generate_token(sid, role=Roles.subscriber))
    po = join(ot_server, sid, sdk.generate_token(sid, role=Roles.publisher_only))
    pub = join(ot_server, sid, sdk.generate_token(sid, role=Roles.publisher))
    stream = publish(pub)
    assert sub.reply(sub.request({"type": "signal", "signalType": "x", "data": "y"}))["code"] == 1535
    assert po.reply(po.request({"type": "signal", "signalType": "x", "data": "y"}))["code"] == 1535
    assert sub.reply(sub.request({"type": "publish", "stream": {"name": "", "hasAudio": True, "hasVideo": True,
                                                                "videoType": "camera", "width": 1, "height": 1}}))["code"] == 1500
    assert po.reply(po.request({"type": "subscribe", "streamId": stream["id"]}))["code"] == 1535
    assert "code" not in sub.reply(sub.request({"type": "subscribe", "streamId": stream["id"]}))
    for c in (sub, pub):
        assert c.reply(c.request({"type": "forceMuteAll", "active": True, "excludedStreams": []}))["code"] == 1535
        assert c.reply(c.request({"type": "forceDisconnect", "connectionId": po.cid}))["code"] == 1520
    # Nobody received a signal from the subscriber.
    with pytest.raises(TimeoutError):
        pub.wait_for(lambda m: m["type"] == "signal", timeout=0.5)
    for c in (sub, po, pub):
        c.close()


def test_force_disconnect_and_streams(sdk, ot_server):
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    a = join(ot_server, sid, sdk.generate_token(sid))
    victim = join(ot_server, sid, sdk.generate_token(sid))
    s1 = publish(a, "alpha")
    s2 = publish(victim, "beta", videoType="screen")
    streams = sdk.list_streams(sid)
    assert streams.count == 2
    assert {s.id for s in streams.items} == {s1["id"], s2["id"]}
    got = sdk.get_stream(sid, s2["id"])
    assert (got.id, got.name, got.videoType) == (s2["id"], "beta", "screen")
    sdk.set_stream_class_lists(sid, [{"id": s1["id"], "layoutClassList": ["full", "focus"]}])
    assert sdk.get_stream(sid, s1["id"]).layoutClassList == ["full", "focus"]

    sdk.force_disconnect(sid, victim.cid)
    m = victim.wait_for(lambda m: m["type"] == "disconnected")
    assert m["reason"] == "forceDisconnected"
    with pytest.raises(Closed):
        victim.wait_for(lambda m: False, timeout=5)
    order = []
    while len(order) < 2:
        m = a.wait_for(lambda m: m["type"] in ("streamDestroyed", "connectionDestroyed"))
        order.append((m["type"], m.get("streamId") or m.get("connectionId")))
    assert order == [("streamDestroyed", s2["id"]), ("connectionDestroyed", victim.cid)]
    assert sdk.list_streams(sid).count == 1
    with pytest.raises(ForceDisconnectError):
        sdk.force_disconnect(sid, victim.cid)
    a.close()


def test_force_mute(sdk, ot_server):
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    a = join(ot_server, sid, sdk.generate_token(sid))
    b = join(ot_server, sid, sdk.generate_token(sid))
    sa, sb = publish(a, "a"), publish(b, "b")
    sdk.mute_all(sid, [sb["id"]])
    for c in (a, b):
        m = c.wait_for(lambda m: m["type"] == "muteForced")
        assert m["active"] is True and "streamId" not in m and m["excludedStreamIds"] == [sb["id"]]
    m = b.wait_for(lambda m: m["type"] == "streamChanged")
    assert m["stream"]["id"] == sa["id"] and m["property"] == "hasAudio" and m["stream"]["hasAudio"] is False
    late = publish(a, "late")
    assert late["hasAudio"] is False
    sdk.disable_force_mute(sid)
    for c in (a, b):
        assert c.wait_for(lambda m: m["type"] == "muteForced")["active"] is False
    assert publish(a, "after")["hasAudio"] is True
    sdk.mute_stream(sid, sb["id"])
    for c in (a, b):
        m = c.wait_for(lambda m: m["type"] == "muteForced")
        assert m["active"] is True and m["streamId"] == sb["id"]
    a.close(); b.close()


def test_resume_after_dropped_socket(sdk, ot_server):
    sid = sdk.create_session(media_mode=MediaModes.routed).session_id
    token = sdk.generate_token(sid)
    a = join(ot_server, sid, token)
    b = join(ot_server, sid, sdk.generate_token(sid))
    a.abort()
    time.sleep(0.2)
    sdk.send_signal(sid, {"type": "missed", "data": "while away"}, a.cid)
    back = SignalingClient(ot_server.port)
    m = back.connect(ot_server.key, sid, token, resumeConnectionId=a.cid, resumeToken=a.info["resumeToken"])
    assert m["type"] == "connected" and m["resumed"] is True and m["connection"]["id"] == a.cid
    assert back.wait_for(lambda m: m["type"] == "signal")["data"] == "while away"
    with pytest.raises(TimeoutError):
        b.wait_for(lambda m: m["type"] == "connectionDestroyed", timeout=0.5)
    # Wrong resume token: refused.
    bad = SignalingClient(ot_server.port)
    assert bad.connect(ot_server.key, sid, token, resumeConnectionId=a.cid, resumeToken="0" * 32)["code"] == 1022
    # Without resuming, the server gives up after the grace period (2 s for this server).
    back.abort()
    m = b.wait_for(lambda m: m["type"] == "connectionDestroyed", timeout=10)
    assert m["connectionId"] == a.cid and m["reason"] == "networkDisconnected"
    b.close()


def test_report_issue(sdk, ot_server):
    sid = sdk.create_session().session_id
    a = join(ot_server, sid, sdk.generate_token(sid))
    r = a.reply(a.request({"type": "reportIssue", "issueId": "issue-0123456789", "description": "echo"}))
    assert r["issueId"] == "issue-0123456789"
    r = a.reply(a.request({"type": "reportIssue", "issueId": "", "description": "no id"}))
    assert len(r["issueId"]) == 36
    a.close()


def test_cli_keygen_token_and_config(ot_server, tmp_path):
    import subprocess
    out = subprocess.run([ot_server.binary, "keygen"], check=True, capture_output=True, text=True).stdout.strip()
    key, secret = out.split(":")
    assert key.isdigit() and len(secret) == 40 and all(c in "0123456789abcdef" for c in secret)
    sid = Client(ot_server.key, ot_server.secret, api_url=ot_server.api_url).create_session().session_id
    tok = subprocess.run([ot_server.binary, "token", "--project", f"{ot_server.key}:{ot_server.secret}", "--session", sid,
                          "--role", "moderator", "--data", "cli"], check=True, capture_output=True, text=True).stdout.strip()
    claims = pyjwt.decode(tok, ot_server.secret, algorithms=["HS256"])
    assert (claims["session_id"], claims["role"], claims["connection_data"], claims["iss"]) == (sid, "moderator", "cli", ot_server.key)
    c = join(ot_server, sid, tok)
    assert c.info["role"] == "moderator"
    c.close()
    t1 = subprocess.run([ot_server.binary, "token", "--project", f"{ot_server.key}:{ot_server.secret}", "--session", sid, "--t1"],
                        check=True, capture_output=True, text=True).stdout.strip()
    assert t1.startswith("T1==")
    join(ot_server, sid, t1).close()
    bad = subprocess.run([ot_server.binary, "--project", "1:abc.key"], capture_output=True, text=True)
    assert bad.returncode != 0 and "Vonage" in bad.stderr
    # A config file with two projects: both can create sessions.
    import socket as s_
    import time as t_
    cfg = tmp_path / "projects.conf"
    cfg.write_text(f"# projects\n{key}:{secret}\n\n{ot_server.key}:{ot_server.secret}\n")
    with s_.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([ot_server.binary, "--listen", f"127.0.0.1:{port}", "--config", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "listening" in proc.stdout.readline()
        for k, sec in ((key, secret), (ot_server.key, ot_server.secret)):
            assert Client(k, sec, api_url=f"http://127.0.0.1:{port}").create_session().session_id.startswith("1_")
    finally:
        stop_process(proc)
