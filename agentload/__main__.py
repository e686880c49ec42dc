"""``python -m agentload`` runs the CLI."""

from agentload.cli import main

main()
