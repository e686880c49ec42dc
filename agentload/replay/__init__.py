"""agentload.replay (see DESIGN.md's package table)."""
