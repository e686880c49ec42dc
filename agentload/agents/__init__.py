"""agentload.agents (see DESIGN.md's package table)."""
