"""PettingZoo parallel environments: name resolution, observation padding and a batch of env copies.

Shapes: one env copy gives per-agent arrays ``(A, ...)``; the batch stacks ``E`` copies ``(E, A, ...)``.
Agents may differ in observation size (padded with zeros to the largest) and in action size (the
actor masks the missing logits / dimensions, see :class:`ActionLayout`).
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
from typing import Any, Callable, NamedTuple, Optional

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

from core.config.errors import ConfigError, shown
from core.config.limits import check_env_sizes
from core.config.parsing import importable_name
from core.envs.state import capture, restore_mapping
from dapo_ma.mpe_step import raw_mpe, step_mpe


def mpe_env_names() -> dict[str, str]:
    """Short mpe2 task names (``simple_spread_v3``) -> module paths (``mpe2.simple_spread_v3``)."""
    from mpe2.all_modules import mpe_environments

    return {key.split("/")[-1]: module.__name__ for key, module in mpe_environments.items()}


_LOCAL: dict[str, Callable[..., Any]] = {}  # env factories given as Python callables that cannot be imported by name


def claims_env(name: str) -> bool:
    """True for env strings only this family understands: mpe2 task names, and factories from the mpe2 and
    pettingzoo packages (``mpe2.simple_spread_v3:parallel_env``)."""
    package = name.partition(":")[0].split(".")[0]
    return name in mpe_env_names() or name.startswith("simple_") or (":" in name and package in ("mpe2", "pettingzoo"))


def env_reference(factory: Callable[..., Any]) -> str:
    """The ``--env`` string for a Python callable returning a ParallelEnv: ``module:qualname`` when that imports back
    to the same object, else a process-local name (the run cannot be reopened from another process then)."""
    imported = importable_name(factory)
    if imported is not None:
        return imported
    name = f"dapo-local/{getattr(factory, '__qualname__', '') or 'env'}-{id(factory):x}"
    _LOCAL[name] = factory
    return name


def env_factory(name: str) -> Callable[..., Any]:
    """The callable that builds env ``name``: an mpe2 task's or a module's ``parallel_env``, or ``module:factory``."""
    if name in _LOCAL:
        return _LOCAL[name]
    if name.startswith("dapo-local/"):
        raise ConfigError(f"env {name} was a Python callable that cannot be imported by name; pass it again: "
                          "dapo_ma.load(run_dir, env=make_env) or dapo_ma.train(resume=run_dir, env=make_env)")
    module_name, _, attr = name.partition(":")
    module_name = mpe_env_names().get(module_name, module_name)
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        module = None
    factory = getattr(module, attr or "parallel_env", None) if module is not None else None
    if callable(factory):
        return factory
    close = difflib.get_close_matches(name, list(mpe_env_names()), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else \
        f"; choose an mpe2 task ({', '.join(sorted(mpe_env_names()))}), a module with parallel_env() or 'module:make_env'"
    raise ConfigError(f"unknown --env '{name}'{hint}")


def imports_code(name: str) -> bool:
    """Whether building ``name`` would import a module the string chooses and call something from it: anything but an
    mpe2 task (its short name or module, with its own ``parallel_env``), a process-local callable, or a module that
    does not exist (its error says so).  An env named by a file must then be confirmed (core/config/trust.py)."""
    if not isinstance(name, str) or name in _LOCAL or name.startswith("dapo-local/"):
        return False
    module, _, attr = name.partition(":")
    tasks = mpe_env_names()
    module = tasks.get(module, module)  # as env_factory imports it
    if module in tasks.values() and attr in ("", "parallel_env"):
        return False
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None  # a top-level spec runs no code
    except (ImportError, ValueError):
        return True


def check_env_name(name: str) -> None:
    """Accept an mpe2 task name, a module with ``parallel_env``, or ``module:factory``; else a ConfigError naming the
    closest mpe2 tasks."""
    env_factory(name)


class PadObservations(BaseParallelWrapper):
    """Pads every agent's flat Box observation with zeros to the largest observation size ``D``, so
    that agents stack into ``(A, D)`` arrays.  Rewards, actions and episode ends pass through."""

    def __init__(self, env: ParallelEnv):
        super().__init__(env)
        spaces = {a: env.observation_space(a) for a in env.possible_agents}
        for agent, space in spaces.items():
            if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
                raise ConfigError(f"agent '{agent}' has observation space {space}; only flat Box observations "
                                  "are supported by the MLP policies")
        self.obs_dim = max(int(s.shape[0]) for s in spaces.values())
        self._spaces = {a: gym.spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32) for a in spaces}
        self._mpe = raw_mpe(env)  # an mpe2 task: stepped by dapo_ma.mpe_step (same results, faster)

    def observation_space(self, agent):
        return self._spaces[agent]

    def _pad(self, obs: dict) -> dict:
        out = {}
        for agent, o in obs.items():
            padded = np.zeros(self.obs_dim, np.float32)
            padded[: len(o)] = o
            out[agent] = padded
        return out

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._pad(obs), infos

    def step(self, actions):
        if self._mpe is not None:
            obs, rewards, terms, truncs, infos = step_mpe(self.env, self._mpe, actions)
        else:
            obs, rewards, terms, truncs, infos = self.env.step(actions)
        return self._pad(obs), rewards, terms, truncs, infos


def make_parallel_env(name: str, kwargs: dict[str, Any]) -> PadObservations:
    """Build one padded env copy; constructor problems become one-line ConfigErrors."""
    check_env_sizes(kwargs)  # before the factory: N=100000000 would build agents for minutes
    factory = env_factory(name)
    try:
        env = factory(**kwargs)
    except Exception as e:
        raise ConfigError(f"cannot create env '{name}' with --env-kwargs {shown(kwargs)}: {type(e).__name__}: "
                          f"{shown(str(e), 300)}") from e
    if not isinstance(env, ParallelEnv):
        raise ConfigError(f"--env {name} did not return a PettingZoo ParallelEnv (got {type(env).__name__})")
    return PadObservations(env)


class ActionLayout(NamedTuple):
    """How the agents' action spaces stack into one tensor.

    ``discrete``: actions ``(..., A)`` ints, logits padded to ``size`` = the largest action count, and
    ``mask[i, k]`` false for actions agent i does not have.  Continuous: actions ``(..., A, size)``,
    ``mask[i, k]`` false for dimensions agent i does not have; ``low``/``high`` ``(A, size)`` bounds.
    """

    discrete: bool
    size: int
    mask: np.ndarray   # (A, size) bool
    low: np.ndarray    # (A, size)
    high: np.ndarray   # (A, size)


class EnvSpec(NamedTuple):
    agents: tuple[str, ...]
    obs_dim: int
    layout: ActionLayout

    @property
    def n_agents(self) -> int:
        return len(self.agents)


def action_layout(env: ParallelEnv) -> ActionLayout:
    spaces = [env.action_space(a) for a in env.possible_agents]
    if all(isinstance(s, gym.spaces.Discrete) for s in spaces):
        sizes = [int(s.n) for s in spaces]
        size = max(sizes)
        mask = np.arange(size)[None, :] < np.array(sizes)[:, None]
        return ActionLayout(True, size, mask, np.zeros(mask.shape), np.zeros(mask.shape))
    if all(isinstance(s, gym.spaces.Box) and len(s.shape) == 1 for s in spaces):
        size = max(int(s.shape[0]) for s in spaces)
        mask, low, high = np.zeros((len(spaces), size), bool), np.zeros((len(spaces), size)), np.ones((len(spaces), size))
        for i, s in enumerate(spaces):
            n = s.shape[0]
            mask[i, :n], low[i, :n], high[i, :n] = True, s.low, s.high
        return ActionLayout(False, size, mask, low, high)
    raise ConfigError(f"action spaces {spaces} are not supported; all agents need Discrete or all 1-D Box actions")


def env_spec(name: str, kwargs: dict[str, Any]) -> EnvSpec:
    env = make_parallel_env(name, kwargs)
    spec = EnvSpec(tuple(env.possible_agents), env.obs_dim, action_layout(env))
    env.close()
    return spec


class EpisodeStats(NamedTuple):
    returns: np.ndarray  # (A,) undiscounted raw return of each agent
    length: int


class BatchStep(NamedTuple):
    """The result of stepping all ``E`` copies once."""

    obs: np.ndarray          # (E, A, D) next observation (the new episode's first where one ended)
    rewards: np.ndarray      # (E, A)
    terminated: np.ndarray   # (E, A) bool
    truncated: np.ndarray    # (E, A) bool; also set for agents cut off when another agent's episode ended
    final_obs: np.ndarray    # (E, A, D) last observation of an ended episode (zeros elsewhere)
    episodes: list[EpisodeStats]


class BatchedParallelEnv:
    """``E`` copies of a padded PettingZoo parallel env with a fixed agent axis.

    An env copy is reset when any of its agents is done.  Agents done by termination do not
    bootstrap; the others count as truncated (time-limit style) and bootstrap from the value of
    their final observation.  In MPE all agents end together by truncation at ``max_cycles``.
    """

    def __init__(self, name: str, kwargs: dict[str, Any], num_envs: int, seed: int):
        self.envs = [make_parallel_env(name, kwargs) for _ in range(num_envs)]
        first = self.envs[0]
        self.spec = EnvSpec(tuple(first.possible_agents), first.obs_dim, action_layout(first))
        self.agents, self.num_envs = self.spec.agents, num_envs
        self.ep_return = np.zeros((num_envs, len(self.agents)))
        self.ep_length = np.zeros(num_envs, dtype=np.int64)
        self.obs = np.stack([self._stack(env.reset(seed=seed + i)[0]) for i, env in enumerate(self.envs)])

    def _stack(self, per_agent: dict, fill: float = 0.0, dim: Optional[int] = None) -> np.ndarray:
        shape = () if dim is None else (dim,)
        default = np.full(shape, fill, np.float32)
        return np.stack([np.asarray(per_agent.get(a, default), np.float32) for a in self.agents])

    def _env_action(self, i: int, action: np.ndarray) -> Any:
        lay = self.spec.layout
        if lay.discrete:
            return int(action)
        n = int(lay.mask[i].sum())
        return np.clip(action[:n], lay.low[i, :n], lay.high[i, :n]).astype(np.float32)

    def step(self, actions: np.ndarray) -> BatchStep:
        """actions ``(E, A)`` discrete or ``(E, A, size)`` continuous."""
        E, A, D = self.num_envs, len(self.agents), self.spec.obs_dim
        rewards, term, trunc = np.zeros((E, A), np.float32), np.zeros((E, A), bool), np.zeros((E, A), bool)
        final_obs = np.zeros((E, A, D), np.float32)
        next_obs, episodes = np.empty((E, A, D), np.float32), []
        for e, env in enumerate(self.envs):
            act = {a: self._env_action(i, actions[e, i]) for i, a in enumerate(self.agents) if a in env.agents}
            obs, rew, te, tr, _ = env.step(act)
            rewards[e] = self._stack(rew)
            term[e] = self._stack(te).astype(bool)
            trunc[e] = self._stack(tr).astype(bool)
            next_obs[e] = self._stack(obs, dim=D)
            self.ep_return[e] += rewards[e]
            self.ep_length[e] += 1
            if (term[e] | trunc[e]).any() or not env.agents:
                trunc[e] |= ~term[e]  # the others are cut off: bootstrap them
                final_obs[e] = next_obs[e]
                episodes.append(EpisodeStats(self.ep_return[e].copy(), int(self.ep_length[e])))
                self.ep_return[e], self.ep_length[e] = 0.0, 0
                next_obs[e] = self._stack(env.reset()[0], dim=D)
        self.obs = next_obs
        return BatchStep(next_obs, rewards, term, trunc, final_obs, episodes)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    # --- exact resume: snapshot the picklable state of every wrapper layer ----------------------
    @staticmethod
    def _layers(env: Any) -> list:
        out, x = [], env
        while x is not None:
            out.append(x)
            nxt = x.__dict__.get("aec_env") or x.__dict__.get("env")
            x = nxt if isinstance(nxt, (AECEnv, ParallelEnv)) else None
        return out

    def state_dict(self) -> dict:
        """Mid-episode state of every copy as plain data (:mod:`core.envs.state`): each wrapper layer's attributes (the
        world, RNGs, step counters), restored into freshly built copies on resume; nothing is pickled."""
        snaps = [[capture({k: v for k, v in layer.__dict__.items() if not isinstance(v, (AECEnv, ParallelEnv))})
                  for layer in self._layers(env)] for env in self.envs]
        return {"envs": snaps, "obs": self.obs.copy(), "ep_return": self.ep_return.copy(),
                "ep_length": self.ep_length.copy()}

    def load_state_dict(self, s: dict) -> None:
        if s.get("envs") is None:  # a version-1 checkpoint: its pickled envs are never unpickled; keep fresh ones
            return
        if len(s["envs"]) != self.num_envs:
            raise ConfigError(f"checkpoint holds {len(s['envs'])} envs but the run uses {self.num_envs}")
        for env, layers in zip(self.envs, s["envs"]):
            for layer, snap in zip(self._layers(env), layers):
                restore_mapping(layer.__dict__, snap)
        self.obs, self.ep_return, self.ep_length = s["obs"].copy(), s["ep_return"].copy(), s["ep_length"].copy()
