"""``dapo run``: one experiment end to end (train, checkpoint, evaluate, summarise, plot)."""
from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from pathlib import Path
from typing import Optional

import gymnasium as gym

from core.checkpoint import atomic_write, load_checkpoint, write_json
from core.cli_config import write_yaml_config
from core.config import ConfigError, RunInterrupted, TrainConfig, policy_clip
from core.envs import check_env_id, env_family
from core.evaluation import evaluate, mean_std
from core.logging import MetricLogger, Progress
from core.plotting import plot_learning_curve
from core.presets import resolve
from core.schedules import KLAdaptiveLR
from core.trainer import Trainer


def resolve_for_env(cfg: TrainConfig) -> TrainConfig:
    """Validate the env id, detect its family (classic / continuous) and fill the presets."""
    check_env_id(cfg.env)
    try:
        env = gym.make(cfg.env)
    except Exception as e:
        raise ConfigError(f"cannot create env '{cfg.env}': {type(e).__name__}: {e}") from e
    family = env_family(env.observation_space, env.action_space, cfg.env)
    env.close()
    return resolve(cfg, family)


def settings_line(cfg: TrainConfig) -> str:
    """One line naming the settings the presets chose that change what the algorithm does, so nobody has to
    open config.yaml to learn, e.g., that dapo on MuJoCo trains on uniform minibatches."""
    lam = f"auto in [{cfg.lambda_min}, {cfg.lambda_max}]" if cfg.auto_lambda else f"{cfg.gae_lambda}"
    parts = [f"GAE lambda {lam}"]
    if cfg.algo == "dapo":
        eps_v = (f"{cfg.eps_v_start}" if cfg.eps_v_schedule == "constant"
                 else f"{cfg.eps_v_start} -> {cfg.eps_v_end} {cfg.eps_v_schedule}")
        draws = (f"advantage-weighted {cfg.resampling} draws (T {cfg.temperature_mode} from {cfg.temperature_init})"
                 if cfg.dynamic_sampling else "uniform (--dynamic-sampling for advantage-weighted draws)")
        low, high = policy_clip(cfg)
        parts += [f"eps_pi {low}" if low == high else f"eps_pi low {low} / high {high}", f"eps_V {eps_v}",
                  f"minibatches {draws}"]
    if cfg.joint_grad_clip == cfg.separate_optimizers:  # not the algorithm's usual pairing
        parts.append("gradient norm clipped " + ("jointly over actor and critic" if cfg.joint_grad_clip
                                                 else "per network"))
    if cfg.health_monitors and cfg.collapse_confirm:
        parts.append(f"collapse remedy once {cfg.collapse_confirm + 1} windows in a row show the drop")
    if cfg.target_kl and cfg.kl_lr_max_scale == 1:
        parts.append(f"policy lr /{KLAdaptiveLR.FACTOR:g} after each update with approx KL > {2 * cfg.target_kl:g}, "
                     "never above schedule")
    elif cfg.target_kl:
        parts.append(f"policy lr adapted to hold approx KL near {cfg.target_kl:g} "
                     f"(x{KLAdaptiveLR.LOWEST:g} .. x{cfg.kl_lr_max_scale:g})")
    if cfg.log_std_init:  # only Box actions have a log-std; every family's preset is 0 except dapo on MuJoCo
        parts.append(f"initial action log-std {cfg.log_std_init} (std {math.exp(cfg.log_std_init):.2f})")
    if cfg.log_std_min is not None:
        parts.append(f"action log-std floored at {cfg.log_std_min} (std {math.exp(cfg.log_std_min):.2f}"
                     + (" x each action's half-range" if cfg.log_std_min_relative else "")
                     + (f", falling linearly to 0 from {cfg.log_std_min_anneal_start:.0%} of training to "
                        + ("the end)" if cfg.log_std_min_anneal_end == 1 else f"{cfg.log_std_min_anneal_end:.0%})")
                        if cfg.log_std_min_anneal else ")"))
    if cfg.log_std_max is not None:
        parts.append(f"action log-std capped at {cfg.log_std_max} (std {math.exp(cfg.log_std_max):.2f})")
    if cfg.ent_coef:
        bonus = f"entropy bonus {cfg.ent_coef:g}"
        if cfg.ent_per_dim:
            bonus += " on the mean entropy per action dim"
        if cfg.ent_below is not None:
            bonus += f" on action dims with log-std below {cfg.ent_below:g} + log half-range"
        parts.append(bonus)
    return f"{cfg.algo} on {cfg.env}: " + "; ".join(parts)


def default_run_dir(cfg: TrainConfig) -> Path:
    name = cfg.env.replace("/", "-")
    return Path("runs") / f"{name}__{cfg.algo}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_run_dir(cfg: TrainConfig, resume: bool) -> Path:
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    if not resume and (run_dir / "checkpoint.pt").exists():
        raise ConfigError(f"{run_dir} already holds a run; continue it with --resume {run_dir} "
                          "or choose another --run-dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def start_run(cfg, resume: bool, main: bool = True):
    """Shared prologue of every ``dapo run`` family: the run directory (refusing to overwrite a finished
    run), its checkpoint when resuming, and the resolved config written to config.yaml.  ``cfg`` must be
    resolved already; returns ``(cfg with run_dir, run_dir, checkpoint or None)``."""
    run_dir = prepare_run_dir(cfg, resume) if main else Path(cfg.run_dir or "")
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt") if resume else None
    cfg = dataclasses.replace(cfg, run_dir=str(run_dir))
    if main:
        atomic_write(run_dir / "config.yaml", lambda f: f.write(write_yaml_config(cfg)))
    return cfg, run_dir, checkpoint


def train_interruptibly(trainer, logger, progress) -> None:
    """``trainer.train`` where Ctrl-C finishes the current iteration, checkpoints and sets
    ``trainer.stop_requested``; a second Ctrl-C aborts at once.  Closes the logger and progress bar."""
    def request_stop(signum, frame):
        trainer.stop_requested = True
        signal.signal(signal.SIGINT, previous)

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        trainer.train(logger, progress)
    finally:
        signal.signal(signal.SIGINT, previous)
        progress.close()
        logger.close()


class NullLogger:
    """What non-zero data-parallel ranks log to."""

    def log(self, step: int, metrics: dict) -> None:
        pass

    def close(self) -> None:
        pass


def run_experiment(cfg: TrainConfig, resume: bool = False) -> Optional[dict]:
    """Train (or continue) a run and write config.yaml, metrics.csv, tb/, checkpoint.pt,
    summary.json and learning_curve.png into its directory.  Returns the summary (``None`` on
    data-parallel ranks other than 0, which write nothing)."""
    cfg = resolve_for_env(cfg)
    main = int(os.environ.get("RANK", "0")) == 0
    cfg, run_dir, checkpoint = start_run(cfg, resume, main)
    if main:
        print(settings_line(cfg), flush=True)
    trainer = Trainer(cfg, run_dir, checkpoint)
    logger = MetricLogger(run_dir, trainer.global_step if resume else None, cfg.tensorboard) if main else NullLogger()
    progress = Progress(cfg.total_steps, trainer.global_step, f"{cfg.algo} {cfg.env}", cfg.progress and main)

    try:
        train_interruptibly(trainer, logger, progress)
    except BaseException:
        trainer.dist.close(finished=False)
        raise
    trainer.dist.close()
    if not main:
        if trainer.stop_requested:
            raise RunInterrupted(run_dir)
        return None
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png", f"{cfg.algo.upper()} on {cfg.env}")
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    eval_returns = (evaluate(cfg.env, trainer.actor, trainer.obs_norm, cfg.eval_episodes, cfg.seed + 10_000,
                             trainer.device, cfg.eval_deterministic) if cfg.eval_episodes > 0 else [float("nan")])
    eval_mean, eval_std = mean_std(eval_returns)
    summary = {
        "env": cfg.env, "algo": cfg.algo, "seed": cfg.seed, "total_steps": trainer.global_step,
        "wall_time_s": round(trainer.elapsed, 2), "sps": round(trainer.global_step / max(trainer.elapsed, 1e-9), 1),
        "final_return_mean": trainer.recent_return(), "eval_return_mean": eval_mean, "eval_return_std": eval_std,
        "eval_episodes": cfg.eval_episodes, "health_events": dict(trainer.health_counts),
        "health_event_log": trainer.health_events, "device": str(trainer.device), "run_dir": str(run_dir),
    }
    write_json(run_dir / "summary.json", summary)
    return summary
