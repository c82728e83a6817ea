"""Headless Chromium for the browser interop tests: one browser for the whole run (conftest's `chromium` fixture),
pages of the server under test driven through browser_harness.js (otsession.js used as an application uses it),
a WAV tone for Chromium's fake microphone, a TCP proxy that cuts connections, and screenshot decoding.

Chromium runs without --use-fake-ui-for-media-stream: with it, every origin counts as having camera permission and
Chromium never hides its host addresses behind mDNS names. Pages that publish get the permission for their origin
through CDP (Browser.grantPermissions); viewer pages, on other origins (each test has its own server port), do not
and signal `.local` candidates as a real viewer's browser does."""
import math
import os
import socket
import struct
import threading
import wave
import zlib

from plumbing import pump

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HARNESS = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser_harness.js"), encoding="utf-8").read()
#: A web site's name that the browser resolves to 127.0.0.1: unlike localhost, a page there is a secure context (camera
#: and microphone allowed) only when served over https.
SITE_NAME = "ot.otsession.test"
#: The pitch of the browser's fake microphone (the WAV file Chromium loops).
BROWSER_TONE_HZ = 660


def write_tone_wav(path, hz, seconds=4, rate=48000):
    """A mono 16-bit WAV of a sine tone; a whole number of periods so that Chromium's loop has no click."""
    n = int(rate * seconds // (rate / hz) * (rate / hz))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * hz * i / rate))) for i in range(n)))


def trusting_home(workdir, ca_file):
    """A home directory whose NSS database (~/.pki/nssdb, where Chromium on Linux keeps the certificates a user
    installed) trusts `ca_file` to identify web sites, as `certutil` installs a company's CA."""
    import subprocess

    db = os.path.join(str(workdir), "home", ".pki", "nssdb")
    os.makedirs(db, exist_ok=True)
    for args in (["-N", "--empty-password"], ["-A", "-t", "C,,", "-n", "otsession test CA", "-i", ca_file]):
        subprocess.run(["certutil", "-d", f"sql:{db}", *args], check=True, capture_output=True)
    return os.path.join(str(workdir), "home")


def launch(workdir, home=None):
    """Headless Chromium through Debian's chromedriver (selenium never looks anything up on the network); with `home`
    (trusting_home) as its HOME, so that it trusts that home's CAs."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    wav = os.path.join(str(workdir), "tone.wav")
    write_tone_wav(wav, BROWSER_TONE_HZ)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--use-fake-device-for-media-stream",
                 f"--use-file-for-fake-audio-capture={wav}", "--autoplay-policy=no-user-gesture-required",
                 "--disable-dev-shm-usage", "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                 f"--host-resolver-rules=MAP {SITE_NAME} 127.0.0.1"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = dict(os.environ, HOME=home) if home else None
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER, env=env), options=opts)
    driver.set_page_load_timeout(30)
    return driver


class PageError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{message} (code {code})")
        self.code = code


class Page:
    """One page of a server (`origin`, e.g. http://127.0.0.1:PORT) with the harness loaded; `call("connect", …)`
    runs `H.connect(…)` in the page and returns its result (raises PageError with the OpenTok code on failure)."""

    def __init__(self, driver, origin, path="/demo", media=True):
        self.driver, self.origin = driver, origin
        if media:
            driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": origin, "permissions": ["videoCapture", "audioCapture"]})
        driver.get(origin + path)
        driver.execute_script(HARNESS)

    def call(self, name, *args, timeout=30):
        self.driver.set_script_timeout(timeout)
        r = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "H[arguments[0]](...arguments[1]).then((v) => done({ ok: v === undefined ? null : v }),"
            " (e) => done({ error: String((e && e.message) || e), code: (e && e.code) || null }));", name, list(args))
        if "error" in r:
            raise PageError(r["code"], f"H.{name}: {r['error']}")
        return r["ok"]

    def js(self, expression):
        return self.driver.execute_script("return " + expression)

    def log(self):
        """The page's console lines so far (for failure messages)."""
        return "\n".join(e["message"] for e in self.driver.get_log("browser"))

    def close(self):
        """Leaves the page (the WebSocket and peer connections close with it)."""
        self.driver.get("about:blank")


class TCPProxy:
    """Forwards 127.0.0.1:port to `target_port`; `cut()` resets every connection open so far (new ones still pass),
    as a network drop would look to both ends; `freeze()` black-holes them instead (nothing passes, nothing
    closes), as a dead path does."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open = []
        self.frozen = set()
        self.passing = threading.Event()
        self.passing.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.passing.wait()
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(a, b, lambda s: s not in self.frozen), daemon=True).start()

    def cut(self, hold=False):
        """Resets the open connections; with `hold`, new ones wait (connected, unanswered) until `release()`.
        Returns how many connections were cut."""
        if hold:
            self.passing.clear()
        with self.lock:
            victims, self.open = self.open, []
        for s in victims:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset once closed
                s.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked in recv, which closes it
            except OSError:
                pass
        return len(victims) // 2

    def freeze(self):
        """Stops forwarding on every connection open so far, without closing any; returns how many."""
        with self.lock:
            self.frozen.update(self.open)
            return len(self.open) // 2

    def release(self):
        self.passing.set()

    def close(self):
        self.release()
        self.listener.close()
        self.cut()


def png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = head
    assert depth == 8 and color in (2, 6) and interlace == 0, head
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def region_spread(png, rect, scale=1.0):
    """Standard deviation of luma over a rectangle {x, y, width, height} (CSS pixels) of a screenshot: near 0 for a
    blank (uniform) area, tens for a picture."""
    width, height, bpp, rows = png_pixels(png)
    x0, y0 = int(rect["x"] * scale), int(rect["y"] * scale)
    x1, y1 = min(width, int((rect["x"] + rect["width"]) * scale)), min(height, int((rect["y"] + rect["height"]) * scale))
    values = []
    for y in range(y0, y1, 2):
        row = rows[y]
        for x in range(x0, x1, 2):
            r, g, b = row[x * bpp], row[x * bpp + 1], row[x * bpp + 2]
            values.append(0.299 * r + 0.587 * g + 0.114 * b)
    assert values, f"empty region {rect}"
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
