"""Fixtures of the agents' tests: the scripted endpoint is importable as ``fake_endpoint``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
