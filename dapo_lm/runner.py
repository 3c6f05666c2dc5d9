"""``dapo run --algo grpo-lm|dapo-lm``: one sequence-generation experiment end to end (warm start, RL, held-out
evaluation, checkpoints, summary, curve) on a built-in task or the user's prompts and reward, sharing :mod:`core.run.runner`'s prologue (run-directory checks, the
one-writer lock, checkpoint loading, config.yaml)."""
from __future__ import annotations

import dataclasses
import os
import time
import warnings
from pathlib import Path
from typing import Optional

from core.training.checkpoint import load_checkpoint, load_state, require, write_json
from core.config.parsing import load_run_config as read_run_config, read_yaml, required_fields
from core.config.errors import RunInterrupted
from core.config.limits import check_device
from core.run.plotting import plot_learning_curve
from core.run.rundir import software_versions
from core.run.runner import budget_line, run_started, train_on_rank
from dapo_lm.config import LMConfig, check_reward_trust, complete
from dapo_lm.rewards import RewardError

CHECKPOINT_KEYS = ("global_step", "warm_step", "model", "optimizer", "rng")


def load_run_config(run_dir: Path, trust_env: bool = False) -> LMConfig:
    """The saved config; a --reward it names that imports code is refused unless ``trust_env``
    (:func:`dapo_lm.config.check_reward_trust`)."""
    unset = ("run_dir", "model_dir", "micro_batch_size", "model_config", "tokenizer_dir", "prompts", "eval_prompts",
             "correct_reward", "group_streams", "lora_rank")
    required = ("task", *(name for name in required_fields(LMConfig, unset) if name != "env"))
    cfg = read_run_config(run_dir, LMConfig, required=required)
    check_reward_trust(cfg.reward, (), str(Path(run_dir) / "config.yaml"), trust_env)
    recorded = read_yaml(Path(run_dir) / "config.yaml")
    if cfg.dynamic_sampling and isinstance(recorded, dict) and "group_filter" not in recorded:
        warnings.warn(f"{run_dir} was started before the published group filter: it continues with the acc filter "
                      "and discards surplus groups (it started with the reward-spread filter, surplus carried)",
                      stacklevel=2)
    return cfg


def data_name(cfg: LMConfig) -> str:
    """What the run trains on, in a few words: the built-in task, or the prompts file's name."""
    if cfg.prompts is None:
        return cfg.task
    return "prompts" if cfg.prompts.startswith("dapo-local/") else Path(cfg.prompts).stem


def default_run_dir(cfg: LMConfig) -> str:
    return str(Path("runs") / f"{data_name(cfg)}__{cfg.algo}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}")


def settings_line(cfg: LMConfig) -> str:
    """The techniques on and off, so nobody has to open config.yaml to learn what ran."""
    clip = (f"clip {cfg.clip_eps_low}" if cfg.clip_eps_high == cfg.clip_eps_low
            else f"clip-higher {cfg.clip_eps_low}/{cfg.clip_eps_high}")
    parts = [clip, f"loss {cfg.loss_aggregation}", "overlong filtering " + ("on" if cfg.filter_truncated else "off"),
             (f"soft overlong penalty over the last {cfg.overlong_buffer} of {cfg.max_new_tokens} tokens"
              if cfg.soft_overlong_penalty else f"no length penalty (limit {cfg.max_new_tokens} tokens)"),
             (f"dynamic sampling ({cfg.group_filter} filter, <= {cfg.max_gen_rounds} rounds, surplus "
              f"{'carried' if cfg.carry_surplus else 'discarded'})" if cfg.dynamic_sampling else "no group filter"),
             f"{cfg.prompts_per_batch} prompts x {cfg.group_size} answers, {cfg.num_minibatches} steps per batch",
             f"warm start {cfg.warm_start_steps} steps" if cfg.warm_start_steps else "no warm start"]
    if cfg.lora_rank is not None:
        parts.append(f"LoRA rank {cfg.lora_rank} (base weights frozen)")
    if cfg.reward:
        parts.insert(0, f"reward {' + '.join(cfg.reward)}, correct at >= {cfg.correct_threshold:g}")
    recipes = f" [recipes: {', '.join(cfg.recipe)}]" if cfg.recipe else ""
    what = f"task {cfg.task}" if cfg.prompts is None else f"prompts {cfg.prompts}"
    return f"{cfg.algo} on {what}{recipes}: " + "; ".join(parts)


def summary_line(s: dict) -> str:
    return (f"{s['algo']} on {s['task']}: {s['answers_generated']} answers in {s['wall_time_s']:.0f}s "
            f"({s['answers_per_s']:.1f}/s); held-out accuracy {s['warm_start_accuracy']:.3f} "
            f"{'after the warm start' if s.get('warm_start_steps', 1) else 'at the start'} -> "
            f"{s['heldout_accuracy']:.3f} (greedy; sampled {s['heldout_accuracy_sampled']:.3f}); health events "
            f"{ {k: v for k, v in s['health_events'].items() if v} }; outputs in {s['run_dir']}")


def run_experiment(cfg: LMConfig, resume: bool = False) -> Optional[dict]:
    """Train (or continue) a resolved run; returns the summary written to summary.json (``None`` on data-parallel
    ranks other than 0, which write nothing: dapo_lm/data_parallel.py)."""
    from dapo_lm.data_parallel import check_world
    from dapo_lm.setup import prepare
    from dapo_lm.trainer import LMTrainer

    check_world(cfg.prompts_per_batch, cfg.group_streams, int(os.environ.get("WORLD_SIZE", "1")))
    main = int(os.environ.get("RANK", "0")) == 0
    # tokenizer, prompts, reward (one dry call) and model are read and checked before the run directory exists: a
    # failure is one line, nothing made
    setup = prepare(cfg)
    if cfg.run_dir is None:
        cfg = dataclasses.replace(cfg, run_dir=default_run_dir(cfg))
    build = lambda c, run_dir: LMTrainer(c, run_dir, setup=setup)  # noqa: E731
    return run_started(cfg, resume, build, _train_and_report, main, checkpoint_keys=CHECKPOINT_KEYS)


def _train_and_report(cfg: LMConfig, run_dir: Path, trainer, resume: bool) -> Optional[dict]:
    main = trainer.shards.dist.is_main
    if main:
        print(settings_line(cfg), flush=True)
        print(budget_line(cfg.total_steps, trainer.batch_size, trainer.global_step).replace("env steps", "answers"),
              flush=True)
    if not train_on_rank(cfg, run_dir, trainer, resume, f"{cfg.algo} {data_name(cfg)}", main, trainer.shards.close):
        return None  # rank 0 alone evaluates the end and writes the outputs
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png",
                        f"{cfg.algo} on {data_name(cfg)} (training accuracy)", column="rollout/accuracy",
                        xlabel="generated answers", events=trainer.health_events)
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    last = trainer.evals[-1] if trainer.evals else {}
    try:
        final = last if last.get("step") == trainer.global_step else trainer.evaluate()  # no second pass of the same
    except RewardError as e:
        raise RewardError(f"{e}; the run stopped at {trainer.global_step} answers with a checkpoint, before its final "
                          f"evaluation: fix the reward, then dapo run --resume {run_dir} --trust-env") from e
    warm = trainer.warm_start_eval
    summary = {
        "task": data_name(cfg), "algo": cfg.algo, "seed": cfg.seed, "recipe": list(cfg.recipe),
        "warm_start_steps": cfg.warm_start_steps,
        "answers_generated": trainer.global_step, "wall_time_s": round(trainer.elapsed, 2),
        "rl_time_s": round(trainer.rl_seconds, 2),
        "answers_per_s": round(trainer.global_step / max(trainer.rl_seconds, 1e-9), 2),
        "tokens_generated": trainer.tokens_generated, "optimizer_steps": trainer.optimizer_steps,
        "tokens_per_s": round(trainer.tokens_generated / max(trainer.rl_seconds, 1e-9), 1),
        "warm_start_accuracy": warm.get("greedy", float("nan")),
        "warm_start_accuracy_sampled": warm.get("sampled", float("nan")),
        "heldout_accuracy": final["greedy"], "heldout_accuracy_sampled": final.get("sampled", float("nan")),
        "heldout_length_mean": final["greedy_length"], "heldout_problems": len(trainer.heldout),
        "accuracy_convention": f"share of {len(trainer.heldout)} held-out problems answered correctly: greedy, and "
                               f"sampled = mean over {cfg.eval_samples} answers at temperature 1",
        "evaluations": trainer.evals, "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "health_events": dict(trainer.health_counts), "health_event_log": trainer.health_events,
        "device": str(trainer.device), "run_dir": str(run_dir),
        "software": software_versions(),
    }
    write_json(run_dir / "summary.json", summary)
    return summary


def load_trainer(run_dir: Path, device: str = "cpu", trust_env: bool = False):
    """The trained model of ``run_dir`` in a trainer (for evaluation and the Python API); ``trust_env`` confirms a
    --reward its config.yaml names."""
    from dapo_lm.trainer import LMTrainer

    check_device(device)
    cfg = dataclasses.replace(complete(load_run_config(Path(run_dir), trust_env)), device=device)
    path = Path(run_dir) / "checkpoint.pt"
    state = load_checkpoint(path)
    require(state, CHECKPOINT_KEYS, path)
    trainer = LMTrainer(cfg, Path(run_dir))
    load_state(trainer, state, path)  # a checkpoint that does not fit: one line
    return trainer


def evaluate_run(run_dir: Path, episodes: Optional[int], seed: int, device: str = "cpu",
                 deterministic=None, trust_env: bool = False) -> list[float]:
    """``dapo eval RUN_DIR``: 1.0 or 0.0 per held-out problem (``episodes`` of them, default the run's
    --eval-problems), greedy unless ``--stochastic`` (then one answer sampled at temperature 1, from ``seed``)."""
    return evaluate_trainer(load_trainer(run_dir, device, trust_env), episodes, seed, deterministic)


def evaluate_trainer(trainer, episodes: Optional[int], seed: int, deterministic=None) -> list[float]:
    """:func:`evaluate_run` of a loaded trainer."""
    import torch

    from dapo_lm.rollout import answer_hits

    problems = trainer.source.heldout_set(episodes) if episodes else trainer.heldout
    gen = None if deterministic is not False else torch.Generator(device=trainer.device).manual_seed(seed)
    hits, _ = answer_hits(trainer.model, trainer.tok, trainer.reward, problems, trainer.cfg.max_new_tokens,
                          trainer.device, 1, gen)
    return [float(h) for h in hits]


def eval_line(returns: list[float]) -> str:
    """What ``dapo eval`` prints for an LM run."""
    n = len(returns)
    return f"heldout_accuracy {sum(returns) / max(n, 1):.3f} ({int(sum(returns))} of {n} held-out problems)"
