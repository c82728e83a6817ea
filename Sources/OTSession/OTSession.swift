// OTSession: see docs/architecture.md
