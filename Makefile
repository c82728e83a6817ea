# libotsession: build, install and check. `make help` lists the targets.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
VERSION := $(shell sed -n 's/.*static let versionString = "\(.*\)"/\1/p' Sources/OTCABI/CStrings.swift)
SOMAJOR := 0
DIST := dist
SWIFT_RELEASE = swift build -c release

.PHONY: help setup lib header check-header install uninstall test test-swift test-python test-c test-package demo clean

help:
	@echo "make lib            build $(DIST)/lib/libotsession.so.$(VERSION) (release, static Swift stdlib)"
	@echo "make header         regenerate include/otsession.h from the Swift declarations"
	@echo "make check-header   fail if include/otsession.h is stale"
	@echo "make install PREFIX=/usr/local   install library, header and otsession.pc"
	@echo "make setup          install missing apt and pip packages (idempotent)"
	@echo "make test           swift test, Python tests, C samples, packaging checks"
	@echo "make demo           run the demo (embedded server, publisher, subscriber)"

# The shared library: Swift stdlib linked in statically, versioned SONAME, only ot_* exported.
lib:
	$(SWIFT_RELEASE) --product otsession -Xswiftc -static-stdlib \
		-Xlinker -soname=libotsession.so.$(SOMAJOR) \
		-Xlinker --version-script=$(CURDIR)/tools/otsession.map
	mkdir -p $(DIST)/lib $(DIST)/include $(DIST)/lib/pkgconfig
	cp -f "$$($(SWIFT_RELEASE) --show-bin-path)/libotsession.so" $(DIST)/lib/libotsession.so.$(VERSION)
	strip --strip-unneeded $(DIST)/lib/libotsession.so.$(VERSION)
	ln -sf libotsession.so.$(VERSION) $(DIST)/lib/libotsession.so.$(SOMAJOR)
	ln -sf libotsession.so.$(SOMAJOR) $(DIST)/lib/libotsession.so
	cp -f include/otsession.h $(DIST)/include/
	sed -e 's|@PREFIX@|$(abspath $(DIST))|; s|@LIBDIR@|$${prefix}/lib|; s|@INCLUDEDIR@|$${prefix}/include|; s|@VERSION@|$(VERSION)|' \
		pkgconfig/otsession.pc.in > $(DIST)/lib/pkgconfig/otsession.pc

setup:
	bash tools/setup.sh

header:
	python3 tools/gen-header.py

check-header:
	python3 tools/gen-header.py --check

install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0755 $(DIST)/lib/libotsession.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libotsession.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libotsession.so.$(SOMAJOR)
	ln -sf libotsession.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libotsession.so
	install -m 0644 include/otsession.h $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
		pkgconfig/otsession.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/otsession.pc
	-ldconfig 2>/dev/null

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libotsession.so* $(DESTDIR)$(INCLUDEDIR)/otsession.h $(DESTDIR)$(PKGCONFIGDIR)/otsession.pc

test: setup
	$(MAKE) test-swift test-python test-c test-package

test-swift:
	swift test

# Python: the ctypes package against the freshly built library, plus interop tests and the attack suite
# (Tests/attack: a real ot-server per case, raw sockets, loopback only; its figures are printed at the end).
test-python: lib
	OTSESSION_LIBRARY=$(abspath $(DIST))/lib/libotsession.so PYTHONPATH=$(CURDIR)/bindings/python \
		python3 -m pytest -q bindings/python/tests $(wildcard Tests/interop) $(wildcard Tests/attack)

# C: the samples and the C test program, built with pkg-config only.
test-c: lib
	PKG_CONFIG_PATH=$(abspath $(DIST))/lib/pkgconfig $(MAKE) -C bindings/c check

test-package: lib
	bash tools/check-package.sh

demo: setup
	swift run -c release ot-demo $(ARGS)

clean:
	rm -rf $(DIST) .build
	$(MAKE) -C bindings/c clean
