"""Rollout storage and the collector that fills it with the behaviour policy."""
from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from core.envs import ObsNormalizer, RewardScaler, load_env_states, save_env_states, to_env_actions
from core.networks import Critic


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


class Collector:
    """Steps a same-step-autoreset vector env for ``num_steps`` and records finished episodes.

    Episode returns and lengths are measured on the raw (unscaled) rewards.
    """

    def __init__(self, envs: gym.vector.VectorEnv, num_steps: int, obs_norm: ObsNormalizer,
                 reward_scaler: RewardScaler, device: torch.device, seed: int):
        self.envs, self.num_steps, self.device = envs, num_steps, device
        self.obs_norm, self.reward_scaler = obs_norm, reward_scaler
        self.act_space = envs.single_action_space
        raw, _ = envs.reset(seed=seed)
        self.obs = self._obs(raw, update=True)                  # (N, D) normalised
        self.ep_return = np.zeros(envs.num_envs)
        self.ep_length = np.zeros(envs.num_envs, dtype=np.int64)

    def _obs(self, raw: np.ndarray, update: bool) -> Tensor:
        return self.obs_norm(torch.as_tensor(raw, dtype=torch.float32, device=self.device), update=update)

    @torch.no_grad()
    def collect(self, actor: torch.nn.Module, critic: Critic) -> tuple[Rollout, Tensor, list[tuple[float, int]]]:
        """Returns the rollout, V of the observation after it ``(N,)``, and finished (return, length) pairs."""
        steps: list[tuple] = []
        episodes: list[tuple[float, int]] = []
        for _ in range(self.num_steps):
            obs = self.obs
            dist = actor.distribution(obs)
            action = dist.sample()
            logp, value = actor.log_prob(dist, action), critic(obs)
            raw_next, reward, term, trunc, info = self.envs.step(to_env_actions(action, self.act_space))
            done = term | trunc
            self.ep_return += reward
            self.ep_length += 1
            for i in np.flatnonzero(done):
                episodes.append((float(self.ep_return[i]), int(self.ep_length[i])))
                self.ep_return[i], self.ep_length[i] = 0.0, 0
            final_value = torch.zeros(self.envs.num_envs, device=self.device)
            if trunc.any():  # bootstrap time-limit ends from the value of their final observation
                idx = np.flatnonzero(trunc)
                final_obs = self._obs(np.stack(info["final_obs"][idx]), update=False)
                final_value[torch.as_tensor(idx, device=self.device)] = critic(final_obs)
            done_t = torch.as_tensor(done, device=self.device)
            r = self.reward_scaler(torch.as_tensor(reward, dtype=torch.float32, device=self.device), done_t)
            steps.append((obs, action, logp, value, r, torch.as_tensor(term, device=self.device), done_t,
                          final_value))
            self.obs = self._obs(raw_next, update=True)
        rollout = Rollout(*(torch.stack(x) for x in zip(*steps)))
        return rollout, critic(self.obs), episodes

    def state_dict(self) -> dict:
        return {"envs": save_env_states(self.envs), "obs": self.obs, "ep_return": self.ep_return.copy(),
                "ep_length": self.ep_length.copy()}

    def load_state_dict(self, s: dict) -> None:
        load_env_states(self.envs, s["envs"])
        self.obs = s["obs"].to(self.device)
        self.ep_return, self.ep_length = s["ep_return"].copy(), s["ep_length"].copy()
