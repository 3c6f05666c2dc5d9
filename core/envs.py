"""Environment construction and observation/reward normalisation (statistics live in checkpoints)."""
from __future__ import annotations

import difflib
from typing import Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from torch import Tensor

from core.config import ConfigError


def _ensure_registered(env_id: str) -> None:
    if env_id.startswith("ALE/"):
        try:
            import ale_py
        except ImportError as e:
            raise ConfigError(f"{env_id} needs ale-py; install it with: pip install 'gymnasium[atari]'") from e
        gym.register_envs(ale_py)


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def check_env_id(env_id: str) -> None:
    """Raise a ConfigError naming close matches when ``env_id`` is not registered."""
    _ensure_registered(env_id)
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.pprint_registry() for ids"
    raise ConfigError(f"unknown --env '{env_id}'{hint}")


def make_vec_env(env_id: str, num_envs: int, asynchronous: bool = False) -> gym.vector.VectorEnv:
    """Gymnasium vector env with *same-step* autoreset: the step that ends an episode already returns
    the next episode's first observation and the final one in ``info['final_obs']``.  Sync envs hand
    out their observation buffer without copying (consumers copy); async envs use shared memory."""
    check_env_id(env_id)
    if is_atari(env_id):
        raise ConfigError(f"{env_id}: Atari runs use EnvPool's C++ preprocessing; use --backend envpool "
                          "(or auto) and install it with: pip install envpool")
    kwargs = {"autoreset_mode": AutoresetMode.SAME_STEP}
    kwargs.update({"shared_memory": True} if asynchronous else {"copy": False})
    try:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="async" if asynchronous else "sync",
                            vector_kwargs=kwargs)
    except Exception as e:  # missing simulator, bad kwargs, ...: one line for the user
        raise ConfigError(f"cannot create env '{env_id}': {type(e).__name__}: {e}") from e
    env_family(envs.single_observation_space, envs.single_action_space, env_id)
    return envs


def env_family(obs_space: gym.Space, act_space: gym.Space, env_id: str = "") -> str:
    """``atari`` (ALE ids, image observations), ``classic`` (Discrete actions) or ``continuous`` (Box
    actions); other envs need flat Box observations."""
    if is_atari(env_id) and isinstance(act_space, gym.spaces.Discrete):
        return "atari"
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise ConfigError(f"env '{env_id}' has observation space {obs_space}; only flat Box observations "
                          "are supported by the MLP trainer")
    if isinstance(act_space, gym.spaces.Discrete):
        return "classic"
    if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        return "continuous"
    raise ConfigError(f"env '{env_id}' has action space {act_space}; supported: Discrete, 1-D Box")


VAR_EPS = 1e-8  # the observation normaliser divides by sqrt(var + VAR_EPS)


class RunningMeanStd:
    """Streaming mean/variance (Chan et al. parallel update) over the batch axis of ``(B, *shape)``.

    Kept in float64 numpy on the host: observations arrive from the envs as numpy, and per-step
    updates of tiny arrays are several times cheaper there than as device tensors."""

    def __init__(self, shape: tuple[int, ...]):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 1e-4

    def update(self, x: np.ndarray) -> None:
        b_mean, b_var, b = x.mean(0), x.var(0), x.shape[0]
        delta, total = b_mean - self.mean, self.count + b
        self.mean = self.mean + delta * b / total
        self.var = (self.var * self.count + b_var * b + delta**2 * self.count * b / total) / total
        self.count = total

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, s: dict) -> None:
        self.mean, self.var, self.count = np.asarray(s["mean"]).copy(), np.asarray(s["var"]).copy(), s["count"]


class ObsNormalizer:
    """``clip((obs - mean) / sqrt(var + 1e-8), -10, 10)`` with running statistics; identity when off.
    obs ``(B, D)`` numpy -> float32 numpy."""

    def __init__(self, shape: tuple[int, ...], enabled: bool, clip: float = 10.0):
        self.enabled, self.clip = enabled, clip
        self.rms = RunningMeanStd(shape)
        self._affine: Optional[tuple[np.ndarray, np.ndarray]] = None  # float32 (mean, 1/std), per statistics

    def update(self, raw_obs: np.ndarray) -> None:
        """Add raw observations ``(B, D)`` to the statistics (the collector calls this once per rollout)."""
        if self.enabled:
            self.rms.update(np.asarray(raw_obs, dtype=np.float64))
            self._affine = None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Always a new array: vector envs may reuse their observation buffer on the next step.
        uint8 images pass through as uint8 (4x less rollout memory; the CNN scales them)."""
        if not self.enabled:
            return np.array(obs, dtype=np.uint8 if obs.dtype == np.uint8 else np.float32)
        if self._affine is None:  # statistics change once per rollout; this runs at every env step
            self._affine = (self.rms.mean.astype(np.float32), (1.0 / np.sqrt(self.rms.var + VAR_EPS)).astype(np.float32))
        mean, inv_std = self._affine
        out = (np.asarray(obs, dtype=np.float32) - mean) * inv_std
        return np.clip(out, -self.clip, self.clip, out=out)

    def state_dict(self) -> dict:
        return self.rms.state_dict()

    def load_state_dict(self, s: dict) -> None:
        self.rms.load_state_dict(s)
        self._affine = None

    @staticmethod
    def mean_std(s: dict) -> tuple[np.ndarray, np.ndarray]:
        """The ``(mean, std)`` ``(D,)`` float64 that ``__call__`` normalises with, from a ``state_dict``."""
        return np.asarray(s["mean"], np.float64), np.sqrt(np.asarray(s["var"], np.float64) + VAR_EPS)


class RewardScaler:
    """Divide rewards by the running std of each env's discounted return (as gymnasium's
    NormalizeReward): keeps value targets O(1) without shifting the optimum.  Identity when off.

    Works on a whole rollout at once: the discounted returns of all its steps update the statistics,
    then every reward of the rollout is scaled by the same std (consistent targets within a rollout).
    """

    def __init__(self, num_envs: int, gamma: float, enabled: bool, clip: float = 10.0):
        self.enabled, self.gamma, self.clip = enabled, gamma, clip
        self.rms = RunningMeanStd(())
        self.discounted = np.zeros(num_envs)

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """rewards, dones ``(T, N)`` (or ``(N,)`` for one step) -> scaled float32 of the same shape;
        ``dones[t]`` marks episodes that ended at step t (their running return restarts)."""
        rewards = np.asarray(rewards, dtype=np.float32)
        if not self.enabled:
            return rewards
        r, d = np.atleast_2d(rewards), np.atleast_2d(dones)
        returns = np.empty(r.shape)
        for t in range(r.shape[0]):
            self.discounted = self.discounted * self.gamma + r[t]
            returns[t] = self.discounted
            self.discounted = np.where(d[t], 0.0, self.discounted)
        self.rms.update(returns.reshape(-1))
        return np.clip(rewards / np.sqrt(self.rms.var + 1e-8), -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict:
        return {"rms": self.rms.state_dict(), "discounted": self.discounted.copy()}

    def load_state_dict(self, s: dict) -> None:
        self.rms.load_state_dict(s["rms"])
        self.discounted = np.asarray(s["discounted"]).copy()


def to_env_actions(actions, act_space: gym.Space) -> np.ndarray:
    """Tensor or array actions ``(N, ...)`` -> numpy for ``env.step``; Box actions clipped to the bounds
    (the stored, unclipped action keeps the log-prob consistent)."""
    a = actions.cpu().numpy() if isinstance(actions, Tensor) else actions
    if isinstance(act_space, gym.spaces.Box):
        a = np.clip(a, act_space.low, act_space.high)
    return a


def save_env_states(envs: gym.vector.SyncVectorEnv) -> bytes:
    """Pickle the sub-environments mid-episode so a resumed run continues them exactly.

    Plain Python envs pickle their full state; MuJoCo envs pickle only their constructor arguments
    (EzPickle), so their integration state and RNG are saved alongside and put back on load."""
    import pickle

    snaps = []
    for env in envs.envs:
        u, extra = env.unwrapped, None
        if hasattr(u, "model") and hasattr(u, "data"):
            import mujoco

            spec = mujoco.mjtState.mjSTATE_INTEGRATION
            state = np.empty(mujoco.mj_stateSize(u.model, spec))
            mujoco.mj_getState(u.model, u.data, state, spec)
            extra = (state, u.np_random.bit_generator.state)
        snaps.append((env, extra))
    return pickle.dumps(snaps)


def load_env_states(envs: gym.vector.SyncVectorEnv, blob: bytes) -> None:
    import pickle

    restored = []
    for env, extra in pickle.loads(blob):
        if extra is not None:
            import mujoco

            u = env.unwrapped
            mujoco.mj_setState(u.model, u.data, extra[0], mujoco.mjtState.mjSTATE_INTEGRATION)
            mujoco.mj_forward(u.model, u.data)
            u.np_random.bit_generator.state = extra[1]
        restored.append(env)
    if len(restored) != envs.num_envs:
        raise ConfigError(f"checkpoint holds {len(restored)} envs but the run uses {envs.num_envs}")
    envs.envs = restored
