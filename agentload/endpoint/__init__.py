"""agentload.endpoint (see DESIGN.md's package table)."""
