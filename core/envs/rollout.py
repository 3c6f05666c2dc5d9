"""Rollout storage and the collector that fills it: the behaviour policy acting at every env step (torch, or a
NumPy copy of small MLPs), observation and reward normalisation, and the conversion of actions for the envs.

:class:`TorchActing` calls the networks.  :class:`NumpyActing` acts with a NumPy copy of small MLP
networks on the CPU: at a handful of observations per step a 64x64 MLP is a few microseconds of
arithmetic, while torch's per-op dispatch and ``nn.Module`` calls cost several times more (actor plus
critic, one HalfCheetah observation: ~35 us in NumPy vs ~165 us in torch on the 2-core build machine;
experiments/bench_throughput.py measures the end-to-end effect).  The policy is fixed during a rollout,
so the weights are copied once per rollout.  The NumPy networks and action heads are those of
:mod:`core.algo.numpy_policy` (shared with the NumPy update); their log-probs are the laws of
:class:`core.algo.networks.GaussianActor` and ``Categorical``, so the update's recomputation gives ratios of 1 up
to float32 rounding (tested).
"""
from __future__ import annotations

import copy
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from core.algo.numpy_policy import copied_layers, head_class, mlp_forward, side_by_side, supported
from core.algo.networks import Critic


class TorchActing:
    """``act(obs (N, ...)) -> (actions, logp (N,), values (N,))`` with the torch networks."""

    def __init__(self, actor: nn.Module, critic: nn.Module):
        self.actor, self.critic = actor, critic

    def act(self, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        action, logp = self.actor.sample(obs)
        return action, logp, self.critic(obs)

    def value(self, obs: Tensor) -> Tensor:
        return self.critic(obs)


class NumpyActing:
    """MLP actor and critic evaluated in NumPy float32 (core.algo.numpy_policy); samples from its own seeded
    generator ``rng``."""

    def __init__(self, actor: nn.Module, critic: nn.Module, rng: np.random.Generator):
        self.rng = rng
        self.actor_w, self.critic_w = copied_layers(actor.net), copied_layers(critic.net)
        self.fused = side_by_side(self.actor_w, self.critic_w) if len(self.actor_w) == len(self.critic_w) else None
        head = head_class(actor)
        self.head = head(*(p.detach().numpy().astype(np.float32) for p in head.parameters(actor)))  # copies

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device) -> bool:
        """CPU MLP networks of the kinds :func:`core.algo.networks.build_networks` makes for flat observations."""
        return supported(actor, critic, device)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """NumPy in, NumPy out: the collector keeps the whole rollout in arrays (no per-step tensors)."""
        if self.fused is not None:
            both = mlp_forward(self.fused, obs)                                      # (N, A + 1) or (N, n + 1)
            out, value = both[:, :-1], both[:, -1]
        else:
            out, value = mlp_forward(self.actor_w, obs), self.value(obs)             # (N, A) or (N, n), (N,)
        action, logp = self.head.sample(out, self.rng)
        return action, logp.astype(np.float32, copy=False), value

    def value(self, obs: np.ndarray) -> np.ndarray:
        return mlp_forward(self.critic_w, obs)[:, 0]


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
        mean, var = np.array(s["mean"], dtype=np.float64), np.array(s["var"], dtype=np.float64)
        if mean.shape != self.mean.shape or var.shape != self.var.shape:  # another env's statistics, or corrupt ones
            raise ValueError(f"statistics of shape {mean.shape}, expected {self.mean.shape}")
        self.mean, self.var, self.count = mean, var, float(s["count"])


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
        mean, inv_std = self.affine()
        out = (np.asarray(obs, dtype=np.float32) - mean) * inv_std
        return np.clip(out, -self.clip, self.clip, out=out)

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """The float32 ``(mean, 1/std)`` ``(D,)`` that ``__call__`` normalises with (then clips to +-``clip``); an
        ONNX export folds in the same numbers (core/run/export.py)."""
        if self._affine is None:  # statistics change once per rollout; this runs at every env step
            self._affine = (self.rms.mean.astype(np.float32), (1.0 / np.sqrt(self.rms.var + VAR_EPS)).astype(np.float32))
        return self._affine

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
    (the stored, unclipped action keeps the log-prob consistent); MultiDiscrete ones ``(N, K)`` shifted by the
    space's ``start`` (the head counts from 0); MultiBinary ones ``(N, n)`` (stored as float 0/1) in the space's
    dtype."""
    a = actions.cpu().numpy() if isinstance(actions, Tensor) else actions
    if isinstance(act_space, gym.spaces.Box):
        a = np.clip(a, act_space.low, act_space.high)
    elif isinstance(act_space, gym.spaces.MultiDiscrete):
        a = (a + act_space.start).astype(act_space.dtype, copy=False)
    elif isinstance(act_space, gym.spaces.MultiBinary):
        a = a.astype(act_space.dtype, copy=False)
    return a


class Rollout(NamedTuple):
    """One rollout, every field ``(T, N, ...)`` on the training device.

    ``obs`` is normalised with the statistics of collection time; ``rewards`` are scaled rewards;
    ``final_values`` is V of the final observation where an episode was *truncated* at t (0 elsewhere).
    """

    obs: Tensor           # (T, N, D)
    actions: Tensor       # (T, N) discrete, (T, N, A) continuous, (T, N, K) MultiDiscrete / MultiBinary
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
    policies act through :class:`core.envs.rollout.NumpyActing` (sampling from this collector's seeded ``rng``).
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
