"""agentload.sandboxes (see DESIGN.md's package table)."""
