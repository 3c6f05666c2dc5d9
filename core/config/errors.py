"""The errors every layer raises for the user: :class:`ConfigError` (one line, exit 2) and :class:`RunInterrupted`
(Ctrl-C after a checkpoint), and :func:`shown`, which keeps a value in a message short."""
from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A user-facing configuration problem; the CLI prints it as one line and exits 2."""


MAX_SHOWN = 80  # characters of a value an error message echoes


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters (a message never echoes megabytes)."""
    text = value if isinstance(value, str) and limit < 0 else repr(value)
    limit = abs(limit)
    return text if len(text) <= limit else f"{text[: limit - 20]}...({len(text)} characters)"


class RunInterrupted(Exception):
    """Training stopped on Ctrl-C after checkpointing; ``run_dir`` can be resumed."""

    def __init__(self, run_dir):
        super().__init__(str(run_dir))
        self.run_dir = run_dir


def require(ok: bool, msg: str) -> None:
    """Raise :class:`ConfigError` ``msg`` unless ``ok``."""
    if not ok:
        raise ConfigError(msg)
