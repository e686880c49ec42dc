"""agentload: make agentic LLM traffic real, record it, and replay it against inference servers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("agentload")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
