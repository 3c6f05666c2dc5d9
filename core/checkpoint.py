"""Atomic file writes and checkpoint loading with one-line errors."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from core.config import ConfigError

CHECKPOINT_VERSION = 1


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write through a temporary file in the same directory, fsync, then rename over ``path``:
    a crash leaves either the old file or the new one, never a torn one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj: dict) -> None:
    atomic_write(path, lambda f: json.dump(obj, f, indent=2, sort_keys=True, default=str))


def save_checkpoint(path: Path, state: dict) -> None:
    state = {"version": CHECKPOINT_VERSION, **state}
    atomic_write(path, lambda f: torch.save(state, f), binary=True)


def load_checkpoint(path: Path) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` (trusted: it unpickles env states)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no checkpoint at {path}; pass a run directory written by 'dapo run'")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise ConfigError(f"checkpoint {path} is unreadable or corrupt ({type(e).__name__}); "
                          "restore it from a backup or start a new run") from e
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise ConfigError(f"checkpoint {path} has an unknown format (expected version {CHECKPOINT_VERSION})")
    return state
