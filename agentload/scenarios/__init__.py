"""agentload.scenarios (see DESIGN.md's package table)."""
