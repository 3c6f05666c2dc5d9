"""Rollout backends behind one interface: Gymnasium SyncVectorEnv / AsyncVectorEnv and EnvPool.

Every backend's ``step`` returns a :class:`StepResult` with the same meaning, so the collector,
episode statistics and truncation bootstrapping are identical across them:

- Gymnasium envs run with *same-step* autoreset: the step that ends an episode already returns the
  next episode's first observation, and the final one comes separately.
- EnvPool uses *next-step* autoreset: the step after an episode end is a reset step (action ignored,
  reward 0).  Its adapter reports that step as ``valid=False`` (the collector drops it from learning
  and from episode statistics) and reports the returned observation of the ending step as its final one.

Atari ids (``ALE/<Game>-v5``) run on EnvPool with its v5 defaults, which differ from Gymnasium's ALE
v5 in one respect: no sticky actions (``repeat_action_probability`` 0 instead of 0.25); without EnvPool
(or with ``sync``/``async``) on ale-py with the same preprocessing (``core/envs/atari.py``).
Learning and reporting may see different episodes: on Atari the learner gets sign-clipped rewards and
a termination at every life loss ("episodic life", Mnih et al. 2015), while ``score`` and
``game_over`` describe the full game with its raw score, which is what results report.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from core.config.errors import ConfigError
from core.envs.make import is_atari, load_env_states, make_vec_env, save_env_states
from core.envs.step import StepResult

BACKENDS = ("auto", "sync", "async", "envpool")


class GymnasiumBackend:
    """Gymnasium vector env (sync or async with shared memory), same-step autoreset."""

    def __init__(self, env_id: str, num_envs: int, asynchronous: bool, env_kwargs: Optional[dict] = None):
        self.envs = make_vec_env(env_id, num_envs, asynchronous, env_kwargs)
        self.num_envs, self.asynchronous = num_envs, asynchronous
        self.single_observation_space = self.envs.single_observation_space
        self.single_action_space = self.envs.single_action_space
        # the env's own observation space: a Dict here is flattened into single_observation_space (core/envs/make.py)
        self.raw_observation_space = self.envs.raw_observation_space
        self._valid = np.ones(num_envs, dtype=bool)
        self._no_final: Optional[np.ndarray] = None

    def reset(self, seed: int) -> np.ndarray:
        return self.envs.reset(seed=seed)[0]

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, term, trunc, info = self.envs.step(actions)
        done = term | trunc
        success = None
        if done.any():
            final = np.zeros_like(obs)
            idx = np.flatnonzero(done)
            final[idx] = np.stack(info["final_obs"][idx])
            ended = info.get("final_info", {})
            if "is_success" in ended:  # Stable-Baselines3's convention for goal-reaching tasks
                success = np.where(ended["_is_success"], ended["is_success"], np.nan).astype(np.float64)
        else:  # most steps: one shared all-zero array (read-only for consumers), not a fresh one per step
            if self._no_final is None or self._no_final.shape != obs.shape:
                self._no_final = np.zeros_like(obs)
                self._no_final.flags.writeable = False
            final = self._no_final
        return StepResult(obs, reward, term, trunc, final, self._valid, reward, done, success)

    def state(self) -> Optional[list]:
        """Mid-episode env states for exact resume (sync only: async envs live in other processes)."""
        return None if self.asynchronous else save_env_states(self.envs)

    def load_state(self, states: Optional[list]) -> None:
        if states is not None and not self.asynchronous:
            load_env_states(self.envs, states)

    def close(self) -> None:
        self.envs.close()


class EnvPoolBackend:
    """EnvPool's C++ thread pool (gymnasium API), converted to the common semantics above."""

    def __init__(self, env_id: str, num_envs: int, seed: int, training: bool = True):
        import envpool

        # Atari: life-loss terminations and sign-clipped rewards for learning only; evaluation plays
        # whole games for their raw score.
        self.atari = is_atari(env_id)
        kwargs = dict(episodic_life=training, reward_clip=training) if self.atari else {}
        self.envs = envpool.make_gymnasium(envpool_id(env_id), num_envs=num_envs, seed=seed, **kwargs)
        self.num_envs = num_envs
        self.single_observation_space = self.envs.observation_space
        self.single_action_space = self.envs.action_space
        self._after_done = np.zeros(num_envs, dtype=bool)

    def reset(self, seed: int) -> np.ndarray:
        self._after_done[:] = False
        return self.envs.reset()[0]

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, term, trunc, info = self.envs.step(actions)
        valid = ~self._after_done
        done = (term | trunc) & valid
        self._after_done = done
        final = np.where(done.reshape(-1, *[1] * (obs.ndim - 1)), obs, 0).astype(obs.dtype)
        reward = np.where(valid, reward, 0.0)
        if self.atari:  # info["reward"] is the unclipped reward, info["terminated"] the real game over
            score = np.where(valid, info["reward"], 0.0)
            game_over = (info["terminated"].astype(bool) | trunc) & valid
        else:
            score, game_over = reward, done
        return StepResult(obs, reward, term & valid, trunc & valid, final, valid, score, game_over)

    def state(self) -> None:
        return None  # EnvPool cannot snapshot its envs: a resumed run restarts its episodes

    def load_state(self, blob) -> None:
        self._after_done[:] = False

    def close(self) -> None:
        self.envs.close()


def envpool_id(env_id: str) -> str:
    """Gymnasium's ``ALE/Pong-v5`` is EnvPool's ``Pong-v5``; other ids are shared."""
    return env_id.removeprefix("ALE/")


def envpool_supports(env_id: str) -> bool:
    try:
        import envpool
    except ImportError:
        return False
    return envpool_id(env_id) in envpool.list_all_envs()


def make_backend(env_id: str, num_envs: int, backend: str = "sync", seed: int = 0, training: bool = True,
                 env_kwargs: Optional[dict] = None):
    """Build the requested backend; ``auto`` picks EnvPool for ids it supports, else sync Gymnasium (Atari ids
    without EnvPool: :class:`core.envs.atari.AtariBackend`, sync or async).  ``training=False`` gives evaluation envs
    (on Atari: whole games, unclipped rewards).  ``env_kwargs`` go to the env's constructor (Gymnasium only)."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown --backend '{backend}'; choose one of: {', '.join(BACKENDS)}")
    if backend == "envpool" or (backend == "auto" and envpool_supports(env_id) and not env_kwargs):
        if env_kwargs:
            raise ConfigError("--env-kwargs go to Gymnasium constructors; EnvPool takes none: use --backend sync")
        if not envpool_supports(env_id):
            raise ConfigError(f"EnvPool does not provide '{env_id}' (or is not installed: pip install envpool); "
                              "use --backend sync or async")
        return EnvPoolBackend(env_id, num_envs, seed, training)
    if is_atari(env_id):  # ale-py with EnvPool's preprocessing, in Gymnasium vector envs (core/envs/atari.py)
        if env_kwargs:
            raise ConfigError("--env-kwargs are not supported for Atari ids (their preprocessing is fixed); drop them")
        from core.envs.atari import AtariBackend
        return AtariBackend(env_id, num_envs, asynchronous=backend == "async", training=training)
    return GymnasiumBackend(env_id, num_envs, backend == "async", env_kwargs)
