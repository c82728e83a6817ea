#!/usr/bin/env bash
# Installs what building and testing libotsession needs, skipping what is there.
# Idempotent; run as root (or with sudo available) on Debian.
set -euo pipefail

# iproute2 and nftables: the NAT and packet-loss tests build network namespaces.
# chromium, chromium-driver and selenium: the browser tests (Tests/interop/test_browser.py) drive headless Chromium.
# openssl (the command) makes the TLS tests' certificate authority; libnss3-tools (certutil) puts it in the NSS database of
# the browser test's Chromium, which trusts it like a user's installed CA.
# libyuv-dev, libpulse-dev: pixel conversion and the PulseAudio device. pulseaudio, pulseaudio-utils: the sound-card
# tests start a private daemon and use pactl/pacat/parec. libjpeg-dev: the tests build the V4L2 camera stand-in.
APT_PACKAGES=(pkg-config libopus-dev libvpx-dev libsrtp2-dev libssl-dev libpng-dev libyuv-dev libpulse-dev coturn iproute2 nftables
              chromium chromium-driver pulseaudio pulseaudio-utils libjpeg-dev openssl libnss3-tools)
PIP_PACKAGES=(pytest aiortc opentok selenium)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

pip_missing=()
for p in "${PIP_PACKAGES[@]}"; do
    python3 -m pip show -q "$p" >/dev/null 2>&1 || pip_missing+=("$p")
done
if ((${#pip_missing[@]})); then
    echo "setup: pip installing ${pip_missing[*]}"
    python3 -m pip install -q --disable-pip-version-check "${pip_missing[@]}"
fi
echo "setup: ok"
