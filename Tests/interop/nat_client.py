"""One client of the NAT test (run in a "private" namespace by test_nat.py): connects to the relayed session,
publishes the test pattern under its name, subscribes to the other client's stream and reads the test pattern's
frame counter back from what it decodes.

    python3 nat_client.py '{"url": ..., "api_key": ..., "session_id": ..., "token": ..., "name": ...,
                            "stun": ["stun:IP:PORT"], "filter_lan": true, "frames": 30, "seconds": 40,
                            "relay_only": false, "tls_ca_file": null}'

(`relay_only` with no `stun`: the only ICE servers are those the session server hands out.)

Prints one JSON line when it has seen `frames` frames, got an error or ran out of time: frame numbers seen,
errors, and the subscriber's RTC stats report. Then keeps publishing until stdin closes."""
import json
import sys
import threading
import time

import otsession


def main() -> None:
    cfg = json.loads(sys.argv[1])
    policy = otsession.ICETransportPolicy.RELAY if cfg.get("relay_only") else otsession.ICETransportPolicy.ALL
    ice = otsession.ICEConfig(filter_out_lan_candidates=cfg.get("filter_lan", False), transport_policy=policy)
    for url in cfg.get("stun", []):
        ice.add_ice_server(url)
    session = otsession.Session(cfg["api_key"], cfg["session_id"], server_url=cfg["url"], ice_config=ice,
                                tls_ca_file=cfg.get("tls_ca_file"))
    lock = threading.Lock()
    done = threading.Event()
    state = {"numbers": [], "sub_errors": [], "pub_errors": [], "session_errors": []}
    subscriber = {}

    def on_frame(frame):
        if frame.test_pattern is None:
            return
        with lock:
            state["numbers"].append(frame.test_pattern[0])
            if len(state["numbers"]) >= cfg.get("frames", 30):
                done.set()

    def on_sub_error(code, message):
        with lock:
            state["sub_errors"].append([code, message])
        done.set()

    def on_stream(stream):
        if stream.name == cfg["name"] or subscriber:
            return
        sub = otsession.Subscriber(stream)
        sub.on("render_frame", on_frame)
        sub.on("error", on_sub_error)
        subscriber["s"] = sub
        session.subscribe(sub)

    session.on("stream_created", on_stream)
    session.on("error", lambda code, msg: (state["session_errors"].append([code, msg]), done.set()))
    connected = threading.Event()
    session.on("connected", connected.set)
    session.connect(cfg["token"])
    if not connected.wait(15):
        state["session_errors"].append([0, "did not connect"])
    publisher = otsession.Publisher(cfg["name"], width=160, height=120, fps=15)
    publisher.on("error", lambda code, msg: state["pub_errors"].append([code, msg]))
    if connected.is_set():
        session.publish(publisher)
        done.wait(cfg.get("seconds", 40))
    with lock:
        result = dict(state)
        result["numbers"] = list(state["numbers"])
    sub = subscriber.get("s")
    result["sub_report"] = json.loads(sub.rtc_stats_report()) if sub else []
    print(json.dumps(result), flush=True)
    sys.stdin.read()  # keep publishing for the other client until the test closes stdin
    if sub:
        sub.close()
    publisher.close()
    session.close()


if __name__ == "__main__":
    main()
