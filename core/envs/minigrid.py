"""MiniGrid's sparse-reward grid worlds (Chevalier-Boisvert et al. 2023) for the MLP trainer.

``--env MiniGrid-DoorKey-5x5-v0`` (any ``MiniGrid-*`` id) makes the env with MiniGrid's own wrappers: the agent's
partial, egocentric 7x7 view with each cell's object, colour and state one-hot encoded (``OneHotPartialObsWrapper``,
7x7x20), flattened to 980 inputs (computed by ``core.envs.minigrid_view``, about 5x faster than MiniGrid's code).  The mission string is dropped: it is the same in every episode of the tasks
this toolkit benchmarks (DoorKey, KeyCorridor, MultiRoom); tasks whose mission changes between episodes (Fetch,
GoToObject, PutNear, BabyAI) need it and are not supported.  The reward is MiniGrid's own
(``1 - 0.9 * steps / max_steps`` on reaching the goal, else 0), so returns compare with RL Zoo's tables.  At the
end of each episode ``info["is_success"]`` (Stable-Baselines3's convention) says whether the goal was reached; the
trainer logs the rate as ``rollout/success_rate``.
"""
from __future__ import annotations

import difflib

import gymnasium as gym

from core.config.errors import ConfigError

PREFIX = "MiniGrid-"
NAMESPACE = "dapo-minigrid"  # the flat-observation versions registered here


def is_minigrid(env_id: str) -> bool:
    return env_id.startswith(PREFIX) or env_id.startswith(NAMESPACE + "/")


class SuccessInfo(gym.Wrapper):
    """Adds ``info["is_success"]`` at the end of every episode: terminated with a positive reward."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = {**info, "is_success": bool(terminated and reward > 0)}
        return obs, reward, terminated, truncated, info


def make_flat(env_id: str, **kwargs) -> gym.Env:
    """``env_id`` with one-hot egocentric view flattened to ``(980,)`` uint8 and ``is_success`` at episode ends.

    The view is MiniGrid's ``OneHotPartialObsWrapper`` image, flattened, computed by ``OneHotView`` (the same array,
    built without MiniGrid's slow object-grid copies; ``tests/test_minigrid_view.py`` checks they are equal)."""
    from core.envs.minigrid_view import OneHotView

    return SuccessInfo(OneHotView(gym.make(env_id, **kwargs)))


def flat_id(env_id: str) -> str:
    """The registered id of ``env_id``'s flat-observation version (MiniGrid imported and checked first)."""
    base = env_id.removeprefix(NAMESPACE + "/")
    try:
        import minigrid  # noqa: F401  (registers the MiniGrid-* ids)
    except ImportError as e:
        raise ConfigError(f"{env_id} needs MiniGrid; install it with: pip install minigrid "
                          "(or the toolkit's extra: pip install -e '.[sparse]')") from e
    if base not in gym.registry:
        close = difflib.get_close_matches(base, [k for k in gym.registry if k.startswith(PREFIX)], n=3)
        raise ConfigError(f"unknown MiniGrid env '{base}'" + (f"; did you mean: {', '.join(close)}?" if close else ""))
    flat = f"{NAMESPACE}/{base}"
    if flat not in gym.registry:
        gym.register(id=flat, entry_point=make_flat, kwargs={"env_id": base}, disable_env_checker=True)
    return flat

