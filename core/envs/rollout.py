"""Rollout storage and the collector that fills it with the behaviour policy."""
from __future__ import annotations

import copy
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from core.envs.acting import NumpyActing, TorchActing
from core.envs.make import ObsNormalizer, RewardScaler, to_env_actions
from core.algo.networks import Critic


class Rollout(NamedTuple):
    """One rollout, every field ``(T, N, ...)`` on the training device.

    ``obs`` is normalised with the statistics of collection time; ``rewards`` are scaled rewards;
    ``final_values`` is V of the final observation where an episode was *truncated* at t (0 elsewhere).
    """

    obs: Tensor           # (T, N, D)
    actions: Tensor       # (T, N) discrete or (T, N, A) continuous
    logp: Tensor          # (T, N) behaviour log-prob
    values: Tensor        # (T, N) V_old(s_t)
    rewards: Tensor       # (T, N)
    terminated: Tensor    # (T, N) bool
    dones: Tensor         # (T, N) bool, terminated or truncated
    final_values: Tensor  # (T, N)
    valid: Tensor         # (T, N) bool; False for a backend's reset steps, which carry no learning signal


class Episode(NamedTuple):
    """A finished episode: raw return, valid steps, and 1/0 if the env reported reaching its goal (else None)."""

    score: float
    length: int
    success: Optional[float] = None


class Collector:
    """Steps a rollout backend (core.envs.backends) for ``num_steps`` and records finished episodes.

    Episode returns and lengths are measured on the backend's ``score`` (raw, unscaled rewards) of
    valid steps, over its ``game_over`` episodes (whole games on Atari).  With ``numpy_acting`` CPU MLP
    policies act through :class:`core.envs.acting.NumpyActing` (sampling from this collector's seeded ``rng``).
    """

    def __init__(self, envs, num_steps: int, obs_norm: ObsNormalizer,
                 reward_scaler: RewardScaler, device: torch.device, seed: int, numpy_acting: bool = False):
        self.envs, self.num_steps, self.device = envs, num_steps, device
        self.numpy_acting, self.rng = numpy_acting, np.random.default_rng(seed)
        self.obs_norm, self.reward_scaler = obs_norm, reward_scaler
        self.act_space = envs.single_action_space
        self._staging: Optional[Tensor] = None
        raw = envs.reset(seed=seed)
        self.obs_norm.update(raw)
        self.raw_obs = np.array(raw)          # (N, *obs_shape) as the envs returned it
        self.ep_return = np.zeros(envs.num_envs)
        self.ep_length = np.zeros(envs.num_envs, dtype=np.int64)

    def _obs(self, raw: np.ndarray, staged: bool = True, as_numpy: bool = False):
        """Normalised observations: a NumPy array (``as_numpy``, NumPy acting's input) or a tensor on the
        training device (the torch policy's input)."""
        if as_numpy:
            return self.obs_norm(raw)
        host = torch.from_numpy(self.obs_norm(raw))
        if self.device.type != "cuda" or not staged:
            return host.to(self.device)
        # Pinned staging memory lets the copy run asynchronously; the next step's `.cpu()` of the
        # actions synchronises, so the staging buffer is never overwritten while in flight.
        if self._staging is None or self._staging.shape != host.shape:
            self._staging = torch.empty(host.shape, dtype=host.dtype).pin_memory()
        self._staging.copy_(host)
        return self._staging.to(self.device, non_blocking=True)

    @torch.no_grad()
    def collect(self, actor: torch.nn.Module, critic: Critic) -> tuple[Rollout, Tensor, list[tuple[float, int]]]:
        """Returns the rollout, V of the observation after it ``(N,)``, and finished (return, length) pairs.

        Normalisation statistics are frozen during the rollout (every observation of a rollout is
        normalised alike) and updated with its raw observations at the end."""
        T, N = self.num_steps, self.envs.num_envs
        obs, actions, logps, values = [], [], [], []
        # raw observations are kept only to update the normaliser's statistics
        raw_seen = np.empty((T, *self.raw_obs.shape), np.float32) if self.obs_norm.enabled else None
        rewards, terminated, dones = np.zeros((T, N), np.float32), np.zeros((T, N), bool), np.zeros((T, N), bool)
        valid = np.ones((T, N), bool)
        final_values = torch.zeros((T, N), device=self.device)
        episodes: list[Episode] = []
        use_numpy = self.numpy_acting and NumpyActing.supports(actor, critic, self.device)
        policy = NumpyActing(actor, critic, self.rng) if use_numpy else TorchActing(actor, critic)
        # NumPy acting takes and returns arrays: the rollout stays in NumPy until it is stacked at the end
        observe = functools.partial(self._obs, as_numpy=use_numpy)
        current = observe(self.raw_obs)
        for t in range(T):
            action, logp, value = policy.act(current)
            obs.append(current)
            actions.append(action)
            logps.append(logp)
            values.append(value)
            step = self.envs.step(to_env_actions(action, self.act_space))
            done = step.terminated | step.truncated
            self.ep_return += step.score
            self.ep_length += step.valid
            for i in np.flatnonzero(step.game_over):
                success = None if step.success is None or np.isnan(step.success[i]) else float(step.success[i])
                episodes.append(Episode(float(self.ep_return[i]), int(self.ep_length[i]), success))
                self.ep_return[i], self.ep_length[i] = 0.0, 0
            if step.truncated.any():  # bootstrap time-limit ends from the value of their final observation
                idx = np.flatnonzero(step.truncated)
                final_values[t, torch.as_tensor(idx, device=self.device)] = torch.as_tensor(
                    policy.value(observe(step.final_obs[idx], staged=False)))
            rewards[t], terminated[t], dones[t], valid[t] = step.reward, step.terminated, done, step.valid
            if raw_seen is not None:
                raw_seen[t] = step.obs
            current = observe(step.obs)
        self.raw_obs = np.array(step.obs)
        last_values = torch.as_tensor(policy.value(current))
        if raw_seen is not None:
            self.obs_norm.update(raw_seen.reshape(-1, *raw_seen.shape[2:]))

        def dev(x):
            return torch.as_tensor(x, device=self.device)

        def stack(xs):
            return torch.from_numpy(np.stack(xs)) if use_numpy else torch.stack(xs)
        rollout = Rollout(stack(obs), stack(actions), stack(logps), stack(values),
                          dev(self.reward_scaler(rewards, dones)), dev(terminated), dev(dones), final_values,
                          dev(valid))
        return rollout, last_values, episodes

    def state_dict(self) -> dict:
        return {"envs": self.envs.state(), "raw_obs": self.raw_obs.copy(), "ep_return": self.ep_return.copy(),
                "ep_length": self.ep_length.copy(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, s: dict) -> None:
        if "rng" in s:  # checkpoints before NumpyActing have none
            self.rng.bit_generator.state = s["rng"]
        self.envs.load_state(s["envs"])
        if s["envs"] is None:  # the backend cannot restore its envs: keep their fresh episodes
            self.ep_return[:], self.ep_length[:] = 0.0, 0
            return
        self.raw_obs = s["raw_obs"].copy()
        self.ep_return, self.ep_length = s["ep_return"].copy(), s["ep_length"].copy()


class Prefetcher:
    """Double buffering (docs/algorithms.md): while the learner updates on rollout k, a worker collects rollout k+1
    with a frozen copy of the networks taken before the update.

    The worker is the collector's own process when it has one (:class:`core.envs.collector.CollectorProcess`
    has ``submit``), else a thread.  The data is then one update old; the stored behaviour ``logp_old``
    and ``V_old`` make the clipped objectives correct for it.  With ``enabled=False`` this is a plain
    synchronous collector.
    """

    def __init__(self, collector, actor: torch.nn.Module, critic: Critic, enabled: bool):
        self.collector, self.enabled = collector, enabled
        # one deepcopy of the pair keeps parameters they share (an image encoder) shared in the copy
        self.behaviour = copy.deepcopy((actor, critic)) if enabled else None
        self.executor = None
        if enabled and not hasattr(collector, "submit"):
            self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="collector")
        self.pending: Optional[tuple] = None   # a finished prefetched rollout
        self.future = None                      # a collection in flight (``result()`` returns it)

    def next(self, actor: torch.nn.Module, critic: Critic, prefetch: bool):
        """The rollout to learn from now; starts collecting the following one when ``prefetch``."""
        if not self.enabled:
            return self.collector.collect(actor, critic)
        ready = self.pending if self.pending is not None else self.collector.collect(actor, critic)
        self.pending = None
        if prefetch:
            for frozen, live in zip(self.behaviour, (actor, critic)):
                frozen.load_state_dict(live.state_dict())
            if self.executor is None:
                self.future = self.collector.submit(*self.behaviour)
            else:
                self.future = self.executor.submit(self.collector.collect, *self.behaviour)
        return ready

    def wait(self) -> None:
        """Join the worker (call after the update, before checkpointing)."""
        if self.future is not None:
            self.pending, self.future = self.future.result(), None

    def state_dict(self) -> dict:
        self.wait()
        return {"collector": self.collector.state_dict(), "pending": self.pending}

    def load_state_dict(self, s: dict) -> None:
        self.collector.load_state_dict(s["collector"])
        self.pending = s["pending"]
