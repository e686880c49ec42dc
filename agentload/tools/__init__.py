"""agentload.tools (see DESIGN.md's package table)."""
