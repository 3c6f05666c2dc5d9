"""``dapo run --algo {ippo,mappo,dapo-ma,maddpg}``: one multi-agent experiment end to end.

Mirrors :mod:`core.run.runner` and shares its prologue (run-directory checks, the one-writer lock, the checkpoint when
resuming, config.yaml): train with progress, CSV and TensorBoard, checkpoint (also on Ctrl-C), evaluate, write
summary.json and learning_curve.png.  The summary's ``final_return_mean`` is the curve's last smoothed point: the mean
over the last 10 updates of the per-update mean episode return (per-agent return averaged over agents).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from core.training.checkpoint import write_json
from core.config.parsing import load_run_config as read_run_config, required_fields
from core.config.errors import RunInterrupted
from core.run.evaluation import mean_std
from core.training.logging import read_metrics
from core.run.plotting import plot_learning_curve
from core.run.rundir import software_versions
from core.run.runner import budget_line, run_started, train_on_rank
from core.run.runner import summary_line as run_line
from dapo_ma import maddpg, ppo
from dapo_ma.config import MAConfig
from dapo_ma.envs import imports_code
from dapo_ma.evaluation import evaluate
from dapo_ma.loop import MATrainerBase

# algorithm -> (trainer class, actor builder); the on-policy three differ only by their recipes
ALGORITHMS = {"ippo": (ppo.OnPolicyMATrainer, ppo.build_actor), "mappo": (ppo.OnPolicyMATrainer, ppo.build_actor),
              "dapo-ma": (ppo.OnPolicyMATrainer, ppo.build_actor),
              "maddpg": (maddpg.MADDPGTrainer, maddpg.build_actor),
              "dapo-maddpg": (maddpg.MADDPGTrainer, maddpg.build_actor)}
FINAL_UPDATES = 10  # final return: mean of the last this many updates' mean episode return (the curve's smoothing)


def make_trainer(cfg: MAConfig, run_dir: Path, checkpoint: Optional[dict] = None) -> MATrainerBase:
    return ALGORITHMS[cfg.algo][0](cfg, run_dir, checkpoint)


def load_run_config(run_dir: Path, trust_env: bool = False) -> MAConfig:
    """The resolved config saved in ``run_dir/config.yaml`` (env kwargs of older runs were a string); an env that would
    import code named by the file is refused unless ``trust_env`` (core/config/trust.py)."""
    return read_run_config(run_dir, MAConfig, required=required_fields(MAConfig, ("run_dir", "clip_eps_high", "window")),
                           imports_code=imports_code, trust_env=trust_env)


def final_return(metrics_csv: Path, updates: int = FINAL_UPDATES) -> float:
    """Mean of the last ``updates`` per-update mean episode returns in ``metrics.csv`` (NaN rows skipped)."""
    ret = np.array(read_metrics(metrics_csv).get("rollout/ep_return_mean", []), dtype=float)
    ret = ret[~np.isnan(ret)]
    return float(ret[-updates:].mean()) if len(ret) else float("nan")


def summary_line(s: dict) -> str:
    """The Gymnasium family's run line (the same summary keys), returns to two decimals and per agent."""
    return run_line(s, ".2f", " (per agent)")


def run_experiment(cfg: MAConfig, resume: bool = False) -> dict:
    """Train (or continue) a resolved run and write config.yaml, metrics.csv, tb/, checkpoint.pt, summary.json and
    learning_curve.png into its directory.  Returns the summary."""
    return run_started(cfg, resume, make_trainer, _train_and_report)


def settings_line(cfg: MAConfig) -> str:
    """What the resolved algorithm does, in one line at the start (the recipes applied, the critic, the clips, the
    minibatches or replay), so nobody has to open config.yaml to learn what ran."""
    recipes = ", ".join([cfg.algo, *cfg.recipe])
    if cfg.algo in ("maddpg", "dapo-maddpg"):
        parts = [f"replay {cfg.buffer_size}, batch {cfg.batch_size}, learning starts at {cfg.learning_starts}",
                 "prioritised draws (softmax of |TD error|)" if cfg.dynamic_sampling else "uniform draws",
                 f"per-agent clips eps_pi {cfg.clip_eps}" if cfg.algo == "dapo-maddpg" else "no clips"]
    else:
        eps_v = (f"eps_V {cfg.eps_v_start} -> {cfg.eps_v_end} {cfg.eps_v_schedule}" if cfg.separate_optimizers
                 else f"eps_V = eps_pi {cfg.clip_eps}") if cfg.clip_value else "no value clip"
        parts = ["centralised critic" if cfg.centralised_critic else "local critics",
                 f"{'per-agent' if cfg.per_agent_clips else 'shared'} clips eps_pi {cfg.clip_eps}", eps_v,
                 "advantage-weighted draws over one shared buffer" if cfg.dynamic_sampling else "uniform minibatches"]
    parts += ["one shared actor" if cfg.parameter_sharing else "an actor per agent",
              "health monitors per agent" if cfg.health_monitors else "no health monitors"]
    return f"{cfg.algo} on {cfg.env} [recipes: {recipes}]: " + "; ".join(parts)


def _train_and_report(cfg: MAConfig, run_dir: Path, trainer: MATrainerBase, resume: bool) -> dict:
    print(settings_line(cfg), flush=True)
    print(budget_line(cfg.total_steps, trainer.batch_size, trainer.global_step), flush=True)
    train_on_rank(cfg, run_dir, trainer, resume, f"{cfg.algo} {cfg.env}", True,
                  lambda finished=True: trainer.envs.close())
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png",
                        f"{cfg.algo.upper()} on {cfg.env} (per-agent mean return)", events=trainer.health_events)
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    eval_returns = (evaluate(cfg, trainer.actor, cfg.eval_episodes, cfg.seed + 10_000, trainer.device)
                    if cfg.eval_episodes > 0 else [float("nan")])
    eval_mean, eval_std = mean_std(eval_returns)
    summary = {
        "env": cfg.env, "env_kwargs": cfg.env_kwargs, "algo": cfg.algo, "seed": cfg.seed,
        "total_steps": trainer.global_step, "wall_time_s": round(trainer.elapsed, 2),
        "sps": round(trainer.global_step / max(trainer.elapsed, 1e-9), 1),
        "final_return_mean": final_return(run_dir / "metrics.csv"), "eval_return_mean": eval_mean,
        "eval_return_std": eval_std, "eval_std_convention": "sample std (ddof=1)", "eval_episodes": cfg.eval_episodes,
        "return_convention": "per-agent episode return averaged over agents; final_return_mean = mean of the last "
                             f"{FINAL_UPDATES} updates' mean episode return (the curve's last smoothed point)",
        "health_events": dict(trainer.health_counts), "health_event_log": trainer.health_events,
        "device": str(trainer.device), "run_dir": str(run_dir),
        "software": software_versions(),
    }
    write_json(run_dir / "summary.json", summary)
    return summary
