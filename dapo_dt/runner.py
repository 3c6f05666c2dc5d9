"""``dapo run --algo dt|dapo-dt --dataset NAME``: one Decision Transformer experiment end to end
(train offline, optionally fine-tune online, evaluate, checkpoint, summary, curve)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from core.checkpoint import load_checkpoint, write_json
from core.config import RunInterrupted
from core.envs import check_env_id
from core.evaluation import mean_std
from core.logging import MetricLogger, Progress
from core.plotting import plot_learning_curve
from core.runner import start_run, train_interruptibly
from dapo_dt.config import DTConfig, resolve
from dapo_dt.trainer import DTTrainer, human_normalised


def run_experiment(cfg: DTConfig, resume: bool = False) -> dict:
    cfg = resolve(cfg)
    check_env_id(cfg.env)
    cfg, run_dir, checkpoint = start_run(cfg, resume)
    trainer = DTTrainer(cfg, run_dir, checkpoint)
    logger = MetricLogger(run_dir, trainer.grad_step if resume else None, tensorboard=False)
    total = cfg.grad_steps + (1 if cfg.online_steps else 0)
    progress = Progress(total, trainer.grad_step, f"{cfg.algo} {cfg.env}", cfg.progress)
    train_interruptibly(trainer, logger, progress)
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png", f"{cfg.algo.upper()} on {cfg.env}",
                        column="eval/return_mean", xlabel="gradient steps")
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    scores = trainer.last_eval or trainer.evaluate()
    mean, std = mean_std(scores)  # std: sample std (ddof=1)
    summary = {"env": cfg.env, "algo": cfg.algo, "seed": cfg.seed, "dataset": cfg.dataset,
               "dataset_steps": trainer.data.num_steps, "grad_steps": trainer.grad_step,
               "online_env_steps": trainer.env_steps, "wall_time_s": round(trainer.elapsed, 2),
               "target_return": trainer.target_return, "eval_return_mean": mean, "eval_return_std": std,
               "eval_scores": scores, "human_normalised": human_normalised(cfg.env, mean), "run_dir": str(run_dir)}
    write_json(Path(run_dir) / "summary.json", summary)
    return summary


def evaluate_run(run_dir: Path, episodes: int, seed: int, device: str = "cpu", deterministic=None) -> list[float]:
    """``dapo eval RUN_DIR`` for dt/dapo-dt runs: whole games with the saved model, return scale and target
    return (no dataset needed).  Actions are sampled from the model's softmax, as in training."""
    from core.cli_config import load_run_config
    from core.config import ConfigError

    if deterministic:
        raise ConfigError("Decision Transformers are evaluated by sampling their softmax; drop --no-stochastic")
    cfg = dataclasses.replace(load_run_config(Path(run_dir), DTConfig), device=device)
    trainer = DTTrainer(cfg, Path(run_dir), load_checkpoint(Path(run_dir) / "checkpoint.pt"), load_data=False)
    return [ep.score for ep in trainer.play(episodes, seed)]
