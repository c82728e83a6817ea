// OTServer: see docs/architecture.md
