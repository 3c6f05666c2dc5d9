"""``dapo run --algo dt|dapo-dt|bc|pct-bc --dataset NAME`` (or ``--dataset-path DIR``): one Decision Transformer experiment end to end (train offline,
optionally fine-tune online, evaluate, checkpoint, summary, curve), sharing :mod:`core.run.runner`'s prologue."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from core.training.checkpoint import check_counters, load_checkpoint, require, write_json
from core.config.parsing import load_run_config as read_run_config
from core.config.errors import ConfigError, RunInterrupted
from core.envs.make import imports_code
from core.run.evaluation import mean_std, number
from core.training.logging import MetricLogger, Progress
from core.run.plotting import plot_learning_curve
from core.run.rundir import software_versions
from core.run.runner import run_started, train_interruptibly
from dapo_dt.config import DTConfig, complete
from dapo_dt.data import normalised_score
from dapo_dt.trainer import DTTrainer, human_normalised

CHECKPOINT_KEYS = ("grad_step", "env_steps", "elapsed", "model", "optimizer", "scale", "target_return")


def load_run_config(run_dir: Path, trust_env: bool = False) -> DTConfig:
    """The resolved config saved in ``run_dir/config.yaml``; an env that would import code named by the file is
    refused unless ``trust_env`` (core/config/trust.py)."""
    return read_run_config(run_dir, DTConfig, required=("env", "algo", "context_len"),
                           imports_code=imports_code, trust_env=trust_env)


def summary_line(s: dict) -> str:
    human = s.get("human_normalised")  # Atari only: flat-state envs have no human reference score
    human = f"; human-normalised {number(human, '.3f')}" if human is not None and human == human else ""
    d4rl = s.get("normalised_score")  # datasets with D4RL-style reference scores
    human += f"; normalised score {number(d4rl, '.1f')}" if d4rl is not None and d4rl == d4rl else ""
    return (f"{s['algo']} on {s['env']} ({s['dataset']}, {s['dataset_steps']} steps): {s['grad_steps']} gradient "
            f"steps, {s['online_env_steps']} online env steps in {s['wall_time_s']:.0f}s; eval "
            f"{number(s['eval_return_mean'])} +- {number(s['eval_return_std'])} (sample std{human}); outputs in "
            f"{s['run_dir']}")


def run_experiment(cfg: DTConfig, resume: bool = False) -> dict:
    """Train (or continue) a resolved run; returns the summary."""
    from dapo_dt.data import load as load_dataset

    load_dataset(cfg.dataset, cfg.dataset_path)  # a missing or unusable dataset: one line before the run directory
    return run_started(cfg, resume, DTTrainer, _train_and_report, checkpoint_keys=CHECKPOINT_KEYS, step_key="grad_step",
                       budget_key="grad_steps")


def settings_line(cfg: DTConfig) -> str:
    """What the resolved algorithm does, in one line at the start: the data, the model and its conditioning, the
    weighting, the budget."""
    recipes = ", ".join([cfg.algo, *cfg.recipe])
    returns = "no return tokens (return-blind)" if cfg.algo in ("bc", "pct-bc") else "return-to-go tokens"
    parts = [f"dataset {cfg.dataset or cfg.dataset_path}" + (f" (best {cfg.top_fraction:.0%} of episodes)"
                                                              if cfg.algo == "pct-bc" else ""),
             f"GPT-2 {cfg.n_layer}x{cfg.n_embd}, context {cfg.context_len}, {returns}",
             "exponential advantage weights" if cfg.advantage_weighting else "unweighted imitation",
             f"{cfg.grad_steps} gradient steps of batch {cfg.batch_size}",
             f"then {cfg.online_steps} online env steps" if cfg.online_steps else "offline only"]
    return f"{cfg.algo} on {cfg.env} [recipes: {recipes}]: " + "; ".join(parts)


def _train_and_report(cfg: DTConfig, run_dir: Path, trainer: DTTrainer, resume: bool) -> dict:
    print(settings_line(cfg), flush=True)
    logger = MetricLogger(run_dir, trainer.grad_step if resume else None, tensorboard=False, wandb=cfg)
    total = cfg.grad_steps + (1 if cfg.online_steps else 0)
    progress = Progress(total, trainer.grad_step, f"{cfg.algo} {cfg.env}", cfg.progress, cfg.progress_every_s)
    train_interruptibly(trainer, logger, progress)
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png", f"{cfg.algo.upper()} on {cfg.env}",
                        column="eval/return_mean", xlabel="gradient steps")
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    scores = trainer.last_eval or trainer.evaluate()
    mean, std = mean_std(scores)  # std: sample std (ddof=1)
    summary = {"env": cfg.env, "algo": cfg.algo, "seed": cfg.seed, "dataset": cfg.dataset or cfg.dataset_path,
               "dataset_steps": trainer.data.num_steps, "grad_steps": trainer.grad_step,
               "online_env_steps": trainer.env_steps, "wall_time_s": round(trainer.elapsed, 2),
               "target_return": trainer.target_return, "eval_return_mean": mean, "eval_return_std": std,
               "eval_std_convention": "sample std (ddof=1)", "eval_scores": scores,
               "human_normalised": human_normalised(cfg.env, mean),
               "normalised_score": normalised_score(mean, trainer.ref_scores),
               "ref_scores": None if trainer.ref_scores is None else list(trainer.ref_scores), "run_dir": str(run_dir),
               "software": software_versions()}
    write_json(Path(run_dir) / "summary.json", summary)
    return summary


def load_trainer(run_dir: Path, device: str = "cpu", env=None, trust_env: bool = False) -> DTTrainer:
    """The trained model of ``run_dir`` in a trainer that can play whole games (no dataset needed); ``env`` (an id or
    a callable) replaces the saved one."""
    from core.envs.make import env_reference

    cfg = complete(load_run_config(Path(run_dir), trust_env=trust_env or env is not None))
    cfg = dataclasses.replace(cfg, device=device, env=cfg.env if env is None else
                              env_reference(env) if callable(env) else env)
    path = Path(run_dir) / "checkpoint.pt"
    state = load_checkpoint(path)
    require(state, CHECKPOINT_KEYS, path)
    check_counters(state, path)
    try:
        return DTTrainer(cfg, Path(run_dir), state, load_data=False)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise ConfigError(f"checkpoint {path} does not fit the run's model ({type(e).__name__}); restore it from a "
                          "backup or start a new run") from e


class Scores(list):
    """Episode returns, with the run's dataset's D4RL-style ``(random, expert)`` reference returns (None without)."""

    ref_scores = None


def evaluate_run(run_dir: Path, episodes: int, seed: int, device: str = "cpu", deterministic=None,
                 trust_env: bool = False) -> Scores:
    """``dapo eval RUN_DIR`` for dt/dapo-dt runs: whole games with the saved model, return scale and target
    return (no dataset needed).  Actions are sampled from the model's softmax, as in training."""
    if deterministic:
        raise ConfigError("Decision Transformers are evaluated by sampling their softmax; drop --no-stochastic")
    trainer = load_trainer(run_dir, device, trust_env=trust_env)
    scores = Scores(ep.score for ep in trainer.play(episodes, seed))
    scores.ref_scores = trainer.ref_scores
    return scores


def eval_line(scores: list[float]) -> str:
    """``dapo eval``'s line: the returns' mean and sample std, and D4RL's normalised score where the dataset had
    reference scores."""
    from core.run.registry import returns_line

    ref = getattr(scores, "ref_scores", None)
    extra = "" if ref is None else f" normalised_score {normalised_score(float(np.mean(scores)), ref):.1f}"
    return returns_line(scores) + extra
