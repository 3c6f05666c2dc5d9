"""``dapo run --algo {ippo,mappo,dapo-ma,maddpg}``: one multi-agent experiment end to end.

Mirrors :mod:`core.runner`: resolve and validate the config, refuse to overwrite a finished run,
write config.yaml, train with progress/CSV/TensorBoard, checkpoint (also on Ctrl-C), evaluate,
write summary.json and learning_curve.png.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from core.checkpoint import write_json
from core.cli_config import load_run_config as core_load_run_config
from core.config import RunInterrupted
from core.evaluation import mean_std
from core.logging import MetricLogger, Progress
from core.plotting import plot_learning_curve
from core.runner import start_run, train_interruptibly
from dapo_ma.config import MAConfig, resolve
from dapo_ma.evaluation import evaluate
from dapo_ma.loop import MATrainerBase
from dapo_ma import maddpg, ppo

# algorithm -> (trainer class, actor builder); the on-policy three differ only by their presets
ALGORITHMS = {"ippo": (ppo.OnPolicyMATrainer, ppo.build_actor), "mappo": (ppo.OnPolicyMATrainer, ppo.build_actor),
              "dapo-ma": (ppo.OnPolicyMATrainer, ppo.build_actor),
              "maddpg": (maddpg.MADDPGTrainer, maddpg.build_actor)}


def make_trainer(cfg: MAConfig, run_dir: Path, checkpoint: Optional[dict] = None) -> MATrainerBase:
    return ALGORITHMS[cfg.algo][0](cfg, run_dir, checkpoint)


def load_run_config(run_dir: Path) -> MAConfig:
    """The resolved config saved in ``run_dir/config.yaml``."""
    return core_load_run_config(run_dir, MAConfig)


def run_experiment(cfg: MAConfig, resume: bool = False) -> dict:
    """Train (or continue) a run and write config.yaml, metrics.csv, tb/, checkpoint.pt,
    summary.json and learning_curve.png into its directory.  Returns the summary."""
    cfg, run_dir, checkpoint = start_run(resolve(cfg), resume)
    trainer = make_trainer(cfg, run_dir, checkpoint)
    logger = MetricLogger(run_dir, trainer.global_step if resume else None, cfg.tensorboard)
    progress = Progress(cfg.total_steps, trainer.global_step, f"{cfg.algo} {cfg.env}", cfg.progress)

    try:
        train_interruptibly(trainer, logger, progress)
    finally:
        trainer.envs.close()
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png",
                        f"{cfg.algo.upper()} on {cfg.env} (per-agent mean return)")
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    eval_returns = (evaluate(cfg, trainer.actor, cfg.eval_episodes, cfg.seed + 10_000, trainer.device)
                    if cfg.eval_episodes > 0 else [float("nan")])
    eval_mean, eval_std = mean_std(eval_returns)
    summary = {
        "env": cfg.env, "env_kwargs": cfg.env_kwargs, "algo": cfg.algo, "seed": cfg.seed,
        "total_steps": trainer.global_step, "wall_time_s": round(trainer.elapsed, 2),
        "sps": round(trainer.global_step / max(trainer.elapsed, 1e-9), 1),
        "final_return_mean": trainer.recent_return(), "eval_return_mean": eval_mean, "eval_return_std": eval_std,
        "eval_episodes": cfg.eval_episodes, "return_convention": "per-agent episode return averaged over agents",
        "health_events": dict(trainer.health_counts), "health_event_log": trainer.health_events,
        "device": str(trainer.device), "run_dir": str(run_dir),
    }
    write_json(run_dir / "summary.json", summary)
    return summary
