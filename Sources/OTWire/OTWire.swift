// OTWire: see docs/architecture.md
