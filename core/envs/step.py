"""What every rollout backend's ``step`` returns: the backends of :mod:`core.envs.backends` and the ale-py Atari
backend it makes (:mod:`core.envs.atari`) share it from here, so that neither imports the other for it."""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np


class StepResult(NamedTuple):
    obs: np.ndarray         # (N, D) observation to act on next
    reward: np.ndarray      # (N,)
    terminated: np.ndarray  # (N,) bool
    truncated: np.ndarray   # (N,) bool
    final_obs: np.ndarray   # (N, D) final observation where terminated | truncated (else zeros)
    valid: np.ndarray       # (N,) bool: False for EnvPool's reset steps
    score: np.ndarray       # (N,) raw reward for reporting (before any clipping)
    game_over: np.ndarray   # (N,) bool: the reported episode ended (a full game on Atari)
    success: Optional[np.ndarray] = None  # (N,) 1/0 where an ending episode's info["is_success"] said, else NaN
