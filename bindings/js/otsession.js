// otsession.js: the browser client of libotsession's session server (docs/js.md).
//
// One ES module, no build step and no dependency. The server serves it at GET /js/otsession.js. The API is
// shaped like OpenTok.js (OT.initSession, OT.initPublisher, session.connect/publish/subscribe/signal, the same
// event names); the wire protocol is the one in docs/protocol.md: JSON over a WebSocket at /v2/signaling and one
// RTCPeerConnection per publisher-to-router link and per subscriber.

export const version = "0.1.0";

const SIGNALING_PATH = "/v2/signaling";
/** Delays before successive reconnection attempts; the last one repeats (docs/protocol.md, "Client reconnection"). */
const RECONNECT_BACKOFF_MS = [100, 250, 500, 1000, 2000];
/** How long one reconnection attempt (TCP, WebSocket upgrade, resume) may take. */
const RECONNECT_ATTEMPT_MS = 4000;
/** The grace period when the server announces none. */
const DEFAULT_GRACE_MS = 10000;
/** How long the first `connect` may take. */
const CONNECT_TIMEOUT_MS = 15000;
/** Liveness: after this long without a message the page sends a `ping` request; after three times as long the
 * connection counts as dropped (as the native client's WebSocket pings, docs/protocol.md "Pings"). */
const DEFAULT_PING_INTERVAL_MS = 10000;
/** A subscriber or publisher whose media does not connect (or reconnect) within this time fails. */
const MEDIA_TIMEOUT_MS = 30000;
const MAX_SIGNAL_TYPE = 128;
const MAX_SIGNAL_DATA = 8192;

// ---------------------------------------------------------------------------------------------------------------
// Errors and events

const ERROR_NAMES = {
  1004: "OT_AUTHENTICATION_ERROR", 1005: "OT_INVALID_SESSION_ID", 1006: "OT_CONNECT_FAILED",
  1010: "OT_NOT_CONNECTED", 1011: "OT_INVALID_PARAMETER", 1015: "OT_RATE_LIMIT_EXCEEDED",
  1022: "OT_CONNECTION_DROPPED", 1027: "OT_CONNECTION_LIMIT_EXCEEDED", 1413: "OT_SIGNAL_DATA_TOO_LONG",
  1414: "OT_SIGNAL_TYPE_TOO_LONG", 1461: "OT_INVALID_SIGNAL_TYPE", 1500: "OT_UNABLE_TO_PUBLISH",
  1535: "OT_PERMISSION_DENIED", 1600: "OT_STREAM_CREATE_FAILED", 1604: "OT_STREAM_NOT_FOUND",
  1605: "OT_STREAM_LIMIT_EXCEEDED", 1031: "OT_ENCRYPTION_SECRET_MISSING", 2000: "OT_NO_MEDIA_ROUTER",
};

/** An error with an OpenTok code (`code`), a name like OpenTok.js's (`name`) and a message. */
export class OTError extends Error {
  constructor(code, message) {
    super(message || ERROR_NAMES[code] || `error ${code}`);
    this.code = code;
    this.name = ERROR_NAMES[code] || "OT_ERROR";
  }
}

/** An event: `type`, `target`, the event's own fields, and `preventDefault()` for events with a default action. */
export class Event {
  #prevented = false;
  constructor(type, target, fields = {}) {
    Object.assign(this, fields);
    this.type = type;
    this.target = target;
  }
  preventDefault() { this.#prevented = true; }
  isDefaultPrevented() { return this.#prevented; }
}

/** `on`, `once` and `off` as OpenTok.js has them: a type (or space-separated types) and a handler, or an object
 * of type → handler; an optional `context` the handler is called with. */
class Emitter {
  #handlers = new Map();

  on(type, handler, context) {
    if (type && typeof type === "object") {
      for (const [t, h] of Object.entries(type)) this.on(t, h, handler);
      return this;
    }
    if (typeof handler !== "function") throw new OTError(1011, "on() needs a function");
    for (const t of String(type).split(/\s+/).filter(Boolean)) {
      if (!this.#handlers.has(t)) this.#handlers.set(t, []);
      this.#handlers.get(t).push({ handler, context, once: false });
    }
    return this;
  }

  once(type, handler, context) {
    this.on(type, handler, context);
    for (const t of String(type).split(/\s+/).filter(Boolean)) this.#handlers.get(t).at(-1).once = true;
    return this;
  }

  off(type, handler, context) {
    if (type === undefined) { this.#handlers.clear(); return this; }
    if (type && typeof type === "object") {
      for (const [t, h] of Object.entries(type)) this.off(t, h, handler);
      return this;
    }
    for (const t of String(type).split(/\s+/).filter(Boolean)) {
      const list = this.#handlers.get(t);
      if (!list) continue;
      this.#handlers.set(t, handler ? list.filter((h) => h.handler !== handler || (context !== undefined && h.context !== context)) : []);
    }
    return this;
  }

  /** Calls the handlers of `event.type` (a handler's exception is logged, never thrown into the library), then the
   * default action unless a handler prevented it. */
  dispatchEvent(event, defaultAction) { return this._dispatch(event.type, event, defaultAction); }

  /** Calls the handlers registered for `name` with `event`, whose own type may differ: a typed signal's event is
   * "signal:<type>" for both its `signal:<type>` and its `signal` handlers, as in OpenTok.js. */
  _dispatch(name, event, defaultAction) {
    const list = this.#handlers.get(name);
    if (list && list.length) {
      this.#handlers.set(name, list.filter((h) => !h.once));
      for (const h of list) {
        try { h.handler.call(h.context ?? this, event); } catch (e) { console.error(`otsession.js: ${name} handler threw`, e); }
      }
    }
    if (defaultAction && !event.isDefaultPrevented()) defaultAction();
    return event;
  }

  _emit(type, fields, defaultAction) { return this.dispatchEvent(new Event(type, this, fields), defaultAction); }

}

// ---------------------------------------------------------------------------------------------------------------
// Small helpers

function uuid() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));  // insecure contexts (http on a LAN address) lack randomUUID
  b[6] = (b[6] & 0x0f) | 0x40; b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Calls an OpenTok-style completion handler with the error (or undefined) and the value, then settles. */
function complete(promise, callback) {
  if (typeof callback !== "function") return promise;
  promise.then((v) => callback(undefined, v), (e) => callback(e));
  return promise.catch(() => {});
}

function asError(e, code) { return e instanceof OTError ? e : new OTError(code, e?.message || String(e)); }

/** The `ws(s)://…/v2/signaling` URL from a server URL (`http(s)://host:port`, `ws(s)://host:port[/v2/signaling]`),
 * or from the address this module was loaded from. */
function signalingURL(serverUrl) {
  const base = serverUrl || new URL(import.meta.url).origin;
  const u = new URL(base, globalThis.location?.href);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  if (u.protocol !== "ws:" && u.protocol !== "wss:") throw new OTError(1011, `bad server URL ${serverUrl}`);
  if (u.pathname === "/" || u.pathname === "") u.pathname = SIGNALING_PATH;
  u.hash = "";
  return u.href;
}

function resolveElement(target) {
  if (target === undefined || target === null) return null;
  if (typeof target === "string") return document.getElementById(target);
  return target;
}

/** A container `div` with a `video` inside, placed relative to `target` as OpenTok.js's `insertMode` says. */
function makeElement(target, className, props, muted) {
  const el = document.createElement("div");
  el.className = className;
  const w = props.width ?? 320, h = props.height ?? 240;
  el.style.width = typeof w === "number" ? `${w}px` : w;
  el.style.height = typeof h === "number" ? `${h}px` : h;
  el.style.position = "relative";
  el.style.overflow = "hidden";
  el.style.background = "#000";
  const video = document.createElement("video");
  video.autoplay = true;
  video.playsInline = true;
  video.muted = muted;
  video.style.width = "100%";
  video.style.height = "100%";
  video.style.objectFit = props.fitMode === "contain" ? "contain" : "cover";
  el.appendChild(video);
  const t = resolveElement(target);
  const mode = props.insertMode || "replace";
  if (!t) document.body.appendChild(el);
  else if (mode === "append") t.appendChild(el);
  else if (mode === "before") t.parentNode.insertBefore(el, t);
  else if (mode === "after") t.parentNode.insertBefore(el, t.nextSibling);
  else { if (!t.id) t.replaceWith(el); else { el.id = t.id; t.replaceWith(el); } }
  return { element: el, video };
}

/** The BUNDLE-tag mid of a session description (where JSEP puts candidates), else its first mid. */
function bundleMid(sdp) {
  const g = /^a=group:BUNDLE ([^\s]+)/m.exec(sdp || "");
  if (g) return g[1];
  const m = /^a=mid:(\S+)/m.exec(sdp || "");
  return m ? m[1] : "0";
}

/** RTCPeerConnection settings: the session server's ICE servers (`provided`, from `connected`, with this connection's
 * TURN credentials) unless `iceConfig.includeServers` is "custom", then the custom servers. */
function peerConfig(options, provided) {
  const ice = options.iceConfig || {};
  const custom = (ice.customServers || []).map((s) => ({ urls: s.urls, username: s.username, credential: s.credential }));
  return {
    iceServers: [...(ice.includeServers === "custom" ? [] : (provided || [])), ...custom],
    iceTransportPolicy: ice.transportPolicy === "relay" ? "relay" : "all",
    bundlePolicy: "max-bundle",
    rtcpMuxPolicy: "require",
  };
}

/** Puts the video codecs named in `names` (the publisher property `preferredVideoCodecs`, e.g. ["VP9", "VP8"]) first in
 * a transceiver's codec preferences, in that order; the rest keep the browser's order after them. */
function preferVideoCodecs(transceiver, names) {
  if (!Array.isArray(names) || names.length === 0 || !transceiver.setCodecPreferences) return;
  const wanted = names.map((n) => `video/${n}`.toLowerCase());
  const rank = (c) => { const i = wanted.indexOf(c.mimeType.toLowerCase()); return i < 0 ? wanted.length : i; };
  const codecs = RTCRtpReceiver.getCapabilities("video")?.codecs ?? [];
  transceiver.setCodecPreferences(codecs.map((c, i) => [rank(c), i, c]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((x) => x[2]));
}

/** Relayed: makes the sender of an answered video transceiver send the first of the codecs named in `names` (the
 * publisher property `preferredVideoCodecs`) that the answer agreed, as a native publisher does: answering, Chromium
 * otherwise sends the offer's first codec whatever its codec preferences (`RTCRtpEncodingParameters.codec`; browsers
 * without it keep sending that one). */
async function sendPreferredVideoCodec(sender, names) {
  if (!Array.isArray(names) || names.length === 0) return;
  const params = sender.getParameters();
  const agreed = params.codecs ?? [];
  const codec = names.map((n) => agreed.find((c) => c.mimeType.toLowerCase() === `video/${n}`.toLowerCase())).find(Boolean);
  if (!codec || !params.encodings?.length) return;
  for (const e of params.encodings) e.codec = { mimeType: codec.mimeType, clockRate: codec.clockRate, sdpFmtpLine: codec.sdpFmtpLine };
  await sender.setParameters(params).catch((e) => console.warn(`otsession.js: cannot send ${codec.mimeType}: ${e.message || e}`));
}

/** The encoding names (`a=rtpmap`, lower case) of the video sections of `sdp` that are not rejected (port 0); null
 * when it has no such section, i.e. asks for no video. */
function offeredVideoCodecs(sdp) {
  let names = null, video = false;
  for (const line of sdp.split(/\r?\n/)) {
    if (line.startsWith("m=")) {
      video = /^m=video [1-9]/.test(line);
      if (video) names ??= [];
    } else if (video) {
      const rtpmap = /^a=rtpmap:\d+ ([^/\s]+)\//.exec(line);
      if (rtpmap) names.push(rtpmap[1].toLowerCase());
    }
  }
  return names;
}

/** Relayed: why a subscriber's offer `sdp` cannot have the stream's video, said as a native publisher and the media
 * router say it, or null when it can. It cannot when it asks for video but lists none of the codecs the publisher
 * sends: its `preferred` ones (`preferredVideoCodecs`) the browser has, or without them every one the browser sends. */
function relayedVideoRefusal(sdp, preferred) {
  const offered = offeredVideoCodecs(sdp);
  if (offered === null) return null;
  const sendable = (RTCRtpSender.getCapabilities("video")?.codecs ?? []).map((c) => c.mimeType.slice(6))
    .filter((name) => !["rtx", "red", "ulpfec", "flexfec-03"].includes(name.toLowerCase()));
  const named = (Array.isArray(preferred) ? preferred : [])
    .flatMap((n) => sendable.filter((name) => name.toLowerCase() === String(n).toLowerCase()));
  const ours = [...new Set(named.length ? named : sendable)];
  if (ours.some((name) => offered.includes(name.toLowerCase()))) return null;
  return `the stream's video is ${ours.join(" or ")}, which the subscriber's offer does not list`;
}

/** One RTCPeerConnection with a serial chain for its signaling steps (a candidate never overtakes the description
 * it belongs to) and trickle ICE over the session's `mediaCandidate` messages. */
class MediaPeer {
  constructor(session, peerId, onState) {
    this.session = session;
    this.peerId = peerId;
    this.pc = new RTCPeerConnection(peerConfig(session._options, session._iceServers));
    this.chain = Promise.resolve();
    this.localCandidates = [];
    this.closed = false;
    this.pc.onicecandidate = (e) => {
      if (this.closed) return;
      if (e.candidate && e.candidate.candidate) {
        this.localCandidates.push(e.candidate.candidate);
        session._sendMedia({ type: "mediaCandidate", peerId, candidate: e.candidate.candidate,
                             sdpMid: e.candidate.sdpMid, sdpMLineIndex: e.candidate.sdpMLineIndex });
      } else if (!e.candidate) {
        session._sendMedia({ type: "mediaCandidate", peerId, candidate: "" });
      }
    };
    this.pc.onconnectionstatechange = () => { if (!this.closed) onState(this.pc.connectionState); };
  }

  /** Runs `step` after the previous ones; a failure is passed to `onError` (default: logged). */
  then(step, onError) {
    this.chain = this.chain.then(() => (this.closed ? undefined : step())).catch((e) => {
      if (this.closed) return;
      if (onError) onError(e); else console.warn("otsession.js:", e);
    });
    return this.chain;
  }

  /** A remote candidate (`""`: end of candidates); without `sdpMid` it goes to the BUNDLE-tag section. */
  addCandidate(m) {
    this.then(async () => {
      const mid = m.sdpMid ?? bundleMid(this.pc.remoteDescription?.sdp);
      try {
        await this.pc.addIceCandidate({ candidate: m.candidate || "", sdpMid: mid, sdpMLineIndex: m.sdpMLineIndex ?? null });
      } catch (e) {
        if (m.candidate) console.warn(`otsession.js: candidate ${m.candidate} refused: ${e.message}`);
      }
    });
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    try { this.pc.close(); } catch { /* already closed */ }
  }
}

function inboundStats(report) {
  const out = { audio: { packetsReceived: 0, packetsLost: 0, bytesReceived: 0 },
                video: { packetsReceived: 0, packetsLost: 0, bytesReceived: 0, frameRate: 0, framesDecoded: 0,
                         frameWidth: 0, frameHeight: 0 },
                timestamp: Date.now() };
  report.forEach((s) => {
    if (s.type !== "inbound-rtp") return;
    const k = s.kind || s.mediaType;
    if (k !== "audio" && k !== "video") return;
    const o = out[k];
    o.packetsReceived = s.packetsReceived ?? 0;
    o.packetsLost = s.packetsLost ?? 0;
    o.bytesReceived = s.bytesReceived ?? 0;
    if (k === "video") {
      o.frameRate = s.framesPerSecond ?? 0;
      o.framesDecoded = s.framesDecoded ?? 0;
      o.frameWidth = s.frameWidth ?? 0;
      o.frameHeight = s.frameHeight ?? 0;
    } else {
      o.audioLevel = s.audioLevel ?? 0;
    }
    out.timestamp = s.timestamp ?? out.timestamp;
  });
  return out;
}

function outboundStats(report) {
  const out = { audio: { packetsSent: 0, packetsLost: 0, bytesSent: 0 },
                video: { packetsSent: 0, packetsLost: 0, bytesSent: 0, frameRate: 0, framesEncoded: 0,
                         frameWidth: 0, frameHeight: 0 },
                timestamp: Date.now() };
  report.forEach((s) => {
    const k = s.kind || s.mediaType;
    if (s.type === "outbound-rtp" && (k === "audio" || k === "video")) {
      const o = out[k];
      o.packetsSent += s.packetsSent ?? 0;
      o.bytesSent += s.bytesSent ?? 0;
      if (k === "video") {
        o.frameRate = s.framesPerSecond ?? o.frameRate;
        o.framesEncoded += s.framesEncoded ?? 0;
        o.frameWidth = s.frameWidth ?? o.frameWidth;
        o.frameHeight = s.frameHeight ?? o.frameHeight;
      }
      out.timestamp = s.timestamp ?? out.timestamp;
    } else if (s.type === "remote-inbound-rtp" && (k === "audio" || k === "video")) {
      out[k].packetsLost += s.packetsLost ?? 0;
    }
  });
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Connections and streams

/** A client in the session: `connectionId`, `creationTime` (ms since 1970) and the token's `data`. */
export class Connection {
  constructor(info) {
    this.connectionId = info.id;
    this.id = info.id;
    this.creationTime = info.creationTime ?? 0;
    this.data = info.data ?? "";
  }
}

/** A published stream: `streamId`, `connection`, `name`, `hasAudio`, `hasVideo`, `videoType`,
 * `videoDimensions` {width, height}, `creationTime`. */
export class Stream {
  constructor(info, connection) {
    this.streamId = info.id;
    this.id = info.id;
    this.connection = connection;
    this._update(info);
    this.creationTime = info.creationTime ?? 0;
  }

  _update(info) {
    this.name = info.name ?? "";
    this.hasAudio = !!info.hasAudio;
    this.hasVideo = !!info.hasVideo;
    this.videoType = info.videoType || "camera";
    this.videoDimensions = { width: info.width ?? 0, height: info.height ?? 0 };
    this.layoutClassList = info.layoutClassList ?? [];
    this.audioFallbackEnabled = info.audioFallbackEnabled !== false;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Publisher

/** A camera/microphone (or given tracks) to publish: `OT.initPublisher(targetElement, properties, callback)`.
 * Events: accessAllowed, accessDenied, videoElementCreated, streamCreated, streamDestroyed, muteForced, destroyed. */
export class Publisher extends Emitter {
  constructor(target, properties = {}, callback) {
    super();
    this.id = `OT_${uuid()}`;
    this.properties = { ...properties };
    this.stream = null;
    this.session = null;
    this.mediaStream = null;
    this.#audioOn = properties.publishAudio !== false;
    this.#videoOn = properties.publishVideo !== false;
    const { element, video } = makeElement(target, "OT_publisher", properties, true);
    this.element = element;
    this.videoElement = video;
    if (properties.mirror !== false && !(properties.videoSource instanceof MediaStreamTrack) && properties.videoSource !== "screen") {
      video.style.transform = "scaleX(-1)";
    }
    this._ready = this.#acquire();
    this._ready.catch(() => {});  // reported through the callback, accessDenied and publish()
    complete(this._ready, callback && ((e) => callback(e)));
  }

  #audioOn;
  #videoOn;
  #ownTracks = [];
  #peers = new Map();        // peerId → {peer, subscriber connection id | null (router)}
  #destroyed = false;
  #republishAt = 0;

  get audioTrack() { return this.mediaStream?.getAudioTracks()[0] ?? null; }
  get videoTrack() { return this.mediaStream?.getVideoTracks()[0] ?? null; }

  async #acquire() {
    const p = this.properties;
    const tracks = [];
    const want = (src) => src !== false && src !== null;
    try {
      const constraints = {};
      const audioSrc = p.audioSource === undefined ? true : p.audioSource;
      const videoSrc = p.videoSource === undefined ? true : p.videoSource;
      if (audioSrc instanceof MediaStreamTrack) tracks.push(audioSrc);
      else if (want(audioSrc)) {
        const a = typeof audioSrc === "string" ? { deviceId: audioSrc } : {};
        for (const k of ["echoCancellation", "noiseSuppression", "autoGainControl"]) {
          if (p.disableAudioProcessing) a[k] = false; else if (p[k] !== undefined) a[k] = !!p[k];
        }
        constraints.audio = Object.keys(a).length ? a : true;
      }
      if (videoSrc instanceof MediaStreamTrack) tracks.push(videoSrc);
      else if (videoSrc === "screen") {
        const s = await navigator.mediaDevices.getDisplayMedia({ video: true });
        this.#ownTracks.push(...s.getTracks());
        tracks.push(...s.getVideoTracks());
      } else if (want(videoSrc)) {
        const v = typeof videoSrc === "string" ? { deviceId: videoSrc } : {};
        const [w, h] = (p.resolution || "").split("x").map(Number);
        if (w && h) { v.width = { ideal: w }; v.height = { ideal: h }; }
        if (p.frameRate) v.frameRate = { ideal: p.frameRate };
        constraints.video = Object.keys(v).length ? v : true;
      }
      if (constraints.audio || constraints.video) {
        const s = await navigator.mediaDevices.getUserMedia(constraints);
        this.#ownTracks.push(...s.getTracks());
        tracks.push(...s.getTracks());
      }
    } catch (e) {
      const err = new OTError(1500, `no access to the camera or microphone: ${e.message || e}`);
      this._emit("accessDenied", { message: err.message });
      throw err;
    }
    if (this.#destroyed) { for (const t of this.#ownTracks) t.stop(); throw new OTError(1011, "the publisher was destroyed"); }
    this.mediaStream = new MediaStream(tracks);
    if (this.audioTrack) this.audioTrack.enabled = this.#audioOn;
    if (this.videoTrack) {
      this.videoTrack.enabled = this.#videoOn;
      if (p.videoContentHint !== undefined) this.videoTrack.contentHint = p.videoContentHint;
    }
    this.videoElement.srcObject = this.mediaStream;
    this.videoElement.play?.().catch(() => {});
    this._emit("accessAllowed");
    this._emit("videoElementCreated", { element: this.videoElement });
  }

  /** The properties of the `publish` request. */
  _publishRequest() {
    const v = this.videoTrack?.getSettings?.() || {};
    const src = this.properties.videoSource;
    return {
      name: String(this.properties.name ?? ""),
      hasAudio: !!this.audioTrack && this.#audioOn,
      hasVideo: !!this.videoTrack && this.#videoOn,
      videoType: src === "screen" ? "screen" : src instanceof MediaStreamTrack ? "custom" : "camera",
      width: v.width ?? 0,
      height: v.height ?? 0,
      audioFallbackEnabled: this.properties.audioFallbackEnabled !== false,
    };
  }

  /** Starts or stops sending audio; others see `streamPropertyChanged` (hasAudio). */
  publishAudio(on) {
    this.#audioOn = !!on;
    if (this.audioTrack) this.audioTrack.enabled = this.#audioOn;
    if (this.stream && this.session) this.session._updateStream(this, { hasAudio: this.#audioOn && !!this.audioTrack });
    return this;
  }

  /** Starts or stops sending video; others see `streamPropertyChanged` (hasVideo). */
  publishVideo(on) {
    this.#videoOn = !!on;
    if (this.videoTrack) this.videoTrack.enabled = this.#videoOn;
    if (this.stream && this.session) this.session._updateStream(this, { hasVideo: this.#videoOn && !!this.videoTrack });
    return this;
  }

  get isPublishingAudio() { return this.#audioOn; }
  get isPublishingVideo() { return this.#videoOn; }

  // -- session side --

  /** The server accepted the stream: routed sessions connect to the media router now; relayed ones wait for
   * subscribers' offers. */
  _published(session, stream) {
    this.session = session;
    this.stream = stream;
    if (!session._relayed) this.#connectRouter();
    this._emit("streamCreated", { stream });
  }

  #connectRouter() {
    const session = this.session, stream = this.stream;
    if (!session || !stream || this.#destroyed) return;
    const peerId = uuid();
    const peer = new MediaPeer(session, peerId, (state) => {
      if (state === "connected") { this.#republishAt = 0; clearTimeout(peer.timer); }
      if (state === "failed") this.#routerLost(peerId, "ICE failed");
    });
    this.#peers.set(peerId, { peer, subscriber: null });
    session._registerPeer(peerId, this);
    peer.timer = setTimeout(() => {
      if (peer.pc.connectionState !== "connected") this.#routerLost(peerId, "media did not connect");
    }, 15000);
    const ms = this.mediaStream;
    peer.pc.addTransceiver(this.audioTrack || "audio", { direction: "sendonly", streams: [ms] });
    preferVideoCodecs(peer.pc.addTransceiver(this.videoTrack || "video", { direction: "sendonly", streams: [ms] }),
                      this.properties.preferredVideoCodecs);
    peer.then(async () => {
      await peer.pc.setLocalDescription(await peer.pc.createOffer());
      await session._request({ type: "mediaOffer", peerId, streamId: stream.streamId, direction: "publish",
                               sdp: peer.pc.localDescription.sdp });
    }, (e) => {
      if (e?.code === 1022) { this.#routerLost(peerId, "the offer was lost with the signaling connection"); return; }
      this.#dropPeer(peerId, false);
      this._emit("exception", { code: e?.code ?? 1500, message: `the media router refused the stream: ${e?.message || e}` });
    });
  }

  /** The link to the router failed: publish on a new one (within MEDIA_TIMEOUT_MS of the first failure). */
  #routerLost(peerId, why) {
    if (!this.#peers.has(peerId)) return;
    this.#dropPeer(peerId, true);
    if (!this.stream || this.#destroyed) return;
    const now = Date.now();
    if (!this.#republishAt) this.#republishAt = now + MEDIA_TIMEOUT_MS;
    if (now > this.#republishAt) {
      this._emit("exception", { code: 1500, message: `media connection failed: ${why}` });
      return;
    }
    console.info(`otsession.js: publisher link lost (${why}); republishing`);
    setTimeout(() => this.#connectRouter(), 500);
  }

  /** Relayed: a subscriber's offer; answer it with our tracks. */
  _answer(m) {
    const session = this.session;
    if (!session || !this.stream || m.streamId !== this.stream.streamId || m.direction !== "subscribe" || this.#peers.has(m.peerId)) {
      session?._sendMedia({ type: "mediaClose", peerId: m.peerId });
      return;
    }
    const refusal = this.videoTrack ? relayedVideoRefusal(m.sdp, this.properties.preferredVideoCodecs) : null;
    if (refusal) {
      // As a native publisher and the media router refuse it: the subscriber hears why instead of getting no video.
      console.warn(`otsession.js: refused an offer from ${m.from}: ${refusal}`);
      session._sendMedia({ type: "mediaClose", peerId: m.peerId, refusal });
      return;
    }
    const peer = new MediaPeer(session, m.peerId, (state) => { if (state === "failed") this.#dropPeer(m.peerId, true); });
    this.#peers.set(m.peerId, { peer, subscriber: m.from });
    session._registerPeer(m.peerId, this);
    peer.then(async () => {
      await peer.pc.setRemoteDescription({ type: "offer", sdp: m.sdp });
      for (const t of peer.pc.getTransceivers()) {
        const kind = t.receiver.track?.kind;
        const track = kind === "audio" ? this.audioTrack : kind === "video" ? this.videoTrack : null;
        t.direction = track ? "sendonly" : "inactive";
        if (track) {
          await t.sender.replaceTrack(track);
          t.sender.setStreams?.(this.mediaStream);
          if (kind === "video") preferVideoCodecs(t, this.properties.preferredVideoCodecs);
        }
      }
      await peer.pc.setLocalDescription(await peer.pc.createAnswer());
      const video = peer.pc.getTransceivers().find((t) => t.receiver.track?.kind === "video" && t.direction === "sendonly");
      if (video) await sendPreferredVideoCodec(video.sender, this.properties.preferredVideoCodecs);
      session._sendMedia({ type: "mediaAnswer", peerId: m.peerId, sdp: peer.pc.localDescription.sdp });
    }, (e) => {
      console.warn(`otsession.js: refused an offer from ${m.from}: ${e.message || e}`);
      this.#dropPeer(m.peerId, true);
    });
  }

  /** Media signaling for one of our peer connections. */
  _media(m) {
    const entry = this.#peers.get(m.peerId);
    if (!entry) return;
    const { peer } = entry;
    switch (m.type) {
      case "mediaAnswer":
        peer.then(() => peer.pc.setRemoteDescription({ type: "answer", sdp: m.sdp }),
                  (e) => { this.#routerLost(m.peerId, `bad answer: ${e.message || e}`); });
        break;
      case "mediaCandidate":
        peer.addCandidate(m);
        break;
      case "mediaClose":
        if (entry.subscriber === null) this.#routerLost(m.peerId, "the media router closed the link");
        else this.#dropPeer(m.peerId, false);
        break;
      case "subscriberSettings":
        peer.then(async () => {
          for (const t of peer.pc.getTransceivers()) {
            const kind = t.receiver.track?.kind;
            if (kind === "audio") await t.sender.replaceTrack(m.audio ? this.audioTrack : null);
            if (kind === "video") await t.sender.replaceTrack(m.video ? this.videoTrack : null);
          }
        });
        break;
      default:
        break;
    }
  }

  #dropPeer(peerId, tellOtherSide) {
    const entry = this.#peers.get(peerId);
    if (!entry) return;
    this.#peers.delete(peerId);
    clearTimeout(entry.peer.timer);
    this.session?._unregisterPeer(peerId);
    if (tellOtherSide) this.session?._sendMedia({ type: "mediaClose", peerId });
    entry.peer.close();
  }

  /** A moderator muted this stream. */
  _muteForced() {
    this.#audioOn = false;
    if (this.stream) this.stream.hasAudio = false;
    if (this.audioTrack) this.audioTrack.enabled = false;
    this._emit("muteForced", { active: true });
  }

  /** The stream ended (unpublished, session left): close the peer connections; `streamDestroyed` follows. */
  _unpublished(reason) {
    const stream = this.stream;
    for (const id of [...this.#peers.keys()]) this.#dropPeer(id, reason === "unpublished");
    this.stream = null;
    const session = this.session;
    this.session = null;
    if (stream) this._emit("streamDestroyed", { stream, reason }, () => { if (session) this.destroy(); });
  }

  /** The statistics of each peer connection: one item for the router link (routed), one per subscriber (relayed):
   * `{connectionId?, subscriberId?, stats: {audio: {packetsSent, packetsLost, bytesSent}, video: {…, frameRate},
   * timestamp}}`. Callback `(error, items)`, or a promise without one. */
  getStats(callback) {
    const p = Promise.all([...this.#peers.entries()].map(async ([peerId, e]) => {
      const stats = outboundStats(await e.peer.pc.getStats());
      return e.subscriber ? { connectionId: e.subscriber, subscriberId: peerId, stats } : { stats };
    }));
    return complete(p, callback);
  }

  /** The RTCStatsReport of each peer connection: `[{connectionId?, subscriberId?, rtcStatsReport}]`. */
  async getRtcStatsReport() {
    return Promise.all([...this.#peers.entries()].map(async ([peerId, e]) => {
      const rtcStatsReport = await e.peer.pc.getStats();
      return e.subscriber ? { connectionId: e.subscriber, subscriberId: peerId, rtcStatsReport } : { rtcStatsReport };
    }));
  }

  /** Local candidates signalled so far (all peer connections). */
  get localCandidates() { return [...this.#peers.values()].flatMap((e) => e.peer.localCandidates); }

  /** Unpublishes (when published), stops the tracks it opened, removes its element. */
  destroy() {
    if (this.#destroyed) return this;
    this.#destroyed = true;
    if (this.session && this.stream) this.session.unpublish(this);
    for (const t of this.#ownTracks) t.stop();
    this.element.remove();
    this._emit("destroyed");
    return this;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Subscriber

/** One stream received: `session.subscribe(stream, targetElement, properties, callback)`.
 * Events: videoElementCreated, connected, disconnected, videoDisabled, videoEnabled, videoDisableWarning,
 * videoDisableWarningLifted, videoDimensionsChanged, audioBlocked, destroyed. */
export class Subscriber extends Emitter {
  constructor(session, stream, target, properties = {}) {
    super();
    this.id = `OT_${uuid()}`;
    this.session = session;
    this.stream = stream;
    this.properties = { ...properties };
    this.#audio = properties.subscribeToAudio !== false;
    this.#video = properties.subscribeToVideo !== false;
    const { element, video } = makeElement(target, "OT_subscriber", properties, false);
    this.element = element;
    this.videoElement = video;
    this.mediaStream = new MediaStream();
    video.srcObject = this.mediaStream;
    video.addEventListener("resize", () => {
      this._emit("videoDimensionsChanged", { newValue: { width: video.videoWidth, height: video.videoHeight } });
    });
    queueMicrotask(() => this._emit("videoElementCreated", { element: video }));
  }

  #audio;
  #video;
  #peer = null;
  #connected = false;
  #everConnected = false;
  #settled = false;
  #deadline = 0;
  #destroyed = false;
  #qualityOff = false;
  /** Resolves when media first flows (the subscribe callback), rejects on failure. */
  _done = null;

  get isSubscribingToAudio() { return this.#audio; }
  get isSubscribingToVideo() { return this.#video; }
  get peerId() { return this.#peer?.peerId ?? null; }
  videoWidth() { return this.videoElement.videoWidth; }
  videoHeight() { return this.videoElement.videoHeight; }

  _start() {
    this.#deadline = Date.now() + MEDIA_TIMEOUT_MS;
    this._done = new Promise((resolve, reject) => { this.#resolve = resolve; this.#reject = reject; });
    this.#open();
    return this._done;
  }

  #resolve;
  #reject;

  /** A new peer connection for the stream: offer, then the router's (or publisher's) answer. */
  #open() {
    const session = this.session;
    const peerId = uuid();
    const peer = new MediaPeer(session, peerId, (state) => this.#state(peer, state));
    this.#peer = peer;
    session._registerPeer(peerId, this);
    peer.pc.addTransceiver("audio", { direction: "recvonly" });
    peer.pc.addTransceiver("video", { direction: "recvonly" });
    peer.pc.ontrack = (e) => {
      if (this.#peer !== peer) return;
      for (const t of this.mediaStream.getTracks()) if (t.kind === e.track.kind) this.mediaStream.removeTrack(t);
      this.mediaStream.addTrack(e.track);
      this.videoElement.srcObject = this.mediaStream;
      this.#play();
    };
    peer.timer = setTimeout(() => { if (!this.#connected && this.#peer === peer) this.#lost("media did not connect"); },
                            Math.max(1000, this.#deadline - Date.now()));
    peer.then(async () => {
      await peer.pc.setLocalDescription(await peer.pc.createOffer());
      const wait = session._request({ type: "mediaOffer", peerId, streamId: this.stream.streamId, direction: "subscribe",
                                      sdp: peer.pc.localDescription.sdp });
      if (!this.#audio || !this.#video) this.#sendSettings();
      await wait;
    }, (e) => {
      if (this.#peer !== peer) return;
      if (e?.code === 1022) this.#lost("the offer was lost with the signaling connection");
      else this.#fail(asError(e, 1600));
    });
  }

  #state(peer, state) {
    if (this.#peer !== peer) return;
    if (state === "connected" && !this.#connected) {
      this.#connected = true;
      clearTimeout(peer.timer);
      const again = this.#everConnected;
      this.#everConnected = true;
      this._emit(again ? "reconnected" : "connected");
      if (!this.#settled) { this.#settled = true; this.#resolve(this); }
    } else if (state === "failed") {
      this.#lost("ICE failed");
    }
  }

  #play() {
    const v = this.videoElement;
    v.muted = !this.#audio;
    v.play().catch((e) => {
      if (e.name !== "NotAllowedError") return;
      // The page has had no user gesture: play without sound until OT.unblockAudio() is called from one.
      v.muted = true;
      v.play().catch(() => {});
      blockedAudio.add(this);
      this._emit("audioBlocked");
    });
  }

  _unblockAudio() {
    blockedAudio.delete(this);
    this.videoElement.muted = !this.#audio;
    this.videoElement.play().catch(() => {});
  }

  /** The media connection was lost: connect again with a new peer id (within MEDIA_TIMEOUT_MS), as the native
   * subscriber does. */
  #lost(why) {
    if (this.#destroyed || !this.#peer) return;
    const old = this.#peer;
    this.#closePeer(true);
    const wasConnected = this.#connected;
    this.#connected = false;
    if (wasConnected) { this.#deadline = Date.now() + MEDIA_TIMEOUT_MS; this._emit("disconnected", { reason: why }); }
    if (Date.now() > this.#deadline) { this.#fail(new OTError(1600, `the media connection could not be established: ${why}`)); return; }
    console.info(`otsession.js: subscriber media ${old.peerId} lost (${why}); connecting again`);
    setTimeout(() => { if (!this.#destroyed && !this.#peer) this.#open(); }, 500);
  }

  #fail(err) {
    this.#closePeer(true);
    if (!this.#settled) { this.#settled = true; this.#reject(err); } else this._emit("exception", { code: err.code, message: err.message });
  }

  #closePeer(tellOtherSide) {
    const p = this.#peer;
    if (!p) return;
    this.#peer = null;
    clearTimeout(p.timer);
    this.session._unregisterPeer(p.peerId);
    if (tellOtherSide) this.session._sendMedia({ type: "mediaClose", peerId: p.peerId });
    p.close();
  }

  _media(m) {
    const peer = this.#peer;
    if (!peer || m.peerId !== peer.peerId) return;
    switch (m.type) {
      case "mediaAnswer":
        peer.then(() => peer.pc.setRemoteDescription({ type: "answer", sdp: m.sdp }),
                  (e) => this.#fail(new OTError(1600, `bad answer: ${e.message || e}`)));
        break;
      case "mediaCandidate":
        peer.addCandidate(m);
        break;
      case "mediaClose":
        // A destroyed stream or a departed client is reported by the session's own events; a relayed publisher
        // refusing the offer (no video codec in common) says why, as the media router's refusal does.
        if (m.reason === "refused") { this.#closePeer(false); this.#fail(new OTError(1011, m.message || "the publisher refused the offer")); }
        else if (m.reason !== "streamDestroyed" && m.reason !== "connectionGone") {
          if (this.#everConnected) this.#lost(`the other side closed it (${m.reason})`);
          else { this.#closePeer(false); this.#fail(new OTError(1600, `the other side closed the media connection (${m.reason})`)); }
        }
        break;
      case "mediaQuality":
        if (m.event === "videoDisableWarning") this._emit("videoDisableWarning");
        else if (m.event === "videoDisableWarningLifted") this._emit("videoDisableWarningLifted");
        else if (m.event === "videoDisabled") { this.#qualityOff = true; this._emit("videoDisabled", { reason: "quality" }); }
        else if (m.event === "videoEnabled") { this.#qualityOff = false; this._emit("videoEnabled", { reason: "quality" }); }
        break;
      default:
        break;
    }
  }

  #sendSettings() {
    if (this.#peer) this.session._sendMedia({ type: "subscriberSettings", peerId: this.#peer.peerId, audio: this.#audio, video: this.#video });
  }

  /** Asks for (or stops) the stream's audio. */
  subscribeToAudio(on) {
    this.#audio = !!on;
    this.videoElement.muted = !this.#audio || blockedAudio.has(this);
    this.#sendSettings();
    return this;
  }

  /** Asks for (or stops) the stream's video: `videoDisabled`/`videoEnabled` with reason "subscribeToVideo". */
  subscribeToVideo(on) {
    const v = !!on;
    if (v === this.#video) return this;
    this.#video = v;
    this.#sendSettings();
    this._emit(v ? "videoEnabled" : "videoDisabled", { reason: "subscribeToVideo" });
    return this;
  }

  /** The publisher turned its video on or off. */
  _streamChanged(property, value) {
    if (property === "hasVideo") this._emit(value ? "videoEnabled" : "videoDisabled", { reason: "publishVideo" });
  }

  /** `{audio: {packetsReceived, packetsLost, bytesReceived}, video: {…, frameRate, framesDecoded, frameWidth,
   * frameHeight}, timestamp}`. Callback `(error, stats)`, or a promise without one. */
  getStats(callback) {
    const pc = this.#peer?.pc;
    const p = pc ? pc.getStats().then(inboundStats) : Promise.reject(new OTError(1010, "not subscribed"));
    return complete(p, callback);
  }

  /** The peer connection's RTCStatsReport. */
  async getRtcStatsReport() {
    if (!this.#peer) throw new OTError(1010, "not subscribed");
    return this.#peer.pc.getStats();
  }

  /** Local candidates signalled so far. */
  get localCandidates() { return this.#peer?.localCandidates ?? []; }

  /** Stops receiving (as `session.unsubscribe`), removes the element. */
  destroy(reason = "unsubscribe") {
    if (this.#destroyed) return this;
    this.#destroyed = true;
    this.#closePeer(reason === "unsubscribe");
    blockedAudio.delete(this);
    if (!this.#settled) { this.#settled = true; this.#reject(new OTError(1600, "unsubscribed before the media connected")); }
    for (const t of this.mediaStream.getTracks()) t.stop();
    this.element.remove();
    this.session._forgetSubscriber(this);
    this._emit("destroyed", { reason });
    return this;
  }
}

const blockedAudio = new Set();

// ---------------------------------------------------------------------------------------------------------------
// Session

/** A session of a libotsession server: `OT.initSession(apiKey, sessionId, {serverUrl, iceConfig,
 * connectionEventsSuppressed, pingInterval})`. Events: sessionConnected, sessionDisconnected, sessionReconnecting,
 * sessionReconnected, connectionCreated, connectionDestroyed, streamCreated, streamDestroyed, streamPropertyChanged,
 * signal, signal:<type>, muteForced. */
export class Session extends Emitter {
  constructor(apiKey, sessionId, options = {}) {
    super();
    if (!apiKey || !sessionId) throw new OTError(1011, "initSession needs an api key and a session id");
    this.apiKey = String(apiKey);
    this.sessionId = String(sessionId);
    this._options = { ...options };
    this.#url = signalingURL(options.serverUrl);
    this.#pingMs = options.pingInterval > 0 ? Number(options.pingInterval) : DEFAULT_PING_INTERVAL_MS;
    this.connection = null;
    this.capabilities = { publish: 0, subscribe: 0, forceMute: 0, forceDisconnect: 0, supportsWebRTC: 1 };
  }

  #url;
  #token = null;
  #ws = null;
  #socketGen = 0;
  #state = "disconnected";        // disconnected | connecting | connected | disconnecting
  #connectId = 0;
  #nextId = 1;
  #pending = new Map();          // request id → {resolve, reject, sent}
  #outbox = [];                  // messages queued while reconnecting
  #resumeToken = null;
  #graceMs = DEFAULT_GRACE_MS;
  #reconnect = null;             // {giveUpAt, attempts, timer}
  #pingMs;
  #pingTimer = null;
  /** A `connected` whose roster comes in parts, until the last `roster` part is in. */
  #rosterParts = null;
  #lastHeard = 0;
  #connectTimer = null;
  #connectCallback = null;
  #connections = new Map();      // other clients
  #streams = new Map();          // others' streams
  #publishers = new Map();       // own stream id → Publisher
  #subscribers = new Set();
  #peers = new Map();            // peer id → Publisher | Subscriber
  _relayed = false;
  _e2ee = false;
  /** Whether a moderator's force mute of the whole session is active. */
  muteForced = false;

  /** "connected" when connected (also while reconnecting), else "connecting", "disconnecting" or "disconnected". */
  get connectionStatus() { return this.#state; }
  isConnected() { return this.#state === "connected"; }
  get isReconnecting() { return this.#reconnect !== null; }
  get role() { return this.#role; }
  #role = null;
  get streams() { return [...this.#streams.values(), ...[...this.#publishers.values()].map((p) => p.stream).filter(Boolean)]; }
  get connections() { return [...this.#connections.values(), ...(this.connection ? [this.connection] : [])]; }

  // -- connecting --

  /** Connects with a client token; `callback(error)` once connected or failed (also a promise). */
  connect(token, callback) {
    const p = new Promise((resolve, reject) => {
      if (this.#state !== "disconnected") { reject(new OTError(1011, `connect while ${this.#state}`)); return; }
      if (!token) { reject(new OTError(1004, "a token is needed")); return; }
      this.#token = String(token);
      this.#state = "connecting";
      this.#connectCallback = { resolve, reject };
      this.#connectTimer = setTimeout(() => this.#connectFailed(new OTError(1006, "connect timed out")), CONNECT_TIMEOUT_MS);
      this.#openSocket(false);
    });
    return complete(p, callback && ((e) => callback(e)));
  }

  #openSocket(resume) {
    const gen = ++this.#socketGen;
    let ws;
    try { ws = new WebSocket(this.#url); } catch (e) {
      queueMicrotask(() => this.#socketClosed(gen, `cannot open ${this.#url}: ${e.message}`));
      return;
    }
    this.#ws = ws;
    ws.onopen = () => {
      if (gen !== this.#socketGen) return;
      this.#connectId = this.#nextId++;
      const m = { type: "connect", id: this.#connectId, apiKey: this.apiKey, sessionId: this.sessionId, token: this.#token,
                  eventsSuppressed: !!this._options.connectionEventsSuppressed };
      if (resume) { m.resumeConnectionId = this.connection.connectionId; m.resumeToken = this.#resumeToken; }
      ws.send(JSON.stringify(m));
    };
    ws.onmessage = (e) => {
      if (gen !== this.#socketGen || typeof e.data !== "string") return;
      this.#lastHeard = Date.now();
      let m;
      try { m = JSON.parse(e.data); } catch { return; }
      if (m && typeof m === "object") this.#receive(m);
    };
    ws.onclose = (e) => this.#socketClosed(gen, `socket closed (${e.code})`);
    ws.onerror = () => {};  // a close follows
  }

  #closeSocket() {
    this.#socketGen++;
    const ws = this.#ws;
    this.#ws = null;
    if (ws) { ws.onopen = ws.onmessage = ws.onclose = null; try { ws.close(); } catch { /* closing */ } }
  }

  /** Browsers can neither send WebSocket pings nor see the server's: after an interval without a message the page
   * sends a `ping` request (answered by a plain reply; docs/protocol.md), and a socket silent for three intervals
   * counts as dropped. */
  #checkLiveness() {
    if (this.#state !== "connected" || this.#reconnect || !this.#ws || this.#ws.readyState !== WebSocket.OPEN) return;
    const silent = Date.now() - this.#lastHeard;
    if (silent >= 3 * this.#pingMs) {
      console.info(`otsession.js: nothing from the server for ${silent} ms; reconnecting`);
      this.#closeSocket();
      this.#socketClosed(this.#socketGen, `silent for ${silent} ms`);
    } else if (silent >= this.#pingMs) {
      this.#ws.send(JSON.stringify({ type: "ping", id: this.#nextId++ }));
    }
  }

  #socketClosed(gen, why) {
    if (gen !== this.#socketGen) return;
    this.#ws = null;
    if (this.#state === "connecting") { this.#connectFailed(new OTError(1006, `could not connect to ${this.#url}: ${why}`)); return; }
    if (this.#state === "disconnecting") { this.#finish("clientDisconnected"); return; }
    if (this.#state !== "connected") return;
    if (this.#reconnect) { this.#retryLater(); return; }
    // The socket dropped: resume the connection within the server's grace period (docs/protocol.md).
    this.#reconnect = { giveUpAt: Date.now() + this.#graceMs, attempts: 0, timer: null };
    for (const [id, r] of [...this.#pending]) {
      if (r.sent) { this.#pending.delete(id); r.reject(new OTError(1022, "the connection dropped before the server replied")); }
    }
    this._emit("sessionReconnecting");
    this.#retryLater();
  }

  #retryLater() {
    const r = this.#reconnect;
    clearTimeout(r.timer);
    const delay = RECONNECT_BACKOFF_MS[Math.min(r.attempts, RECONNECT_BACKOFF_MS.length - 1)];
    const now = Date.now();
    if (now >= r.giveUpAt) { this.#giveUp(); return; }
    r.timer = setTimeout(() => {
      if (this.#reconnect !== r) return;
      if (Date.now() >= r.giveUpAt) { this.#giveUp(); return; }
      r.attempts += 1;
      this.#openSocket(true);
      const gen = this.#socketGen;
      r.timer = setTimeout(() => {
        if (this.#reconnect !== r || gen !== this.#socketGen) return;
        this.#closeSocket();     // the attempt took too long: abandon it
        this.#retryLater();
      }, Math.min(RECONNECT_ATTEMPT_MS, Math.max(0, r.giveUpAt - Date.now())));
    }, Math.min(delay, Math.max(0, r.giveUpAt - now)));
  }

  #giveUp() {
    clearTimeout(this.#reconnect?.timer);
    this.#reconnect = null;
    this.#closeSocket();
    this.#finish("networkDisconnected");
  }

  #connectFailed(err) {
    clearTimeout(this.#connectTimer);
    this.#closeSocket();
    this.#state = "disconnected";
    const cb = this.#connectCallback;
    this.#connectCallback = null;
    cb?.reject(err);
  }

  // -- messages from the server --

  #receive(m) {
    switch (m.type) {
      case "connected":
        if (!m.rosterFollows) return this.#connected(m);
        // A roster too large for one message: the rest follows in `roster` parts (docs/protocol.md).
        this.#rosterParts = { ...m, connections: [...(m.connections || [])], streams: [...(m.streams || [])] };
        return;
      case "roster": {
        const whole = this.#rosterParts;
        if (!whole) return;
        whole.connections.push(...(m.connections || []));
        whole.streams.push(...(m.streams || []));
        if (!m.last) return;
        this.#rosterParts = null;
        return this.#connected(whole);
      }
      case "reply": {
        const r = this.#pending.get(m.id);
        if (!r) return;
        this.#pending.delete(m.id);
        if (m.code) r.reject(new OTError(m.code, m.message)); else r.resolve(m);
        return;
      }
      case "error":
        if (this.#state === "connecting") this.#connectFailed(new OTError(m.code, m.message));
        else if (this.#reconnect) this.#giveUp();   // the resume was refused (e.g. 1022: the connection is gone)
        else console.warn(`otsession.js: server error ${m.code}: ${m.message}`);
        return;
      case "connectionCreated": return this.#connectionCreated(m.connection);
      case "connectionDestroyed": return this.#connectionDestroyed(m.connectionId, m.reason);
      case "streamCreated": return this.#streamCreated(m.stream);
      case "streamDestroyed": return this.#streamDestroyed(m.streamId, m.reason);
      case "streamChanged": return this.#streamChanged(m.stream, m.property);
      case "signal": return this.#signal(m);
      case "muteForced": return this.#muteForcedMessage(m);
      case "disconnected":
        this.#closeSocket();
        this.#finish(m.reason || "forceDisconnected");
        return;
      case "mediaOffer": {
        const pub = this.#publishers.get(m.streamId);
        if (pub) pub._answer(m); else this._sendMedia({ type: "mediaClose", peerId: m.peerId });
        return;
      }
      case "mediaAnswer": case "mediaCandidate": case "mediaClose": case "subscriberSettings": case "mediaQuality":
        this.#peers.get(m.peerId)?._media(m);
        return;
      default:
        return;   // newer servers may send more: ignored
    }
  }

  #connected(m) {
    if (m.id !== this.#connectId) return;
    this.#resumeToken = m.resumeToken;
    if (m.reconnectGraceMillis > 0) this.#graceMs = m.reconnectGraceMillis;
    this._iceServers = Array.isArray(m.iceServers) ? m.iceServers : [];
    this.#setRole(m.role);
    this.muteForced = !!m.muteForced;
    if (this.#reconnect) { this.#resumed(m); return; }
    if (this.#state !== "connecting") return;
    clearTimeout(this.#connectTimer);
    this.connection = new Connection(m.connection);
    this._relayed = !!m.relayed;
    this._e2ee = !!m.e2ee;
    this.#state = "connected";
    const cb = this.#connectCallback;
    this.#connectCallback = null;
    for (const c of m.connections || []) if (c.id !== this.connection.connectionId) this.#connections.set(c.id, new Connection(c));
    for (const s of m.streams || []) if (s.connectionId !== this.connection.connectionId) this.#streams.set(s.id, this.#makeStream(s));
    this.#pingTimer = setInterval(() => this.#checkLiveness(), this.#pingMs / 2);
    cb?.resolve();
    this._emit("sessionConnected", { connections: this.connections, streams: [...this.#streams.values()] });
    this._emit("connectionCreated", { connection: this.connection });
    for (const c of this.#connections.values()) this._emit("connectionCreated", { connection: c });
    for (const s of this.#streams.values()) this._emit("streamCreated", { stream: s });
  }

  #setRole(role) {
    this.#role = role;
    const can = (r) => (r.includes(role) ? 1 : 0);
    this.capabilities = { publish: can(["publisher", "publisheronly", "moderator"]), subscribe: can(["subscriber", "publisher", "moderator"]),
                          forceMute: can(["moderator"]), forceDisconnect: can(["moderator"]), supportsWebRTC: 1 };
  }

  /** The server resumed our connection: reconcile what changed meanwhile, then send what was queued. */
  #resumed(m) {
    const own = this.connection.connectionId;
    if (!m.resumed || m.connection?.id !== own) { this.#giveUp(); return; }
    clearTimeout(this.#reconnect.timer);
    this.#reconnect = null;
    this._emit("sessionReconnected");
    const liveStreams = new Map((m.streams || []).filter((s) => s.connectionId !== own).map((s) => [s.id, s]));
    const liveConnections = new Map((m.connections || []).filter((c) => c.id !== own).map((c) => [c.id, c]));
    for (const id of [...this.#streams.keys()]) if (!liveStreams.has(id)) this.#streamDestroyed(id, "networkDisconnected");
    if (!this._options.connectionEventsSuppressed) {
      for (const id of [...this.#connections.keys()]) if (!liveConnections.has(id)) this.#connectionDestroyed(id, "networkDisconnected");
      for (const c of liveConnections.values()) this.#connectionCreated(c);
    }
    for (const s of liveStreams.values()) {
      if (!this.#streams.has(s.id)) { this.#streamCreated(s); continue; }
      const old = this.#streams.get(s.id);
      if (old.hasAudio !== s.hasAudio) this.#streamChanged(s, "hasAudio");
      if (old.hasVideo !== s.hasVideo) this.#streamChanged(s, "hasVideo");
      if (old.videoDimensions.width !== s.width || old.videoDimensions.height !== s.height) this.#streamChanged(s, "dimensions");
    }
    const queued = this.#outbox;
    this.#outbox = [];
    for (const q of queued) {
      this.#ws?.send(JSON.stringify(q));
      const r = this.#pending.get(q.id);
      if (r) r.sent = true;
    }
  }

  #connectionFor(id) {
    if (id === this.connection?.connectionId) return this.connection;
    let c = this.#connections.get(id);
    if (!c) c = new Connection({ id, creationTime: 0, data: "" });  // events suppressed: not in the roster
    return c;
  }

  #makeStream(info) { return new Stream(info, this.#connectionFor(info.connectionId)); }

  #connectionCreated(info) {
    if (!info || this.#connections.has(info.id) || info.id === this.connection?.connectionId) return;
    const c = new Connection(info);
    this.#connections.set(info.id, c);
    this._emit("connectionCreated", { connection: c });
  }

  #connectionDestroyed(id, reason) {
    const c = this.#connections.get(id);
    if (!c) return;
    for (const s of [...this.#streams.values()]) if (s.connection.connectionId === id) this.#streamDestroyed(s.streamId, reason);
    this.#connections.delete(id);
    this._emit("connectionDestroyed", { connection: c, reason });
  }

  #streamCreated(info) {
    if (!info || this.#streams.has(info.id) || this.#publishers.has(info.id)) return;
    const s = this.#makeStream(info);
    this.#streams.set(info.id, s);
    this._emit("streamCreated", { stream: s });
  }

  #streamDestroyed(id, reason) {
    const s = this.#streams.get(id);
    if (!s) return;
    this.#streams.delete(id);
    const subs = [...this.#subscribers].filter((x) => x.stream === s);
    this._emit("streamDestroyed", { stream: s, reason }, () => { for (const x of subs) x.destroy("streamDestroyed"); });
  }

  #streamChanged(info, property) {
    const s = this.#streams.get(info?.id);
    if (!s) return;
    let changedProperty = property, oldValue, newValue;
    if (property === "hasAudio" || property === "hasVideo") {
      oldValue = s[property]; newValue = !!info[property];
    } else if (property === "dimensions") {
      changedProperty = "videoDimensions";
      oldValue = { ...s.videoDimensions }; newValue = { width: info.width, height: info.height };
      if (oldValue.width === newValue.width && oldValue.height === newValue.height) return;
    } else {
      return;
    }
    if (oldValue === newValue) return;
    s._update(info);
    this._emit("streamPropertyChanged", { stream: s, changedProperty, oldValue, newValue });
    for (const x of this.#subscribers) if (x.stream === s) x._streamChanged(property, newValue);
  }

  #signal(m) {
    const from = m.from ? this.#connectionFor(m.from) : null;
    const type = m.signalType || "";
    const event = new Event(type ? `signal:${type}` : "signal", this, { data: m.data ?? "", from });
    if (type) this.dispatchEvent(event);
    this._dispatch("signal", event);
  }

  /** One stream muted (`streamId`), or the whole session but `excludedStreamIds` (`active`), or the end of a mute
   * all (`active` false): our publishers concerned stop sending audio. */
  #muteForcedMessage(m) {
    if (!m.streamId) this.muteForced = !!m.active;
    if (m.active) {
      const excluded = new Set(Array.isArray(m.excludedStreamIds) ? m.excludedStreamIds : []);
      for (const [id, p] of this.#publishers) if (m.streamId ? id === m.streamId : !excluded.has(id)) p._muteForced();
    }
    this._emit("muteForced", { active: !!m.active, streamId: m.streamId ?? null });
  }

  // -- sending --

  /** A request with an id; resolves with the `reply`, rejects with its error (1022 when the connection dropped
   * before the reply, 1010 when not connected). Queued while reconnecting. */
  _request(msg, { retryAfterReconnect = true } = {}) {
    return new Promise((resolve, reject) => {
      if (this.#state !== "connected") { reject(new OTError(1010, "not connected")); return; }
      if (this.#reconnect && !retryAfterReconnect) { reject(new OTError(1010, "reconnecting")); return; }
      const m = { ...msg, id: this.#nextId++ };
      const entry = { resolve, reject, sent: false };
      this.#pending.set(m.id, entry);
      if (this.#reconnect || !this.#ws || this.#ws.readyState !== WebSocket.OPEN) this.#outbox.push(m);
      else { this.#ws.send(JSON.stringify(m)); entry.sent = true; }
    });
  }

  /** A message without a reply (media signaling); queued while reconnecting. */
  _sendMedia(msg) {
    if (this.#state !== "connected") return;
    if (this.#reconnect || !this.#ws || this.#ws.readyState !== WebSocket.OPEN) this.#outbox.push(msg);
    else this.#ws.send(JSON.stringify(msg));
  }

  _registerPeer(peerId, owner) { this.#peers.set(peerId, owner); }
  _unregisterPeer(peerId) { this.#peers.delete(peerId); }
  _forgetSubscriber(s) { this.#subscribers.delete(s); }

  _updateStream(publisher, fields) {
    const stream = publisher.stream;
    if (!stream) return;
    this._request({ type: "updateStream", streamId: stream.streamId, ...fields }).then((r) => {
      if (r.stream) stream._update(r.stream);
    }, (e) => console.warn(`otsession.js: updateStream failed: ${e.message}`));
  }

  // -- publishing and subscribing --

  /** Publishes a Publisher (or makes one from `(targetElement, properties)` as OpenTok.js does). Callback
   * `(error)` once the server has the stream; the publisher then dispatches `streamCreated`. */
  publish(publisher, properties, callback) {
    if (typeof properties === "function") { callback = properties; properties = undefined; }
    if (!(publisher instanceof Publisher)) publisher = new Publisher(publisher, properties || {});
    const p = (async () => {
      if (this.#state !== "connected") throw new OTError(1010, "connect before publishing");
      if (!this.capabilities.publish) throw new OTError(1500, `role ${this.#role} cannot publish`);
      if (this._e2ee) throw new OTError(1031, "otsession.js does not do end-to-end encryption");
      if (publisher.stream) throw new OTError(1011, "this publisher is already published");
      await publisher._ready;
      const request = publisher._publishRequest();
      const r = await this._request({ type: "publish", stream: request });
      const stream = new Stream(r.stream, this.connection);
      this.#publishers.set(stream.streamId, publisher);
      publisher._published(this, stream);
      // A mute all is active: the server made the stream without audio; it stays off until the page turns it on.
      if (request.hasAudio && !stream.hasAudio) publisher._muteForced();
      return publisher;
    })();
    complete(p, callback && ((e) => callback(e)));
    if (!callback) p.catch((e) => this._emit("exception", { code: e.code, message: e.message, publisher }));
    return publisher;
  }

  /** Withdraws a publisher's stream; it dispatches `streamDestroyed` (default action: destroy the publisher). */
  unpublish(publisher) {
    const stream = publisher?.stream;
    if (!stream || !this.#publishers.has(stream.streamId)) return;
    this.#publishers.delete(stream.streamId);
    this._request({ type: "unpublish", streamId: stream.streamId }).catch(() => {});
    publisher._unpublished("unpublished");
  }

  /** Subscribes to a stream; `properties`: subscribeToAudio, subscribeToVideo, width, height, insertMode,
   * fitMode. Callback `(error)` once media flows. Returns the Subscriber. */
  subscribe(stream, target, properties, callback) {
    if (typeof target === "function") { callback = target; target = undefined; properties = undefined; }
    if (typeof properties === "function") { callback = properties; properties = undefined; }
    const sub = new Subscriber(this, stream, target, properties || {});
    const p = (async () => {
      if (this.#state !== "connected") throw new OTError(1010, "connect before subscribing");
      if (!this.capabilities.subscribe) throw new OTError(1535, `role ${this.#role} cannot subscribe`);
      if (this._e2ee) throw new OTError(1031, "otsession.js does not do end-to-end encryption");
      if (!stream?.streamId) throw new OTError(1604, "no such stream");
      this.#subscribers.add(sub);
      return sub._start();
    })();
    p.catch((e) => {
      sub.destroy("failed");
      if (!callback) this._emit("exception", { code: e.code, message: e.message, subscriber: sub });
    });
    complete(p, callback && ((e) => callback(e)));
    return sub;
  }

  unsubscribe(subscriber) { subscriber?.destroy("unsubscribe"); }

  getPublisherForStream(stream) { return this.#publishers.get(stream?.streamId) ?? null; }
  getSubscribersForStream(stream) { return [...this.#subscribers].filter((s) => s.stream.streamId === stream?.streamId); }

  // -- signals and moderation --

  /** Sends a signal `{type, data, to, retryAfterReconnect}` to everyone (the sender included) or to connection `to`.
   * Callback `(error)`; also returns a promise. */
  signal(signal = {}, callback) {
    const p = (async () => {
      const type = String(signal.type ?? ""), data = String(signal.data ?? "");
      if (type.length > MAX_SIGNAL_TYPE) throw new OTError(1414, "signal type over 128 characters");
      if (!/^[A-Za-z0-9_~-]*$/.test(type)) throw new OTError(1461, "signal type must be of [A-Za-z0-9_~-]");
      if (new TextEncoder().encode(data).length > MAX_SIGNAL_DATA) throw new OTError(1413, "signal data over 8192 bytes");
      const m = { type: "signal", signalType: type, data };
      const to = signal.to?.connectionId ?? signal.to;
      if (to) m.to = String(to);
      await this._request(m, { retryAfterReconnect: signal.retryAfterReconnect !== false });
    })();
    return complete(p, callback);
  }

  /** Moderator: mutes one stream's audio. */
  forceMuteStream(stream, callback) {
    return complete(this._request({ type: "forceMuteStream", streamId: stream?.streamId ?? String(stream) }).then(() => {}), callback);
  }

  /** Moderator: mutes every stream but `excludedStreams` (and streams published later, until `disableForceMute`). */
  forceMuteAll(excludedStreams = [], callback) {
    const excluded = (excludedStreams || []).map((s) => s?.streamId ?? String(s));
    return complete(this._request({ type: "forceMuteAll", active: true, excludedStreams: excluded }).then(() => {}), callback);
  }

  /** Moderator: ends the session-wide force mute. */
  disableForceMute(callback) {
    return complete(this._request({ type: "forceMuteAll", active: false, excludedStreams: [] }).then(() => {}), callback);
  }

  /** Moderator: disconnects a client. */
  forceDisconnect(connection, callback) {
    return complete(this._request({ type: "forceDisconnect", connectionId: connection?.connectionId ?? String(connection) })
      .then(() => {}), callback);
  }

  // -- leaving --

  /** Leaves the session; `sessionDisconnected` (reason "clientDisconnected") follows. */
  disconnect() {
    if (this.#state === "connecting") { this.#connectFailed(new OTError(1006, "disconnected while connecting")); return; }
    if (this.#state !== "connected") return;
    if (this.#reconnect) { this.#giveUp(); return; }
    this.#state = "disconnecting";
    try { this.#ws?.send(JSON.stringify({ type: "disconnect" })); } catch { /* closing */ }
    const ws = this.#ws;
    setTimeout(() => { if (this.#ws === ws) { this.#closeSocket(); this.#finish("clientDisconnected"); } }, 1000);
  }

  #finish(reason) {
    if (this.#state === "disconnected") return;
    clearTimeout(this.#reconnect?.timer);
    clearInterval(this.#pingTimer);
    this.#reconnect = null;
    this.#state = "disconnected";
    this.#closeSocket();
    for (const r of this.#pending.values()) r.reject(new OTError(1010, "not connected"));
    this.#pending.clear();
    this.#outbox = [];
    const publishers = [...this.#publishers.values()];
    const subscribers = [...this.#subscribers];
    this.#publishers.clear();
    this.#streams.clear();
    this.#connections.clear();
    this._emit("sessionDisconnected", { reason }, () => {
      for (const s of subscribers) s.destroy(reason);
      for (const p of publishers) p._unpublished(reason);
    });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// OT

/** `OT.initSession(apiKey, sessionId, {serverUrl})`: the server URL defaults to the server this module came from. */
export function initSession(apiKey, sessionId, options) { return new Session(apiKey, sessionId, options); }

/** `OT.initPublisher(targetElement, {name, publishAudio, publishVideo, audioSource, videoSource, resolution,
 * frameRate, width, height, insertMode, mirror, disableAudioProcessing, echoCancellation, noiseSuppression,
 * autoGainControl, videoContentHint, audioFallbackEnabled}, callback)`. */
export function initPublisher(target, properties, callback) {
  if (typeof properties === "function") { callback = properties; properties = undefined; }
  return new Publisher(target, properties || {}, callback);
}

/** 1 when the browser has WebRTC. */
export function checkSystemRequirements() { return typeof RTCPeerConnection === "function" ? 1 : 0; }

/** Plays the audio of subscribers whose autoplay was blocked; call it from a user gesture (a click). */
export function unblockAudio() { for (const s of [...blockedAudio]) s._unblockAudio(); }

export const OT = { version, initSession, initPublisher, checkSystemRequirements, unblockAudio, Session, Publisher,
                    Subscriber, Stream, Connection, Event, OTError };
export default OT;
