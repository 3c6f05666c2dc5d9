"""The on-policy trainer shared by PPO, GRPO and DAPO: collect -> advantages -> sample -> update.

The three algorithms differ only in their resolved :class:`TrainConfig` (clip ranges, value clip,
auto-lambda, optimiser split, dynamic sampling, monitors); the loop below is written once.
"""
from __future__ import annotations

import copy
import math
import time
from collections import deque
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from core import extensions
from core.algo import schedules
from core.algo.advantages import AutoLambda, gae, next_state_values
from core.envs.backends import make_backend
from core.training.checkpoint import save_checkpoint
from core.envs.collector import CollectorProcess, WorkerSpec
from core.training.compile import maybe_compile
from core.config.options import TrainConfig
from core.config.limits import check_device
from core.training.distributed import Distributed
from core.envs.rollout import ObsNormalizer, RewardScaler
from core.algo.schedules import ClipSchedule
from core.algo.health import HealthController, HealthLog, HealthRecords, HealthRules, Messages, NonFiniteGuard
from core.training.logging import MetricLogger
from core.training.loop import env_budget_spent, rng_state, seed_everything, set_rng_state, train_loop
from core.algo.advantages import explained_variance
from core.algo.networks import build_networks, input_layer, refit_input_layer
from core.training.update_backend import pick_update_backend
from core.envs.rollout import Collector, Episode, Prefetcher, Rollout
from core.algo.sampler import DynamicSampler, Temperature, Transitions
from core.training.update import Evaluation, UpdateSettings


HEALTH_MESSAGES = Messages("recent mean far below best {best:.1f}", "value loss rose {window} updates in a row")


def pick_device(name: str) -> torch.device:
    """``--device`` (auto, cpu, cuda or cuda:N; checked by :func:`core.config.limits.check_device`) -> the device."""
    check_device(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def flatten(rollout: Rollout, advantages: torch.Tensor, returns: torch.Tensor) -> Transitions:
    """(T, N, ...) rollout -> (B, ...) transitions for the sampler, B = T*N minus invalid (reset) steps."""
    valid = rollout.valid.reshape(-1)
    keep = None if bool(valid.all()) else valid

    def flat(x):
        x = x.reshape(-1, *x.shape[2:])
        return x if keep is None else x[keep]
    return Transitions(flat(rollout.obs), flat(rollout.actions), flat(rollout.logp), flat(rollout.values),
                       flat(advantages), flat(returns))


class Trainer(HealthRecords):
    # checked against a fresh trainer before loading (core.training.checkpoint.check_schema): shapes, finite weights
    CHECKPOINT_SCHEMA = ("actor", "critic")

    def __init__(self, cfg: TrainConfig, run_dir: Path, checkpoint: Optional[dict] = None):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.device = Distributed.local_device(pick_device(cfg.device))
        self.dist = Distributed(self.device)  # data-parallel ranks under torchrun (a no-op otherwise)
        torch.set_num_threads(cfg.torch_threads)
        # NumPy's BLAS (NumPy acting and update) gets the same budget: its default of one thread per core
        # oversubscribes the CPU beside other runs (a CartPole update went 10x slower with 3 processes on 2 cores)
        threadpool_limits(cfg.torch_threads, user_api="blas")
        seed = cfg.seed + self.dist.rank
        seed_everything(seed)
        self.envs = make_backend(cfg.env, cfg.num_envs, cfg.backend, seed, env_kwargs=cfg.env_kwargs)
        obs_space, self.action_space = self.envs.single_observation_space, self.envs.single_action_space
        actor, critic = build_networks(obs_space, self.action_space, cfg.hidden_sizes, cfg.precision == "bf16",
                                       cfg.log_std_init)
        self.actor, self.critic = actor.to(self.device), critic.to(self.device)
        self.dist.broadcast_modules([self.actor, self.critic])
        # Adam keeps per-parameter state, so one Adam with an actor group and a critic group is exactly
        # two optimisers; "separate" means separate learning rates and (unless --joint-grad-clip) per-network
        # gradient clipping.
        self.optimizer = torch.optim.Adam([{"params": self.actor.parameters()},
                                           {"params": self.critic.parameters()}], lr=cfg.lr, eps=1e-5,
                                          fused=True)
        self.obs_norm = ObsNormalizer(obs_space.shape, cfg.norm_obs)
        self.reward_scaler = RewardScaler(cfg.num_envs, cfg.gamma, cfg.norm_reward)
        self.rollouts = Prefetcher(self._collector(seed), self.actor, self.critic, cfg.overlap)
        temperature = Temperature(cfg.temperature_mode, cfg.temperature_init, cfg.temperature_decay,
                                  cfg.temperature_min, cfg.ess_target, cfg.temperature_lr)
        self.sampler = DynamicSampler(cfg.window, self.device, temperature, cfg.dynamic_sampling,
                                      cfg.importance_correction, seed=seed,
                                      resampling=cfg.resampling)
        if cfg.compile:  # the sampler's arithmetic and the minibatch forward pass
            self.sampler.probs_fn = maybe_compile(self.sampler.probs_fn)
            self._evaluate = maybe_compile(self._evaluate)
        self.update_settings = UpdateSettings(cfg.num_epochs, cfg.num_minibatches,
                                              cfg.num_envs * cfg.num_steps // cfg.num_minibatches, cfg.norm_adv,
                                              cfg.vf_coef, cfg.ent_coef, cfg.max_grad_norm)
        self.gae_lambda = AutoLambda(cfg.gae_lambda, cfg.lambda_min, cfg.lambda_max)
        # one agent of core's clip schedule and health controller (dapo_ma runs A of them); float64 scales keep
        # the ranges the Python floats min(eps * scale, EPS_PI_MAX) they always were
        self.clips = ClipSchedule.from_config(cfg, 1, per_agent=True, decoupled=bool(cfg.separate_optimizers),
                                              clip_value=bool(cfg.clip_value), dtype=torch.float64)
        self.health_log = HealthLog()
        self.health = HealthController(1, HealthRules.from_config(cfg), self.clips, self.health_log,
                                       self._snapshot_actor, self._restore_actor, HEALTH_MESSAGES)
        self.guard = NonFiniteGuard(self.actor, self.critic, self.optimizer)
        self.extensions = extensions.build(cfg.extensions, self)  # mechanisms beyond PPO/GRPO/DAPO (core/extensions)
        self.sampler = next((x for x in (e.sampler(self) for e in self.extensions) if x is not None), self.sampler)
        self.updater = pick_update_backend(cfg, self.extensions, self.actor, self.critic, self.optimizer,
                                           self._evaluate, self.dist)  # NumPy or torch (core/training/update_backend.py)
        self.global_step, self.iteration, self.elapsed = 0, 0, 0.0
        self.recent_returns: deque[float] = deque(maxlen=10)
        self.stop_requested = False
        if checkpoint is not None:
            self.load_state_dict(checkpoint)

    def _collector(self, seed: int):
        """In-process, or, for ``--overlap`` with NumPy-acting MLPs on the CPU, in a worker process that
        steps the envs on the other core while this one updates (core/envs/collector.py)."""
        c = self.cfg
        if c.overlap and c.numpy_acting and CollectorProcess.supports(self.actor, self.critic, self.device,
                                                                       c.backend, self.dist.enabled):
            self.envs.close()  # the worker makes its own, seeded alike
            spec = WorkerSpec(c.env, c.num_envs, c.backend, seed, c.num_steps, c.norm_obs, c.norm_reward, c.gamma,
                              tuple(c.hidden_sizes), dict(c.env_kwargs))
            return CollectorProcess(spec, self.obs_norm, self.reward_scaler)
        return Collector(self.envs, c.num_steps, self.obs_norm, self.reward_scaler, self.device, seed, c.numpy_acting)

    # --- schedules ---------------------------------------------------------------------------
    def clip_ranges(self) -> tuple[float, float, Optional[float]]:
        """(eps_low, eps_high, eps_V or None) at the current progress, including health remedies."""
        return self.clips.ranges(self.global_step / self.cfg.total_steps).scalars()

    def _set_learning_rates(self) -> tuple[float, float]:
        c, progress = self.cfg, self.global_step / self.cfg.total_steps
        lr_pi = schedules.policy_lr(c.lr, progress, c.anneal_lr, self.global_step, c.policy_lr_drop_step,
                                    c.policy_lr_drop_factor)
        for ext in self.extensions:
            lr_pi *= ext.policy_lr_scale()
        base_v = c.critic_lr if c.separate_optimizers else c.lr
        lr_v = schedules.annealed_lr(base_v, progress, c.anneal_lr) * self.health.critic_lr_scale
        self.optimizer.param_groups[0]["lr"], self.optimizer.param_groups[1]["lr"] = lr_pi, lr_v
        return lr_pi, lr_v

    # --- one iteration ------------------------------------------------------------------------
    def iterate(self) -> dict[str, float]:
        c = self.cfg
        lr_pi, lr_v = self._set_learning_rates()
        eps_low, eps_high, eps_v = self.clip_ranges()
        if c.snapshot_every and self.global_step == 0:  # the initial policy too: the first one that acted
            self.save_snapshot()
        t0 = time.perf_counter()
        batch = self.batch_size
        has_next = self.global_step + batch < c.total_steps  # another iteration follows this one
        rollout, last_values, episodes = self.rollouts.next(self.actor, self.critic, prefetch=has_next)
        episodes = self.dist.gather(episodes)  # every rank sees all episodes: monitors act in lockstep
        self.global_step += batch
        t1 = time.perf_counter()
        next_values = next_state_values(rollout.values, last_values, rollout.dones, rollout.final_values)
        lam = self.gae_lambda.value
        adv, ret = gae(rollout.rewards, rollout.values, next_values, rollout.terminated, rollout.dones, c.gamma, lam)
        data = flatten(rollout, adv, ret)
        ev = float(explained_variance(data.values_old, data.returns))
        if c.auto_lambda:
            self.gae_lambda.update(ev)
        self.sampler.add(data)
        self.sampler.temperature.on_rollout(self.sampler.window().advantages)
        t2 = time.perf_counter()
        train = self.dist.mean_metrics(self.update(eps_low, eps_high, eps_v))
        self.rollouts.wait()
        for ext in self.extensions:
            train.update(ext.after_update(self, train))
        self.sampler.temperature.on_update()
        t3 = time.perf_counter()
        self.iteration += 1
        self._watch_health(episodes, train.get("train/value_loss", math.nan))
        self.recent_returns.extend(e.score for e in episodes)
        every = c.snapshot_every
        if every and self.global_step // every > (self.global_step - batch) // every:
            self.save_snapshot()
        returns = [e.score for e in episodes]
        successes = [e.success for e in episodes if e.success is not None]
        return {
            "rollout/ep_return_mean": float(np.mean(returns)) if returns else math.nan,
            "rollout/ep_length_mean": float(np.mean([e.length for e in episodes])) if episodes else math.nan,
            "rollout/episodes": len(episodes),
            **({"rollout/success_rate": float(np.mean(successes))} if successes else {}),
            **train, "train/explained_variance_old": ev, "train/gae_lambda": lam,
            "train/lr_policy": lr_pi, "train/lr_value": lr_v, "train/eps_pi_low": eps_low,
            "train/eps_pi_high": eps_high, "train/eps_v": math.nan if eps_v is None else eps_v,
            **self.sampler.stats(),
            **{f"health/{k}": v for k, v in self.health_counts.items()},
            "time/collect_s": t1 - t0, "time/advantage_s": t2 - t1, "time/update_s": t3 - t2,
            "time/sps": batch / (t3 - t0),
        }

    def update(self, eps_low: float, eps_high: float, eps_v: Optional[float]) -> dict[str, float]:
        """One shared PPO-family update; a non-finite loss or result restores the last healthy weights.  An
        extension may re-anchor the policy ratio (stale data)."""
        self.sampler.progress = self.iteration / max(1, -(-self.cfg.total_steps // self.batch_size))  # updates done
        proximal = next((p for p in (e.anchor(self) for e in self.extensions) if p is not None), None)
        metrics, finite = self.updater.update(self.sampler, (eps_low, eps_high, eps_v), self.update_settings, proximal)
        problem = self.guard.after_update(finite, self.dist.all_true)
        if problem:
            self._record("non_finite", problem)
        return metrics

    def _evaluate(self, mb: Transitions) -> Evaluation:
        return Evaluation(*self.actor.evaluate(mb.obs, mb.actions), self.critic(mb.obs))

    # --- health (docs/algorithms.md; the counts and events: HealthRecords) ---------------------------
    def _watch_health(self, episodes: list[Episode], v_loss: float) -> None:
        """The controller's one agent: the episodes' returns ``(n, 1)``, the update's value loss ``(1,)``."""
        self.health.watch(self.global_step, np.array([e.score for e in episodes], dtype=np.float64).reshape(-1, 1),
                          [v_loss])

    def _snapshot_actor(self) -> dict:
        """The actor and the normaliser statistics it acted on (the collapse remedy's restore point)."""
        return {"actor": copy.deepcopy(self.actor.state_dict()), "obs_norm": self.obs_norm.state_dict()}

    def _restore_actor(self, best: dict, agent: int = 0) -> None:
        """Load the best actor, re-expressed for the normaliser's current statistics (the critic and the
        collector keep using those) so that it is the best policy again as a function of the raw observation."""
        self.actor.load_state_dict(best["actor"])
        if self.obs_norm.enabled and best["obs_norm"] is not None:  # None: a checkpoint from before this rule
            refit_input_layer(input_layer(self.actor), ObsNormalizer.mean_std(best["obs_norm"]),
                              ObsNormalizer.mean_std(self.obs_norm.state_dict()))
            self.dist.broadcast_modules([self.actor])  # ranks keep their own statistics: all take rank 0's refit

    # --- the loop ------------------------------------------------------------------------------
    def train(self, logger: MetricLogger, progress=None, max_iterations: Optional[int] = None) -> None:
        """Run the shared outer loop (core.training.loop.train_loop) on this trainer."""
        train_loop(self, logger, progress, max_iterations)

    def finished(self) -> bool:
        """Out of env steps, or stopped: a Ctrl-C on any data-parallel rank stops all ranks at the same iteration."""
        self.stop_requested = self.dist.any_true(self.stop_requested)
        return env_budget_spent(self) or self.stop_requested

    @property
    def batch_size(self) -> int:
        """Env steps per iteration, summed over data-parallel ranks."""
        return self.cfg.num_envs * self.cfg.num_steps * self.dist.world_size

    def recent_return(self) -> float:
        """Mean of the last 10 finished training episodes (NaN before the first)."""
        return float(np.mean(self.recent_returns)) if self.recent_returns else math.nan

    # --- state ---------------------------------------------------------------------------------
    def save(self) -> None:
        if not self.dist.is_main:
            return
        save_checkpoint(self.run_dir / "checkpoint.pt", self.state_dict())

    def save_snapshot(self) -> None:
        """The current policy as snapshots/step_<N>.pt (a behaviour policy for datasets)."""
        if self.dist.is_main:
            (self.run_dir / "snapshots").mkdir(exist_ok=True)
            save_checkpoint(self.run_dir / "snapshots" / f"step_{self.global_step:09d}.pt",
                            {"global_step": self.global_step, "actor": self.actor.state_dict(),
                             "obs_norm": self.obs_norm.state_dict(), "recent_return": self.recent_return()})

    def state_dict(self) -> dict:
        return {
            "global_step": self.global_step, "iteration": self.iteration, "elapsed": self.elapsed,
            "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(), "obs_norm": self.obs_norm.state_dict(),
            "reward_scaler": self.reward_scaler.state_dict(), "sampler": self.sampler.state_dict(),
            "rollouts": self.rollouts.state_dict(), "gae_lambda": self.gae_lambda.state_dict(),
            "health": {"controller": self.health.state_dict(), "clips": self.clips.state_dict(),
                       "log": self.health_log.state_dict(), "last_good": self.guard.last_good},
            "recent_returns": list(self.recent_returns),
            "extensions": {e.name: e.state_dict() for e in self.extensions}, "rng": rng_state(),
        }

    def load_state_dict(self, s: dict) -> None:
        self.global_step, self.iteration, self.elapsed = s["global_step"], s["iteration"], s["elapsed"]
        self.actor.load_state_dict(s["actor"])
        self.critic.load_state_dict(s["critic"])
        self.optimizer.load_state_dict(s["optimizer"])
        self.obs_norm.load_state_dict(s["obs_norm"])
        self.reward_scaler.load_state_dict(s["reward_scaler"])
        self.sampler.load_state_dict(s["sampler"])
        if self.dist.rank == 0:  # other ranks keep their own fresh envs (see below)
            self.rollouts.load_state_dict(s["rollouts"])
        self.gae_lambda.load_state_dict(s["gae_lambda"])
        h = upgrade_health_state(s["health"])
        self.health.load_state_dict(h["controller"])
        self.clips.load_state_dict(h["clips"])
        self.health_log.load_state_dict(h["log"])
        self.guard.last_good = h["last_good"]
        self.recent_returns = deque(s["recent_returns"], maxlen=10)
        saved = dict(s.get("extensions", {}))
        if "kl_lr_scale" in s:  # checkpoints from before extensions kept the KL rule's scale at the top
            saved.setdefault("kl_adaptive_lr", {"scale": s["kl_lr_scale"]})
        for ext in self.extensions:
            if ext.name in saved:
                ext.load_state_dict(saved[ext.name])
        set_rng_state(s["rng"])
        if self.dist.rank > 0:  # rank 0's checkpoint holds rank 0's envs and RNG; decorrelate the others
            seed_everything(self.cfg.seed + self.dist.rank + 7919 * self.iteration)


def upgrade_health_state(h: dict) -> dict:
    """A checkpoint's ``"health"`` entry in the layout of the one health controller.  Checkpoints written before it
    kept one monitor pair, the scales ``(eps_pi, eps_V, critic lr)`` as floats, and the best actor beside the
    statistics it acted on (absent before the refit rule: restored without refitting)."""
    if "scales" not in h:
        return h
    pi, v, lr = h["scales"]
    best = {"actor": h["best_actor"], "obs_norm": h.get("best_obs_norm")}
    return {"controller": {"collapse": [h["collapse"]], "divergence": [h["divergence"]], "best": [best],
                           "critic_lr_scale": lr},
            "clips": {"pi_scale": torch.tensor([pi], dtype=torch.float64),
                      "v_scale": torch.tensor([v], dtype=torch.float64)},
            "log": {"counts": h["counts"], "events": h["events"]}, "last_good": h["last_good"]}
