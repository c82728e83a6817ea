#!/usr/bin/env bash
# Checks the shipped artefacts the way a user meets them: the .so's links and
# exports, an install into a fresh prefix, a C build with only pkg-config flags,
# and the Python package installed with pip into a fresh virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=dist/lib/libotsession.so
fail() { echo "check-package: FAIL: $*" >&2; exit 1; }

if ldd "$lib" | grep -q libswift; then fail "ldd lists Swift runtime libraries"; fi
readelf -d "$lib" | grep -q 'SONAME.*libotsession.so.0' || fail "no SONAME libotsession.so.0"
# Global (upper-case type letter) symbols other than ot_* and the version node.
extra=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[BDGRSTVW]$/ {print $3}' | grep -v '^ot_' || true)
[ -z "$extra" ] || fail "exports beyond ot_*: $extra"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[BDGRSTVW]$/ {print $3}' | sed 's/@.*//' | sort)
declared=$(grep -o '\bot_[a-z0-9_]*(' include/otsession.h | tr -d '(' | sort -u)
[ "$exported" = "$declared" ] || fail "exports and header differ: $(diff <(echo "$exported") <(echo "$declared") | grep '^[<>]' | tr '\n' ' ')"
echo "check-package: exactly the $(echo "$declared" | wc -l) functions of otsession.h exported, no libswift*"

# Full Foundation links ICU and its data into the .so (60 MB instead of 16): library targets use
# FoundationEssentials. Executables and tests may import Foundation.
full=$(find Sources -path 'Sources/OT*' -name '*.swift' -exec grep -lE '^(@_exported )?import Foundation$' {} + || true)
[ -z "$full" ] || fail "library sources import full Foundation (use FoundationEssentials): $full"
size=$(stat -L -c %s "$lib")
echo "check-package: library targets use FoundationEssentials only; $lib is $((size / 1048576)) MB"

# The Swift API as an outside package meets it: bindings/swift/Sample depends on this package by path and imports the
# OTSession product only; it implements the delegates (frames, audio), a device, a capturer and a frame transform.
swift build -q --package-path bindings/swift/Sample --product ot-swift-sample || fail "the Swift sample package does not build"
bindings/swift/Sample/.build/debug/ot-swift-sample >/dev/null || fail "the Swift sample did not run"
echo "check-package: an outside Swift package builds and runs against the OTSession product"

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make -s install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --cflags --libs otsession >/dev/null || fail "pkg-config otsession"
cat > "$prefix/first.c" <<'C'
#include <otsession.h>
#include <stdio.h>
int main(void) { printf("%s\n", ot_version()); return 0; }
C
cc -std=c99 -Wall -Wextra -Werror -pedantic "$prefix/first.c" -o "$prefix/first" $(pkg-config --cflags --libs otsession)
"$prefix/first" >/dev/null || fail "a C program built with pkg-config flags did not run"
echo "check-package: installed to a fresh prefix; a C program builds with pkg-config flags only"

python3 -m venv "$prefix/venv"
"$prefix/venv/bin/pip" install -q --disable-pip-version-check ./bindings/python >/dev/null
v=$(cd "$prefix" && "$prefix/venv/bin/python" -c "import otsession; print(otsession.version())")
echo "check-package: pip-installed otsession imports and reports version $v (found via pkg-config)"
