"""MuJoCo's warnings, each shown once per process.

MuJoCo prints every warning to stdout and appends it to ``MUJOCO_LOG.TXT`` in the working directory; MuJoCo 3.3+
warns that the 'settotalmass' compiler attribute of Gymnasium's HalfCheetah model is deprecated each time the model
is compiled, so a HalfCheetah run printed it once per env it made (the check of the options, the training envs, the
evaluation env) and left the log file in the user's directory.  :func:`show_once` routes MuJoCo's warnings through a
handler that prints each distinct message once, on stderr, and writes no file.
"""
from __future__ import annotations

import sys
from typing import Any

_SHOWN: set[str] = set()


def _handler(message: str) -> None:
    if message not in _SHOWN:
        _SHOWN.add(message)
        print(f"MuJoCo warning (shown once): {message}", file=sys.stderr, flush=True)


def uses_mujoco(spec: Any) -> bool:
    """True if a Gymnasium ``EnvSpec`` makes a MuJoCo env (its entry point is in a ``mujoco`` module)."""
    entry = getattr(spec, "entry_point", None)
    name = entry if isinstance(entry, str) else getattr(entry, "__module__", "") or ""
    return "mujoco" in name.split(":")[0].split(".")


def show_once(spec: Any) -> None:
    """Before making the env of ``spec``: if it is a MuJoCo env, install the once-per-message handler (unless the
    program installed its own)."""
    if not uses_mujoco(spec):
        return
    import mujoco

    current = mujoco.get_mju_user_warning()
    if current is None:
        mujoco.set_mju_user_warning(_handler)
