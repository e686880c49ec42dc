"""The words of the options that take one of a few words: where the salt goes (``--salt-at``)
and how ``--max-context`` fits a session (``--fit``). What each mode does is told where it is
done: ``replay.salt`` and ``replay.fit``."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["FIT_MODES", "SALT_MODES", "FitMode", "SaltAt"]

SaltAt = Literal["start", "after-system", "off"]
SALT_MODES: tuple[str, ...] = get_args(SaltAt)
"""The salt modes, in ``--salt-at``'s order."""

FitMode = Literal["cut-session", "drop-session"]
FIT_MODES: tuple[FitMode, ...] = ("cut-session", "drop-session")
"""The fit modes, in ``--fit``'s order."""
