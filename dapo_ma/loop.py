"""What every multi-agent trainer shares: seeding, the batched envs, the outer loop with periodic
checkpoints, episode and per-agent metrics, health-event bookkeeping (:class:`core.algo.health.HealthRecords`)
and RNG state.

Subclasses implement :meth:`MATrainerBase.iterate` (one collect-and-update step) and extend
:meth:`state_dict` / :meth:`load_state_dict` with their networks and buffers.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from core.algo.health import HealthLog, HealthRecords
from core.training.checkpoint import save_checkpoint
from core.training.logging import MetricLogger
from core.training.loop import env_budget_spent, rng_state, seed_everything, set_rng_state, train_loop
from core.training.trainer import pick_device
from dapo_ma.config import MAConfig, parse_env_kwargs
from dapo_ma.envs import BatchedParallelEnv, EpisodeStats

class MATrainerBase(HealthRecords, ABC):
    def __init__(self, cfg: MAConfig, run_dir: Path):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.device = pick_device(cfg.device)
        torch.set_num_threads(cfg.torch_threads)
        seed_everything(cfg.seed)
        self.envs = BatchedParallelEnv(cfg.env, parse_env_kwargs(cfg.env_kwargs), cfg.num_envs, cfg.seed)
        self.spec = self.envs.spec
        self.n_agents = self.spec.n_agents
        self.global_step, self.iteration, self.elapsed = 0, 0, 0.0
        self.recent_returns: deque[float] = deque(maxlen=10)  # per-agent-averaged episode returns
        self.health_log = HealthLog()  # the trainers' health controllers and non-finite guards record here
        self.stop_requested = False

    # --- implemented by each algorithm family -------------------------------------------------
    @property
    @abstractmethod
    def steps_per_iteration(self) -> int:
        """Env steps (joint steps, summed over copies) that one :meth:`iterate` call takes."""

    @abstractmethod
    def iterate(self) -> dict[str, float]:
        """Collect and update once; returns the metrics row of this iteration."""

    # --- shared --------------------------------------------------------------------------------
    def train(self, logger: MetricLogger, progress=None, max_iterations: Optional[int] = None) -> None:
        """Run core's shared outer loop (core.training.loop.train_loop) on this trainer."""
        train_loop(self, logger, progress, max_iterations)

    @property
    def batch_size(self) -> int:
        return self.steps_per_iteration

    def finished(self) -> bool:
        return env_budget_spent(self) or self.stop_requested

    def episode_metrics(self, episodes: list[EpisodeStats]) -> dict[str, float]:
        """``rollout/`` means over finished episodes (return = per-agent return averaged over agents)
        and ``agent/<id>/return``; also feeds :meth:`recent_return`."""
        if not episodes:
            nan = {f"agent/{a}/return": math.nan for a in self.spec.agents}
            return {"rollout/ep_return_mean": math.nan, "rollout/ep_length_mean": math.nan,
                    "rollout/episodes": 0, **nan}
        per_agent = np.stack([ep.returns for ep in episodes])  # (n_episodes, A)
        self.recent_returns.extend(per_agent.mean(1).tolist())
        return {"rollout/ep_return_mean": float(per_agent.mean()),
                "rollout/ep_length_mean": float(np.mean([ep.length for ep in episodes])),
                "rollout/episodes": len(episodes),
                **{f"agent/{a}/return": float(per_agent[:, i].mean()) for i, a in enumerate(self.spec.agents)}}

    def recent_return(self) -> float:
        """Mean of the last 10 finished training episodes' per-agent-averaged return (NaN before the first)."""
        return float(np.mean(self.recent_returns)) if self.recent_returns else math.nan

    def save(self) -> None:
        save_checkpoint(self.run_dir / "checkpoint.pt", self.state_dict())

    def state_dict(self) -> dict:
        return {
            "global_step": self.global_step, "iteration": self.iteration, "elapsed": self.elapsed,
            "envs": self.envs.state_dict(), "recent_returns": list(self.recent_returns),
            "health_counts": dict(self.health_counts), "health_events": list(self.health_events),
            "rng": rng_state(),
        }

    def load_state_dict(self, s: dict) -> None:
        self.global_step, self.iteration, self.elapsed = s["global_step"], s["iteration"], s["elapsed"]
        self.envs.load_state_dict(s["envs"])
        self.recent_returns = deque(s["recent_returns"], maxlen=10)
        self.health_log.load_state_dict({"counts": s["health_counts"], "events": s["health_events"]})
        set_rng_state(s["rng"])
