"""The client layer's tests use the agents' scripted endpoint (``tests/agents/fake_endpoint``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))
