"""IPPO, MAPPO and DAPO-MA: one on-policy trainer, the algorithms differ only by their resolved config.

One iteration: collect ``(T, E, A)`` -> GAE per agent column (``(T, E*A)``, core's
:func:`~core.algo.advantages.gae`) -> all agents' ``T*E*A`` transitions into ONE shared
:class:`~dapo_ma.buffer.AgentSampler` -> core's :func:`~core.training.update.ppo_update`, whose
``clip_ranges(mb)`` gathers ``eps_pi[agent_id]`` and ``eps_V[agent_id]`` per sample, so agent i's
samples are clipped only with agent i's ranges.

- ippo: local critics ``V_i(o_i)``, one shared clip, uniform minibatches;
- mappo: centralised critic ``V_i(o_1..o_A)``, one shared clip for policy and value;
- dapo-ma: centralised critic, per-agent ``eps_pi[i]``/``eps_V[i]`` (eps_V scheduled 0.5 -> 0.3),
  separate actor/critic optimisers, dynamic sampling over all agents, per-agent health monitors.
"""
from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from core.algo import schedules
from core.algo.advantages import gae, next_state_values
from core.envs.rollout import RewardScaler
from core.algo.schedules import ClipRanges, ClipSchedule
from core.algo.health import HealthController, HealthRules, NonFiniteGuard
from core.algo.advantages import explained_variance
from core.algo.sampler import Temperature
from core.training.update import Evaluation, UpdateSettings, grad_groups, ppo_update
from dapo_ma.buffer import AgentSampler, MATransitions
from dapo_ma.config import MAConfig
from dapo_ma.envs import EnvSpec
from dapo_ma import health
from dapo_ma.loop import MATrainerBase
from dapo_ma.networks import MAActor, MACritic
from dapo_ma.rollout import MACollector


def build_actor(cfg: MAConfig, spec: EnvSpec) -> MAActor:
    """The decentralised stochastic actor ``pi_i(a | o_i)``."""
    return MAActor(spec.obs_dim, spec.layout, spec.n_agents, cfg.hidden_sizes, cfg.parameter_sharing)


class OnPolicyMATrainer(MATrainerBase):
    # checked against a fresh trainer before loading (core.training.checkpoint.check_schema): shapes, one clip
    # scale per agent, finite values
    CHECKPOINT_SCHEMA = ("actor", "critic", "clips")

    def __init__(self, cfg: MAConfig, run_dir: Path, checkpoint: Optional[dict] = None):
        super().__init__(cfg, run_dir)
        spec, A, dev = self.spec, self.n_agents, self.device
        self.actor = build_actor(cfg, spec).to(dev)
        critic_in = spec.obs_dim * (A if cfg.centralised_critic else 1)
        self.critic = MACritic(critic_in, A, cfg.hidden_sizes, cfg.parameter_sharing).to(dev)
        self.optimizer = torch.optim.Adam([{"params": self.actor.parameters()},
                                           {"params": self.critic.parameters()}], lr=cfg.lr, eps=1e-5)
        self.reward_scaler = RewardScaler(cfg.num_envs * A, cfg.gamma, cfg.norm_reward)
        self.collector = MACollector(self.envs, cfg.num_steps, self.reward_scaler, cfg.centralised_critic, dev)
        rollout_size = cfg.num_envs * cfg.num_steps * A
        temperature = Temperature(cfg.temperature_mode, cfg.temperature_init, cfg.temperature_decay,
                                  cfg.temperature_min, cfg.ess_target, cfg.temperature_lr)
        self.sampler = AgentSampler(A, cfg.window or rollout_size, dev, temperature, cfg.dynamic_sampling,
                                    cfg.importance_correction, seed=cfg.seed)
        self.update_settings = UpdateSettings(cfg.num_epochs, cfg.num_minibatches, rollout_size // cfg.num_minibatches,
                                              cfg.norm_adv, cfg.vf_coef, cfg.ent_coef, cfg.max_grad_norm)
        self.clips = ClipSchedule.from_config(cfg, A, per_agent=bool(cfg.per_agent_clips),
                                              decoupled=bool(cfg.separate_optimizers), clip_value=bool(cfg.clip_value))
        self.health = HealthController(A, HealthRules.from_config(cfg), self.clips, self.health_log,
                                       lambda: copy.deepcopy(self.actor.state_dict()), self._restore_agent,
                                       health.MESSAGES)
        self.guard = NonFiniteGuard(self.actor, self.critic, self.optimizer)
        if checkpoint is not None:
            self.load_state_dict(checkpoint)

    @property
    def steps_per_iteration(self) -> int:
        return self.cfg.num_envs * self.cfg.num_steps

    @property
    def progress(self) -> float:
        return self.global_step / self.cfg.total_steps

    def clip_ranges(self) -> ClipRanges:
        """Per-agent ``(eps_low, eps_high, eps_V)``, each ``(A,)``, at the current progress."""
        return self.clips.ranges(self.progress, self.device)

    def _restore_agent(self, snapshot: dict, agent: int) -> None:
        health.restore_agent(self.actor, snapshot, agent, self.cfg.parameter_sharing)

    def _set_learning_rates(self) -> tuple[float, float]:
        c = self.cfg
        lr_pi = schedules.annealed_lr(c.lr, self.progress, c.anneal_lr)
        base_v = c.critic_lr if c.separate_optimizers else c.lr
        lr_v = schedules.annealed_lr(base_v, self.progress, c.anneal_lr) * self.health.critic_lr_scale
        self.optimizer.param_groups[0]["lr"], self.optimizer.param_groups[1]["lr"] = lr_pi, lr_v
        return lr_pi, lr_v

    # --- one iteration ------------------------------------------------------------------------
    def iterate(self) -> dict[str, float]:
        c, T, E, A = self.cfg, self.cfg.num_steps, self.cfg.num_envs, self.n_agents
        lr_pi, lr_v = self._set_learning_rates()
        ranges = self.clip_ranges()
        t0 = time.perf_counter()
        rollout, last_values, episodes = self.collector.collect(self.actor, self.critic)
        self.global_step += self.steps_per_iteration
        t1 = time.perf_counter()

        def cols(x: torch.Tensor) -> torch.Tensor:  # (T, E, A) -> (T, E*A): one GAE column per agent and copy
            return x.reshape(T, E * A)
        next_values = next_state_values(cols(rollout.values), last_values.reshape(E * A), cols(rollout.dones),
                                        cols(rollout.final_values))
        adv, ret = gae(cols(rollout.rewards), cols(rollout.values), next_values, cols(rollout.terminated),
                       cols(rollout.dones), c.gamma, c.gae_lambda)
        adv, ret = adv.reshape(T, E, A), ret.reshape(T, E, A)
        value_errors = (ret - rollout.values).pow(2).mean(dim=(0, 1)).cpu().numpy()  # (A,)
        ev = float(explained_variance(rollout.values.flatten(), ret.flatten()))
        self.sampler.add(rollout.flatten(adv, ret))
        self.sampler.temperature.on_rollout(self.sampler.window().advantages)
        expected_shares = self.sampler.expected_shares()
        t2 = time.perf_counter()
        train = self.update(ranges)
        self.sampler.temperature.on_update()
        sampled_shares = self.sampler.take_sampled_shares()
        t3 = time.perf_counter()
        self.iteration += 1
        metrics = self.episode_metrics(episodes)
        returns = np.stack([ep.returns for ep in episodes]) if episodes else np.zeros((0, A))
        self.health.watch(self.global_step, returns, value_errors)
        per_agent = {}
        for i, agent in enumerate(self.spec.agents):
            per_agent.update({
                f"agent/{agent}/eps_pi": float(ranges.eps_low[i]),
                f"agent/{agent}/eps_pi_high": float(ranges.eps_high[i]),
                f"agent/{agent}/eps_V": float("nan") if ranges.eps_v is None else float(ranges.eps_v[i]),
                f"agent/{agent}/sampled_share": float(sampled_shares[i]),
                f"agent/{agent}/expected_share": float(expected_shares[i]),
                f"agent/{agent}/value_error": float(value_errors[i]),
            })
        return {
            **metrics, **train, "train/explained_variance_old": ev, "train/lr_policy": lr_pi, "train/lr_value": lr_v,
            "train/eps_pi_mean": float(ranges.eps_low.mean()),
            "train/eps_v_mean": float("nan") if ranges.eps_v is None else float(ranges.eps_v.mean()),
            **self.sampler.stats(), **per_agent, **{f"health/{k}": v for k, v in self.health_counts.items()},
            "time/collect_s": t1 - t0, "time/advantage_s": t2 - t1, "time/update_s": t3 - t2,
        }

    def update(self, ranges: ClipRanges) -> dict[str, float]:
        """core's PPO-family update over the shared buffer with per-sample (per-agent) clip ranges;
        a non-finite loss or result restores the last healthy weights."""
        metrics, finite = ppo_update(self.sampler, self._evaluate, self.optimizer,
                                     grad_groups(self.actor, self.critic, self.cfg.separate_optimizers),
                                     lambda mb: ranges.gather(mb.agent_id), self.update_settings)
        problem = self.guard.after_update(finite)
        if problem:
            self._record("non_finite", problem)
        return metrics

    def _evaluate(self, mb: MATransitions) -> Evaluation:
        dist = self.actor.distribution(mb.obs, mb.agent_id)
        return Evaluation(self.actor.log_prob(dist, mb.actions, mb.agent_id), self.actor.entropy(dist, mb.agent_id),
                          self.critic(mb.critic_obs, mb.agent_id))

    # --- state ---------------------------------------------------------------------------------
    STATE = ("actor", "critic", "optimizer", "reward_scaler", "sampler", "clips")  # saved and loaded by name

    def state_dict(self) -> dict:
        return {**super().state_dict(), **{name: getattr(self, name).state_dict() for name in self.STATE},
                "health": self.health.state_dict(), "last_good": self.guard.last_good}

    def load_state_dict(self, s: dict) -> None:
        super().load_state_dict(s)
        for name in self.STATE:
            getattr(self, name).load_state_dict(s[name])
        self.health.load_state_dict(health.upgrade_health_state(s["health"]))
        self.guard.last_good = s["last_good"]
