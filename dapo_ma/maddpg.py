"""MADDPG (Lowe et al. 2017) and DAPO on it: the off-policy CTDE trainer, same envs, networks and loop as the rest.

Deterministic decentralised actors ``mu_i(o_i)``; centralised critics ``Q_i(o_1..o_A, a_1..a_A)``.
For a minibatch of joint transitions from the replay buffer::

    y_i      = r_i + gamma * (1 - term_i) * Q'_i(o', mu'_1(o'_1), ..., mu'_A(o'_A))
    L_Q      = mean_i (Q_i(o, a) - y_i)^2
    L_mu     = -mean_i Q_i(o, a_1, .., mu_i(o_i), .., a_A)  (+ 1e-3 * mean logits^2 for discrete)
    theta'  <- tau * theta + (1 - tau) * theta'             (Polyak target update)

Discrete actions are one-hot vectors from a straight-through Gumbel-softmax (Jang et al. 2017) on
the actor's logits, so gradients flow into ``mu_i`` through ``Q_i``; continuous actions are a
tanh squashed into the action box, explored with Gaussian noise.

``dapo-maddpg`` adds two ingredients, each switchable and the identity when off (:mod:`dapo_ma.dapo_maddpg`):
shared sampling weights over the replay buffer (``--dynamic-sampling``) and per-agent clip parameters
(``--per-agent-clips``), adapted by per-agent health monitors.
"""
from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from core.algo.schedules import ClipRanges, ClipSchedule
from core.algo.health import HealthController, HealthRules, all_finite
from core.algo.sampler import Temperature
from dapo_ma import dapo_maddpg as dm
from dapo_ma.config import MAConfig
from dapo_ma.envs import ActionLayout, EnvSpec
from dapo_ma import health
from dapo_ma.loop import MATrainerBase
from dapo_ma.networks import MASKED_LOGIT, AgentMLP, critic_inputs
from dapo_ma.replay import JointTransitions, ReplayBuffer

LOGIT_REG = 1e-3  # the original MADDPG's penalty on the squared pre-activations of discrete actors


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """Polyak averaging ``theta' <- tau * theta + (1 - tau) * theta'`` for every parameter."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.mul_(1.0 - tau).add_(s, alpha=tau)


class DeterministicActor(nn.Module):
    """``mu_i(o_i)`` as a critic-ready action ``(..., size)``: one-hot (discrete) or a box vector."""

    def __init__(self, obs_dim: int, layout: ActionLayout, n_agents: int, hidden: Sequence[int], shared: bool,
                 gumbel_temperature: float, noise: float):
        super().__init__()
        self.discrete, self.tau_g, self.noise = layout.discrete, gumbel_temperature, noise
        self.net = AgentMLP(obs_dim, layout.size, n_agents, hidden, shared, out_gain=0.01)
        self.register_buffer("mask", torch.as_tensor(layout.mask))                      # (A, size)
        self.register_buffer("low", torch.as_tensor(layout.low, dtype=torch.float32))   # (A, size)
        self.register_buffer("high", torch.as_tensor(layout.high, dtype=torch.float32))

    def forward(self, obs: Tensor, agent_id: Tensor, explore: bool) -> tuple[Tensor, Tensor]:
        """Returns (action ``(..., size)``, raw output ``(..., size)``)."""
        out = self.net(obs, agent_id)
        if self.discrete:
            logits = out.masked_fill(~self.mask[agent_id], MASKED_LOGIT)
            if explore:
                return nn.functional.gumbel_softmax(logits, tau=self.tau_g, hard=True), out
            return nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(out.dtype), out
        low, high = self.low[agent_id], self.high[agent_id]
        action = low + (high - low) * (torch.tanh(out) + 1) / 2
        if explore:
            action = torch.minimum(torch.maximum(action + self.noise * (high - low) * torch.randn_like(action), low), high)
        return action, out

    def act(self, obs: Tensor, agent_id: Tensor, deterministic: bool) -> Tensor:
        """Env-format actions: indices ``(...)`` for discrete, vectors ``(..., size)`` otherwise."""
        action, _ = self(obs, agent_id, explore=not deterministic)
        return action.argmax(-1) if self.discrete else action


class JointCritic(nn.Module):
    """``Q_i(o_1..o_A, a_1..a_A)``: inputs obs ``(B, A, D)`` and per-agent joint actions
    ``(B, A, A*size)`` (row i is the joint action agent i's critic scores) -> ``(B, A)``."""

    def __init__(self, obs_dim: int, act_size: int, n_agents: int, hidden: Sequence[int], shared: bool):
        super().__init__()
        self.net = AgentMLP(n_agents * (obs_dim + act_size), 1, n_agents, hidden, shared, out_gain=1.0)

    def forward(self, obs: Tensor, joint_actions: Tensor, agent_id: Tensor) -> Tensor:
        x = torch.cat([critic_inputs(obs, centralised=True), joint_actions], dim=-1)
        return self.net(x, agent_id).squeeze(-1)


def joint_actions(actions: Tensor) -> Tensor:
    """The joint action every agent's critic sees: ``(B, A, size)`` -> ``(B, A, A*size)``."""
    B, A, K = actions.shape
    return actions.reshape(B, 1, A * K).expand(B, A, A * K)


def replace_own_action(buffer_actions: Tensor, policy_actions: Tensor) -> Tensor:
    """Row i = the buffer's joint action with agent i's slot replaced by ``mu_i``'s action.
    ``(B, A, size)`` x2 -> ``(B, A, A*size)``; gradients reach ``policy_actions[:, i]`` only via row i."""
    B, A, K = buffer_actions.shape
    own = torch.eye(A, dtype=torch.bool, device=buffer_actions.device).view(1, A, A, 1)
    mixed = torch.where(own, policy_actions.unsqueeze(1), buffer_actions.unsqueeze(1))  # (B, A, A, K)
    return mixed.reshape(B, A, A * K)


def build_actor(cfg: MAConfig, spec: EnvSpec) -> DeterministicActor:
    """The decentralised deterministic actor ``mu_i(o_i)``."""
    return DeterministicActor(spec.obs_dim, spec.layout, spec.n_agents, cfg.hidden_sizes, cfg.parameter_sharing,
                              cfg.gumbel_temperature, cfg.exploration_noise)


class MADDPGTrainer(MATrainerBase):
    # checked against a fresh trainer before loading (core.training.checkpoint.check_schema): shapes, one clip
    # scale per agent, finite values
    CHECKPOINT_SCHEMA = ("actor", "critic", "target_actor", "target_critic", "clips")

    def __init__(self, cfg: MAConfig, run_dir: Path, checkpoint: Optional[dict] = None):
        super().__init__(cfg, run_dir)
        spec, A, dev = self.spec, self.n_agents, self.device
        self.actor = build_actor(cfg, spec).to(dev)
        self.critic = JointCritic(spec.obs_dim, spec.layout.size, A, cfg.hidden_sizes, cfg.parameter_sharing).to(dev)
        self.target_actor, self.target_critic = copy.deepcopy(self.actor), copy.deepcopy(self.critic)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.prioritized = bool(cfg.dynamic_sampling)  # dapo-maddpg's shared sampling weights
        if self.prioritized:
            temperature = Temperature(cfg.temperature_mode, cfg.temperature_init, cfg.temperature_decay,
                                      cfg.temperature_min, cfg.ess_target, cfg.temperature_lr)
            self.replay = dm.SharedPriorityReplay(cfg.buffer_size, dev, temperature, cfg.importance_correction,
                                                  cfg.seed)
        else:
            self.replay = ReplayBuffer(cfg.buffer_size, A, spec.obs_dim, spec.layout.size, dev)
        # dapo-maddpg's per-agent clip parameters (applied with --per-agent-clips; else MADDPG's unclipped losses,
        # the remedies still widening the ranges that would apply) and per-agent health monitors
        self.clips = ClipSchedule.from_config(cfg, A, per_agent=True, decoupled=True, clip_value=True)
        self.clipping = bool(cfg.per_agent_clips)
        # the clips' anchor: the networks as they were at the start of the iteration (docs/algorithms.md 5)
        self.anchor_actor, self.anchor_critic = copy.deepcopy(self.actor), copy.deepcopy(self.critic)
        self.health = HealthController(A, HealthRules.from_config(cfg), self.clips, self.health_log,
                                       lambda: copy.deepcopy(self.actor.state_dict()), self._restore_agent,
                                       health.MESSAGES)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed(cfg.seed)
        self.agent_id = torch.arange(A, device=dev)
        self.batched_steps = 0  # env.step calls of the batch, for train_every
        if checkpoint is not None:
            self.load_state_dict(checkpoint)

    @property
    def steps_per_iteration(self) -> int:
        return self.cfg.num_envs * self.cfg.num_steps

    def _explore(self, obs: Tensor) -> Tensor:
        """Critic-format actions ``(E, A, size)``: uniform random during warm-up, then mu + noise."""
        if self.global_step < self.cfg.learning_starts:
            lay = self.spec.layout
            if lay.discrete:
                logits = torch.where(self.actor.mask, 0.0, MASKED_LOGIT).expand(obs.shape[0], -1, -1)
                idx = torch.distributions.Categorical(logits=logits).sample()
                return nn.functional.one_hot(idx, lay.size).float()
            return self.actor.low + (self.actor.high - self.actor.low) * torch.rand(
                obs.shape[0], *self.actor.low.shape, device=self.device)
        return self.actor(obs, self.agent_id.expand(obs.shape[0], -1), explore=True)[0]

    def iterate(self) -> dict[str, float]:
        c = self.cfg
        self.critic_opt.param_groups[0]["lr"] = c.critic_lr * self.health.critic_lr_scale  # divergence remedy
        t0, episodes, sums, n_updates = time.perf_counter(), [], {}, 0
        if self.prioritized and self.replay.size:
            self.replay.sampler.temperature.on_rollout(self.replay.sampler.window().advantages)  # ema / learnable
        if self.clipping:
            self.anchor_actor.load_state_dict(self.actor.state_dict())
            self.anchor_critic.load_state_dict(self.critic.state_dict())
        for _ in range(c.num_steps):
            obs = torch.as_tensor(self.envs.obs, device=self.device)
            with torch.no_grad():
                action = self._explore(obs)
            env_action = action.argmax(-1) if self.spec.layout.discrete else action
            out = self.envs.step(env_action.cpu().numpy())
            episodes.extend(out.episodes)
            ended = (out.terminated | out.truncated).any(1, keepdims=True)
            next_obs = np.where(ended[..., None], out.final_obs, out.obs)
            self.replay.add(JointTransitions(obs, action, torch.as_tensor(out.rewards, device=self.device),
                                             torch.as_tensor(next_obs, device=self.device),
                                             torch.as_tensor(out.terminated, device=self.device)))
            self.global_step += c.num_envs
            self.batched_steps += 1
            if self.global_step >= c.learning_starts and self.replay.size >= c.batch_size \
                    and self.batched_steps % c.train_every == 0:
                for k, v in self.update().items():
                    sums[k] = sums.get(k, 0.0) + v
                n_updates += 1
        self.iteration += 1
        train = {k: v / max(n_updates, 1) for k, v in sums.items()}
        per_agent = {}
        for i, a in enumerate(self.spec.agents):
            per_agent.update({f"agent/{a}/{name}": train.pop(f"{name}_{i}", float("nan"))
                              for name in ("q_mean", "value_error", "actor_clip_fraction", "critic_clip_fraction")})
        self._watch_health(episodes, np.array([per_agent[f"agent/{a}/value_error"] for a in self.spec.agents]))
        sampler = self.replay.sampler.stats() if self.prioritized and self.replay.size else {}
        if self.clipping:
            ranges = self.clips.ranges(self.global_step / c.total_steps, self.device)
            for i, a in enumerate(self.spec.agents):
                per_agent.update({f"agent/{a}/eps_pi": float(ranges.eps_low[i]), f"agent/{a}/eps_V": float(ranges.eps_v[i])})
        return {**self.episode_metrics(episodes), **{f"train/{k}": v for k, v in train.items()}, **per_agent,
                **sampler, "train/updates": n_updates, **{f"health/{k}": v for k, v in self.health_counts.items()},
                "time/iteration_s": time.perf_counter() - t0}

    def _watch_health(self, episodes, value_errors: np.ndarray) -> None:
        """dapo-maddpg's per-agent monitors (a no-op when they are off): a collapse restores the agent's actor
        (and the target and anchor actors) and widens its eps_pi; a divergence its eps_V and the critic lr."""
        returns = np.stack([ep.returns for ep in episodes]) if episodes else np.zeros((0, self.n_agents))
        self.health.watch(self.global_step, returns, value_errors)

    def _restore_agent(self, snapshot: dict, agent: int) -> None:
        """The collapse remedy: agent ``agent``'s best actor, also into the target and anchor actors."""
        health.restore_agent(self.actor, snapshot, agent, self.cfg.parameter_sharing)
        self.target_actor.load_state_dict(self.actor.state_dict())
        self.anchor_actor.load_state_dict(self.actor.state_dict())

    def critic_loss(self, batch: JointTransitions, ranges: Optional[ClipRanges] = None,
                    weights: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, dict]:
        """``L_Q``, the mean ``Q_i`` per agent ``(A,)``, the TD errors ``y - Q`` ``(B, A)`` and per-agent diagnostics;
        with ``ranges`` agent i's Q is clipped around the anchor critic's by eps_V[i] (dapo-maddpg), with ``weights``
        ``(B,)`` each sample's loss is weighted (importance correction)."""
        ids = self.agent_id.expand(batch.obs.shape[0], -1)
        with torch.no_grad():
            next_act, _ = self.target_actor(batch.next_obs, ids, explore=True)
            q_next = self.target_critic(batch.next_obs, joint_actions(next_act), ids)  # (B, A)
            y = batch.rewards + self.cfg.gamma * (~batch.terminated).float() * q_next
        q = self.critic(batch.obs, joint_actions(batch.actions), ids)
        diag = {}
        if ranges is None:
            per = (q - y).pow(2)
        else:
            with torch.no_grad():
                anchor = self.anchor_critic(batch.obs, joint_actions(batch.actions), ids)
            per, diag["critic_clip_fraction"] = dm.clipped_q(q, anchor, y, ranges.eps_v)
        loss = per.mean() if weights is None else (per * weights[:, None]).mean()
        diag["value_error"] = (q - y).detach().pow(2).mean(0)
        return loss, q.detach().mean(0), (y - q).detach(), diag

    def actor_loss(self, batch: JointTransitions, ranges: Optional[ClipRanges] = None,
                   weights: Optional[Tensor] = None) -> tuple[Tensor, dict]:
        """``L_mu``: each agent's critic scores the buffer's joint action with its own slot from ``mu_i``; with
        ``ranges`` agent i's action is kept within eps_pi[i] of the anchor actor's (dapo-maddpg)."""
        ids = self.agent_id.expand(batch.obs.shape[0], -1)
        diag = {}
        if ranges is None:
            pi_act, raw = self.actor(batch.obs, ids, explore=True)
        else:
            pi_act, raw, diag["actor_clip_fraction"] = self._clipped_actions(batch.obs, ids, ranges)
        q_pi = self.critic(batch.obs, replace_own_action(batch.actions, pi_act), ids)
        per = -q_pi if weights is None else -q_pi * weights[:, None]
        return per.mean() + (LOGIT_REG * raw.pow(2).mean() if self.spec.layout.discrete else 0.0), diag

    def _clipped_actions(self, obs: Tensor, ids: Tensor, ranges: ClipRanges) -> tuple[Tensor, Tensor, Tensor]:
        """The exploring actions of ``mu`` within each agent's trust region around the anchor actor's."""
        a = self.actor
        if a.discrete:
            raw, logits = dm.masked_logits(a, obs, ids)
            with torch.no_grad():
                _, anchor = dm.masked_logits(self.anchor_actor, obs, ids)
            action, frac = dm.clipped_gumbel(logits, anchor, a.tau_g, ranges.eps_low, ranges.eps_high)
            return action, raw, frac
        raw = a.net(obs, ids)
        low, high = a.low[ids], a.high[ids]
        with torch.no_grad():
            anchor = low + (high - low) * (torch.tanh(self.anchor_actor.net(obs, ids)) + 1) / 2
        mu, frac = dm.clipped_box(low + (high - low) * (torch.tanh(raw) + 1) / 2, anchor, a.high - a.low,
                                  ranges.eps_low, ranges.eps_high)
        action = torch.minimum(torch.maximum(mu + a.noise * (high - low) * torch.randn_like(mu), low), high)
        return action, raw, frac

    def update(self) -> dict[str, float]:
        """One gradient step for the critics, then the actors against the updated critics, then the
        Polyak target update.  A non-finite loss skips the rest of the step (a health event)."""
        idx = weights = None
        if self.prioritized:
            batch, idx, weights = self.replay.sample(self.cfg.batch_size)
        else:
            batch = self.replay.sample(self.cfg.batch_size, self.generator)
        ranges = self.clips.ranges(self.global_step / self.cfg.total_steps, self.device) if self.clipping else None
        critic_loss, q_mean, td, critic_diag = self.critic_loss(batch, ranges, weights)
        if not self._step("critic", critic_loss, self.critic, self.critic_opt):
            return {}
        if self.prioritized:  # the drawn transitions' shared priority: the agents' mean |TD error|
            self.replay.update_priorities(idx, td.abs().mean(1))
            self.replay.sampler.temperature.on_update()
        actor_loss, actor_diag = self.actor_loss(batch, ranges, weights)
        if not self._step("actor", actor_loss, self.actor, self.actor_opt):
            return {}
        soft_update(self.target_critic, self.critic, self.cfg.tau)
        soft_update(self.target_actor, self.actor, self.cfg.tau)
        per_agent = {f"{name}_{i}": float(v) for name, values in (("q_mean", q_mean), *critic_diag.items(),
                                                                 *actor_diag.items()) for i, v in enumerate(values)}
        return {"critic_loss": float(critic_loss.detach()), "actor_loss": float(actor_loss.detach()), **per_agent}

    def _step(self, what: str, loss: torch.Tensor, net: nn.Module, optimizer: torch.optim.Optimizer) -> bool:
        """One clipped gradient step of ``net`` on ``loss``; a non-finite loss skips it (a health event): False."""
        if not all_finite([loss]):
            self._record("non_finite", f"non-finite MADDPG {what} loss; step skipped")
            return False
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), self.cfg.max_grad_norm)
        optimizer.step()
        return True

    def state_dict(self) -> dict:
        return {**super().state_dict(), "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "target_actor": self.target_actor.state_dict(), "target_critic": self.target_critic.state_dict(),
                "actor_opt": self.actor_opt.state_dict(), "critic_opt": self.critic_opt.state_dict(),
                "replay": self.replay.state_dict(), "generator": self.generator.get_state(),
                "batched_steps": self.batched_steps, "health": self.health.state_dict(),
                "clips": self.clips.state_dict()}

    def load_state_dict(self, s: dict) -> None:
        super().load_state_dict(s)
        for name in ("actor", "critic", "target_actor", "target_critic", "actor_opt", "critic_opt", "replay"):
            getattr(self, name).load_state_dict(s[name])
        self.generator.set_state(s["generator"])
        self.batched_steps = s["batched_steps"]
        if "health" in s:  # checkpoints of plain MADDPG before dapo-maddpg have neither
            self.health.load_state_dict(health.upgrade_health_state(s["health"]))
        if s.get("clips") is not None:
            self.clips.load_state_dict(s["clips"])
