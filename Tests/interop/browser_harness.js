// Injected into a page of the server under test (Tests/interop/browser.py): drives otsession.js the way an
// application would and keeps what the page observed (events, signals, frames, tones) for the Python tests.
// Every H.* call returns a promise; browser.py awaits it through execute_async_script.
window.H = (() => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const H = { session: null, publisher: null, subs: new Map(), events: [], signals: [], streams: new Map(), OT: null };

  async function until(what, cond, ms = 20000) {
    const end = performance.now() + ms;
    for (;;) {
      const v = await cond();
      if (v) return v;
      if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
      await sleep(50);
    }
  }
  H.until = until;

  /** Connects; `options` go to OT.initSession (serverUrl, …). Records every session event. */
  H.connect = async (apiKey, sessionId, token, options = {}) => {
    H.OT = (await import("/js/otsession.js")).default;
    const s = H.OT.initSession(apiKey, sessionId, options);
    H.session = s;
    const note = (e) => H.events.push({ type: e.type, reason: e.reason ?? null, stream: e.stream?.streamId ?? null,
                                         connection: e.connection?.connectionId ?? null, changedProperty: e.changedProperty ?? null,
                                         newValue: e.newValue ?? null, active: e.active ?? null, streamId: e.streamId ?? null,
                                         at: performance.now() });
    s.on("sessionConnected sessionDisconnected sessionReconnecting sessionReconnected connectionCreated connectionDestroyed " +
         "streamDestroyed streamPropertyChanged muteForced", note);
    s.on("streamCreated", (e) => { H.streams.set(e.stream.streamId, e.stream); note(e); });
    s.on("signal", (e) => H.signals.push({ type: e.type, data: e.data, from: e.from?.connectionId ?? null, at: performance.now() }));
    s.on("signal:typed", (e) => H.signals.push({ handler: "signal:typed", type: e.type, data: e.data, from: e.from?.connectionId ?? null }));
    await s.connect(token);
    return { connectionId: s.connection.connectionId, role: s.role, capabilities: s.capabilities };
  };

  H.streamNamed = (name) => until(`a stream named ${name}`, () => [...H.streams.values()].find((s) => s.name === name));

  /** Subscribes to the stream named `name`; resolves once media flows. */
  H.subscribe = async (name, properties = {}) => {
    const stream = await H.streamNamed(name);
    const t0 = performance.now();
    let sub;
    const connected = new Promise((resolve, reject) => {
      sub = H.session.subscribe(stream, null, { insertMode: "append", ...properties }, (e) => (e ? reject(e) : resolve()));
    });
    H.subs.set(stream.streamId, sub);
    const firstFrame = new Promise((resolve) => sub.videoElement.requestVideoFrameCallback(() => resolve(performance.now())));
    await connected;
    sub.firstFrameMs = firstFrame.then((t) => t - t0);
    return { streamId: stream.streamId, peerId: sub.peerId };
  };

  /** Milliseconds from subscribe() to the first frame presented. */
  H.firstFrameMs = async (streamId) => H.subs.get(streamId).firstFrameMs;

  /** Publishes; `properties.videoSource === "stream:<name>"` republishes the video of a stream this page receives. */
  H.publish = async (properties = {}) => {
    const p = { insertMode: "append", ...properties };
    if (typeof p.videoSource === "string" && p.videoSource.startsWith("stream:")) {
      const stream = await H.streamNamed(p.videoSource.slice(7));
      const track = H.subs.get(stream.streamId).mediaStream.getVideoTracks()[0];
      track.contentHint = "detail";  // keep the resolution: the native side reads the picture's stamp
      p.videoSource = track;
    }
    const pub = H.OT.initPublisher(null, p);
    H.publisher = pub;
    pub.on("muteForced", () => H.events.push({ type: "publisher:muteForced" }));
    await new Promise((resolve, reject) => H.session.publish(pub, (e) => (e ? reject(e) : resolve())));
    return { streamId: pub.stream.streamId };
  };

  H.subscriberStats = async (streamId) => H.subs.get(streamId).getStats();
  H.publisherStats = async () => H.publisher.getStats();

  /** The local candidate of the pair the subscriber of `streamId` uses: {candidateType, relayProtocol, address}. */
  H.selectedLocalCandidate = async (streamId) => {
    const report = await H.subs.get(streamId).getRtcStatsReport();
    const all = [...report.values()];
    const transport = all.find((s) => s.type === "transport" && s.selectedCandidatePairId);
    const pair = transport ? report.get(transport.selectedCandidatePairId)
      : all.find((s) => s.type === "candidate-pair" && s.nominated && s.state === "succeeded");
    const local = pair && report.get(pair.localCandidateId);
    return local ? { candidateType: local.candidateType, relayProtocol: local.relayProtocol ?? null, address: local.address } : null;
  };

  /** The mimeType of the video codec an RTCStatsReport's `inbound-rtp` or `outbound-rtp` names, or null. */
  const videoCodec = (report, type) => {
    const rtp = [...report.values()].find((s) => s.type === type && s.kind === "video" && s.codecId);
    return rtp ? report.get(rtp.codecId)?.mimeType ?? null : null;
  };
  /** The video codec the subscriber of `streamId` receives, once it has decoded frames; "publisher": the codec the
   * page's publisher sends (its first peer connection). */
  H.videoCodec = async (streamId) => until(`the video codec of ${streamId}`, async () => streamId === "publisher"
    ? videoCodec((await H.publisher.getRtcStatsReport())[0]?.rtcStatsReport ?? new Map(), "outbound-rtp")
    : videoCodec(await H.subs.get(streamId).getRtcStatsReport(), "inbound-rtp"));

  /** Waits until the subscriber of `streamId` decoded `n` more frames than `from`; returns its stats. */
  H.framesDecoded = async (streamId, n, from = 0) => until(`${n} frames of ${streamId}`, async () => {
    const s = await H.subs.get(streamId).getStats();
    return s.video.framesDecoded >= from + n ? s : null;
  });

  /** The strongest frequency (Hz) in the audio of the stream `streamId` this page receives (or of the page's own
   * publisher for "publisher") over `ms`, from WebAudio (interpolated FFT peak). */
  H.toneHz = async (streamId, ms = 1500) => {
    const ctx = new AudioContext();
    try {
      const src = ctx.createMediaStreamSource(streamId === "publisher" ? H.publisher.mediaStream : H.subs.get(streamId).mediaStream);
      const an = ctx.createAnalyser();
      an.fftSize = 16384;
      an.smoothingTimeConstant = 0.5;
      src.connect(an);
      await sleep(ms);
      const bins = new Float32Array(an.frequencyBinCount);
      an.getFloatFrequencyData(bins);
      let k = 1;
      for (let i = 2; i < bins.length - 1; i++) if (bins[i] > bins[k]) k = i;
      const [a, b, c] = [bins[k - 1], bins[k], bins[k + 1]];
      const shift = (a - c) / (2 * (a - 2 * b + c)) || 0;
      return { hz: ((k + shift) * ctx.sampleRate) / an.fftSize, db: b, state: ctx.state };
    } finally {
      ctx.close();
    }
  };

  H.signal = async (type, data, to) => { await H.session.signal({ type, data, to }); return true; };
  /** Sends a signal without waiting for it (it may be queued while reconnecting); `H.sent` settles with it. */
  H.signalLater = async (type, data, to) => {
    H.sent = H.session.signal({ type, data, to }).then(() => "sent", (e) => `failed ${e.code}`);
    return H.session.isReconnecting;
  };
  H.sentResult = async () => H.sent;

  /** Moderation: "forceMuteStream" (a stream's name), "forceDisconnect" (a connection id), "forceMuteAll",
   * "disableForceMute". */
  H.moderate = async (what, target) => {
    const s = H.session;
    if (what === "forceMuteStream") await s.forceMuteStream(await H.streamNamed(target));
    else if (what === "forceDisconnect") await s.forceDisconnect(s.connections.find((c) => c.connectionId === target) ?? target);
    else if (what === "forceMuteAll") await s.forceMuteAll();
    else if (what === "disableForceMute") await s.disableForceMute();
    else throw new Error(`no ${what}`);
    return true;
  };
  H.signalsFrom = (type) => H.signals.filter((s) => s.type === type);
  H.eventsOf = (type) => H.events.filter((e) => e.type === type);
  H.localCandidates = () => [...H.subs.values()].flatMap((s) => s.localCandidates)
    .concat(H.publisher ? H.publisher.localCandidates : []);
  return H;
})();
