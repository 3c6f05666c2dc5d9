"""Multi-agent rollout storage ``(T, E, A, ...)`` and the on-policy collector."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from core.envs.rollout import RewardScaler
from dapo_ma.buffer import MATransitions
from dapo_ma.envs import BatchedParallelEnv, EpisodeStats
from dapo_ma.networks import MAActor, MACritic, critic_inputs


class MARollout(NamedTuple):
    """One rollout of ``T`` steps of ``E`` env copies with ``A`` agents, on the training device.

    ``rewards`` are scaled rewards; ``final_values`` is ``V_i`` of the final observation where agent
    i's episode was truncated at t (0 elsewhere), read by :func:`core.algo.advantages.next_state_values`.
    """

    obs: Tensor           # (T, E, A, D)
    critic_obs: Tensor    # (T, E, A, C)
    actions: Tensor       # (T, E, A) discrete or (T, E, A, K) continuous
    logp: Tensor          # (T, E, A)
    values: Tensor        # (T, E, A)
    rewards: Tensor       # (T, E, A)
    terminated: Tensor    # (T, E, A) bool
    dones: Tensor         # (T, E, A) bool, terminated or truncated
    final_values: Tensor  # (T, E, A)

    def flatten(self, advantages: Tensor, returns: Tensor) -> MATransitions:
        """``(T, E, A, ...)`` -> ``(T*E*A, ...)`` transitions of all agents for the shared buffer."""
        T, E, A = self.logp.shape
        agent_id = torch.arange(A, device=self.logp.device).expand(T, E, A)

        def flat(x: Tensor) -> Tensor:
            return x.reshape(T * E * A, *x.shape[3:])
        return MATransitions(flat(self.obs), flat(self.actions), flat(self.logp), flat(self.values),
                             flat(advantages), flat(returns), flat(agent_id), flat(self.critic_obs))


class MACollector:
    """Steps the batched env with the behaviour policy for ``num_steps`` and records episodes."""

    def __init__(self, envs: BatchedParallelEnv, num_steps: int, reward_scaler: RewardScaler, centralised: bool,
                 device: torch.device):
        self.envs, self.num_steps, self.device = envs, num_steps, device
        self.reward_scaler, self.centralised = reward_scaler, centralised
        E, A = envs.num_envs, len(envs.agents)
        self.agent_id = torch.arange(A, device=device).expand(E, A)  # (E, A)

    def _tensor(self, x: np.ndarray) -> Tensor:
        return torch.as_tensor(x, device=self.device)

    @torch.no_grad()
    def collect(self, actor: MAActor, critic: MACritic) -> tuple[MARollout, Tensor, list[EpisodeStats]]:
        """Returns the rollout, ``V_i`` of the observation after it ``(E, A)``, and finished episodes."""
        T, (E, A) = self.num_steps, self.agent_id.shape
        steps: list[tuple[Tensor, ...]] = []
        rewards, term, dones = (np.zeros((T, E, A), np.float32), np.zeros((T, E, A), bool),
                                np.zeros((T, E, A), bool))
        final_values = torch.zeros((T, E, A), device=self.device)
        episodes: list[EpisodeStats] = []
        obs = self._tensor(self.envs.obs)
        for t in range(T):
            c_obs = critic_inputs(obs, self.centralised)
            dist = actor.distribution(obs, self.agent_id)
            action = dist.sample()
            steps.append((obs, c_obs, action, actor.log_prob(dist, action, self.agent_id), critic(c_obs, self.agent_id)))
            out = self.envs.step(action.cpu().numpy())
            done = out.terminated | out.truncated
            episodes.extend(out.episodes)
            if out.truncated.any():  # bootstrap cut-off agents from the value of their final observation
                final_c_obs = critic_inputs(self._tensor(out.final_obs), self.centralised)
                final_values[t] = torch.where(self._tensor(out.truncated), critic(final_c_obs, self.agent_id), 0.0)
            scaled = self.reward_scaler(out.rewards.reshape(-1), done.reshape(-1)).reshape(E, A)
            rewards[t], term[t], dones[t] = scaled, out.terminated, done
            obs = self._tensor(out.obs)
        o, c, a, lp, v = (torch.stack(x) for x in zip(*steps))
        rollout = MARollout(o, c, a, lp, v, self._tensor(rewards), self._tensor(term), self._tensor(dones),
                            final_values)
        return rollout, critic(critic_inputs(obs, self.centralised), self.agent_id), episodes
