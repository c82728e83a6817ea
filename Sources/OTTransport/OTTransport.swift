// OTTransport: see docs/architecture.md
