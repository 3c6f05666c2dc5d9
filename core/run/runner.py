"""``dapo run`` for the Gymnasium family: one experiment end to end (train, checkpoint, evaluate, summarise, plot).

Shared with the other families: :func:`run_started` (:func:`start_run`: run directory checks, lock, checkpoint,
config.yaml; then the family's training and report under the lock), :func:`train_interruptibly` (Ctrl-C finishes
the iteration and checkpoints) and :func:`summary_line` (dapo_ma's too).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from core import extensions
from core.run import presets
from core.run import recipes
from core.training.checkpoint import (atomic_write, check_counters, load_checkpoint, load_state, remove_orphans, require,
                             write_json)
from core.config.parsing import RESUMABLE_OVERRIDES, write_yaml_config
from core.config.errors import ConfigError, RunInterrupted
from core.config.options import TrainConfig, policy_clip
from core.envs.collector import CollectorProcess
from core.envs.make import LOCAL_NAMESPACE, env_family, imports_code, make_env
from core.run.evaluation import evaluate, mean_std, number
from core.training.logging import MetricLogger, Progress
from core.training.loop import rounded_budget
from core.run.plotting import plot_learning_curve
from core.run.rundir import RunLock, check_contents, check_run_dir, software_versions
from core.training.trainer import Trainer
from core.config.trust import check_env

CHECKPOINT_KEYS = ("global_step", "iteration", "elapsed", "actor", "critic", "optimizer", "obs_norm", "sampler")


def resolve_for_env(explicit: dict[str, Any], trust_env: bool = False) -> TrainConfig:
    """Options given by the user (field -> value) -> the resolved config for their env's family.  The env and its
    kwargs are the ones the layered options name (explicit, else the last user recipe that sets them, else the
    default); an env a recipe file names is imported only when trusted (core/config/trust.py)."""
    given = recipes.given(explicit, TrainConfig)
    top, source = recipes.user_layer(given, TrainConfig)
    env_id = top.get("env", TrainConfig.env)
    check_env(env_id, f"recipe {source}", trust_env or source is None, imports_code)
    try:
        env = make_env(env_id, top.get("env_kwargs"))
    except ConfigError as e:
        raise _other_family_hint(env_id, top.get("algo", TrainConfig.algo)) or e
    try:
        family = env_family(env.observation_space, env.action_space, env_id)
        cfg = presets.resolve(given, family)
        extensions.check_all(cfg.extensions, cfg, env.action_space)  # before the run directory exists
    finally:
        env.close()
    return cfg


def _other_family_hint(env_id: str, algo: str) -> Optional[ConfigError]:
    """When another family claims an env the Gymnasium family cannot make (a PettingZoo task given to ppo): one line
    naming that family's algorithms, instead of Gymnasium's complaint."""
    from core.run.registry import plugins

    other = plugins().family_for_env(env_id)
    if other is None or algo in other.algos:
        return None
    return ConfigError(f"--env {env_id} is a {other.name} env, which --algo {algo} cannot train; use one of "
                       f"{', '.join(other.algos)} (e.g. --algo {other.example})")


def resume_config(cls: type, saved, overrides: dict[str, Any], replaceable: tuple[str, ...] = ()):
    """A saved config with the options that may change on resume (and ``replaceable`` ones) replaced; any other option
    is refused."""
    resumable = RESUMABLE_OVERRIDES & {f.name for f in dataclasses.fields(cls)}  # the ones this family has
    frozen = sorted(set(overrides) - resumable - {"run_dir"} - set(replaceable))  # run_dir: the CLI's
    saved_env = getattr(saved, "env", None)
    if frozen == ["env"] and str(saved_env).startswith(LOCAL_NAMESPACE + "/"):
        raise ConfigError(f"--env cannot change when resuming; this run's env {saved_env} was a Python callable (a "
                          "lambda or a local function): pass it again, core.train(resume=run_dir, env=make_env)")
    if frozen:
        raise ConfigError(f"--{frozen[0].replace('_', '-')} cannot change when resuming; only "
                          f"{', '.join('--' + k.replace('_', '-') for k in sorted(resumable))} can")
    return dataclasses.replace(saved, **overrides)  # run_dir: the directory being resumed, wherever it was made


def settings_line(cfg: TrainConfig, extensions=(), family: Optional[str] = None, resumed: bool = False) -> str:
    """One line naming the recipes applied, in order (the env family's, the algorithm's, the user's), and the
    settings they chose that change what the algorithm does, so nobody has to open config.yaml to learn, e.g., that
    dapo with the dapo-mujoco recipe trains on uniform minibatches.  ``family``: the env's family (default: read
    from one env made for the purpose)."""
    if family is None:
        env = make_env(cfg.env, cfg.env_kwargs)
        try:
            family = env_family(env.observation_space, env.action_space, cfg.env)
        finally:
            env.close()
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
    if cfg.log_std_init:  # only Box actions have a log-std; every family's preset is 0 except the mujoco recipe
        parts.append(f"initial action log-std {cfg.log_std_init} (std {math.exp(cfg.log_std_init):.2f})")
    if cfg.ent_coef:
        parts.append(f"entropy bonus {cfg.ent_coef:g}")
    parts += [ext.describe() for ext in extensions]
    # a resumed run keeps the values its config.yaml recorded; the layers that chose them may have been other ones
    # then (before a dapo-mujoco recipe had to be named, dapo took it by itself on Box-action envs)
    applied = "settings of config.yaml" if resumed else "recipes: " + ", ".join([*presets.layers(cfg.algo, family),
                                                                              *cfg.recipe])
    return f"{cfg.algo} on {cfg.env} [{applied}]: " + "; ".join(parts)


def budget_line(total_steps: int, batch_size: int, done: int = 0) -> str:
    """The start line's budget: the steps the run will take, saying so when they round up to whole iterations."""
    steps = rounded_budget(total_steps, batch_size)
    rounded = f" (--total-steps {total_steps} rounded up to whole iterations of {batch_size})" if steps != total_steps else ""
    start = f", resuming at {done}" if done else ""
    return f"training for {steps} env steps{rounded}{start}"


def overlap_note(overlap: bool, load: Optional[float] = None, cores: Optional[int] = None) -> Optional[str]:
    """A line for an ``--overlap`` collector process (``overlap``) started on a machine whose cores are already busy
    (1-minute load average at least the core count): the collector process then takes a core from the learner, and
    on such a host the mode measured slower than the synchronous run.  None otherwise."""
    if not overlap:
        return None
    try:
        load = os.getloadavg()[0] if load is None else load
    except OSError:  # no load average on this platform
        return None
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if load < cores:
        return None
    return (f"note: --overlap runs the collector in a second process, but the load average is already {load:.1f} on "
            f"{cores} core{'s' if cores > 1 else ''}: on a busy 2-core machine it measured 0.6-1.0x the synchronous "
            "rate, 1.4-1.6x on an idle one (experiments/results/throughput/2026-12-06_loaded)")


def default_run_dir(cfg) -> Path:
    name = str(cfg.env).replace("/", "-").replace(":", "-")
    return Path("runs") / f"{name}__{cfg.algo}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def start_run(cfg, resume: bool, build: Callable[[Any, Path], Any], main: bool = True,
              checkpoint_keys: tuple[str, ...] = ("global_step",), step_key: str = "global_step",
              budget_key: str = "total_steps"):
    """Shared prologue of every ``dapo run`` family, in an order that creates or changes no file before every input is
    checked: the run directory (core/run/rundir.py), the checkpoint when resuming, the lock (one writer per run
    directory), the trainer ``build(cfg, run_dir)`` with the checkpoint's state loaded into it (a state that does not
    fit: one line) and the budget (it must reach the steps done, in whole iterations of ``trainer.batch_size``); only
    then leftovers of a killed writer are removed and the resolved config written to config.yaml.  A failure before
    that leaves the place as it was.  ``cfg`` must be resolved already; returns ``(cfg with run_dir, run_dir, trainer,
    lock or None)``."""
    if cfg.run_dir is not None and not str(cfg.run_dir).strip():
        raise ConfigError("--run-dir is empty; name a directory (or omit it for runs/<env>__<algo>__s<seed>__<time>)")
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    if main:
        check_run_dir(run_dir, resume)
    checkpoint, path = None, run_dir / "checkpoint.pt"
    if resume:
        checkpoint = load_checkpoint(path)
        require(checkpoint, checkpoint_keys, path)
        check_counters(checkpoint, path)
    cfg = dataclasses.replace(cfg, run_dir=str(run_dir))
    lock = RunLock(run_dir).acquire() if main else None
    try:
        if main and not resume:
            check_contents(run_dir)  # a writer may have finished in between
        trainer = build(cfg, run_dir)
        if checkpoint is not None:
            load_state(trainer, checkpoint, path)
            done, budget = getattr(trainer, step_key), getattr(cfg, budget_key)
            if rounded_budget(budget, trainer.batch_size) < done:
                raise ConfigError(f"--{budget_key.replace('_', '-')} {budget} is below the {done} steps this run has "
                                  f"done; give at least {done} (or omit it to finish the original budget)")
        if main:
            if not resume and (run_dir / "config.yaml").exists():
                print(f"{run_dir} held a start that never checkpointed; starting afresh there (its config.yaml is "
                      "replaced)", file=sys.stderr, flush=True)
                for stale in (run_dir / "tb").glob("events.out.tfevents.*"):
                    stale.unlink()
            lock.claim()  # the start is accepted: only now is any file of the run changed
            remove_orphans(run_dir)
            atomic_write(run_dir / "config.yaml", lambda f: f.write(write_yaml_config(cfg)))
    except BaseException:
        if lock is not None:
            lock.abandon()
        raise
    return cfg, run_dir, trainer, lock


def run_started(cfg, resume: bool, build: Callable[[Any, Path], Any], report: Callable[..., Any], main: bool = True,
                **start: Any) -> Any:
    """Every family's ``run_experiment``: :func:`start_run` (``start``: its keyword options), then
    ``report(cfg, run_dir, trainer, resume)`` (train, evaluate, write the outputs) while the run directory's lock is
    held; the lock is released after, also on a failure or Ctrl-C.  What ``report`` returns."""
    cfg, run_dir, trainer, lock = start_run(cfg, resume, build, main, **start)
    try:
        return report(cfg, run_dir, trainer, resume)
    finally:
        if lock is not None:
            lock.release()


def train_interruptibly(trainer, logger, progress) -> None:
    """``trainer.train`` where Ctrl-C finishes the current iteration, checkpoints and sets ``trainer.stop_requested``;
    a second Ctrl-C aborts the iteration at once (the last checkpoint stays; a checkpoint being written is finished
    first).  Closes the logger and progress display."""
    def request_stop(signum, frame):
        trainer.stop_requested = True
        signal.signal(signal.SIGINT, previous)

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        trainer.train(logger, progress)
    except BaseException:
        signal.signal(signal.SIGINT, previous)
        progress.close()
        logger.close(quiet=True)  # the training's error is the one to report (a full disk fails the close too)
        raise
    signal.signal(signal.SIGINT, previous)
    progress.close()
    logger.close()


class NullLogger:
    """What non-zero data-parallel ranks log to."""

    def log(self, step: int, metrics: dict) -> None:
        pass

    def close(self, quiet: bool = False) -> None:
        pass


def train_on_rank(cfg, run_dir: Path, trainer, resume: bool, label: str, main: bool, close_group) -> bool:
    """Train under :func:`train_interruptibly` on this data-parallel rank: rank 0 logs and shows progress, the others
    log nothing.  ``close_group(finished=...)`` ends the process group after the training, as unfinished on a failure
    (so the other ranks stop instead of waiting).  A rank other than 0 stops here (:class:`RunInterrupted` after a
    Ctrl-C); True means this is rank 0, which goes on to evaluate and write the outputs."""
    logger = (MetricLogger(run_dir, trainer.global_step if resume else None, cfg.tensorboard, wandb=cfg) if main
              else NullLogger())
    progress = Progress(rounded_budget(cfg.total_steps, trainer.batch_size), trainer.global_step, label,
                        cfg.progress and main, cfg.progress_every_s)
    try:
        train_interruptibly(trainer, logger, progress)
    except BaseException:
        close_group(finished=False)
        raise
    close_group()
    if not main and trainer.stop_requested:
        raise RunInterrupted(run_dir)
    return main


def summary_line(s: dict, spec: str = ".1f", returns: str = "") -> str:
    """The run's last line; n/a for a number that is undefined (no finished episode, fewer than two eval episodes).
    ``spec`` formats the returns; ``returns`` says what a return is (dapo_ma's line: " (per agent)")."""
    return (f"{s['algo']} on {s['env']}: {s['total_steps']} steps in {s['wall_time_s']:.0f}s ({s['sps']:.0f} SPS); "
            f"final_return_mean {number(s['final_return_mean'], spec)}{returns}; eval "
            f"{number(s['eval_return_mean'], spec)} +- {number(s['eval_return_std'], spec)} (sample std); health "
            f"events {s['health_events']}; outputs in {s['run_dir']}")


def run_experiment(cfg: TrainConfig, resume: bool = False) -> Optional[dict]:
    """Train (or continue) a resolved run and write config.yaml, metrics.csv, tb/, checkpoint.pt, summary.json and
    learning_curve.png into its directory.  Returns the summary (``None`` on data-parallel ranks other than 0,
    which write nothing)."""
    main = int(os.environ.get("RANK", "0")) == 0
    return run_started(cfg, resume, Trainer, functools.partial(_train_and_report, main=main), main,
                       checkpoint_keys=CHECKPOINT_KEYS)


def _train_and_report(cfg: TrainConfig, run_dir: Path, trainer: Trainer, resume: bool, *, main: bool) -> Optional[dict]:
    if main:
        family = env_family(trainer.envs.single_observation_space, trainer.action_space, cfg.env)
        print(settings_line(cfg, trainer.extensions, family, resumed=resume), flush=True)
        print(budget_line(cfg.total_steps, trainer.batch_size, trainer.global_step), flush=True)
        note = overlap_note(isinstance(trainer.rollouts.collector, CollectorProcess))
        if note:
            print(note, flush=True)
    if not train_on_rank(cfg, run_dir, trainer, resume, f"{cfg.algo} {cfg.env}", main, trainer.dist.close):
        return None
    plot_learning_curve(run_dir / "metrics.csv", run_dir / "learning_curve.png", f"{cfg.algo.upper()} on {cfg.env}",
                        events=trainer.health_events)
    if trainer.stop_requested:
        raise RunInterrupted(run_dir)
    eval_returns = (evaluate(cfg.env, trainer.actor, trainer.obs_norm, cfg.eval_episodes, cfg.seed + 10_000,
                             trainer.device, cfg.eval_deterministic, env_kwargs=cfg.env_kwargs)
                    if cfg.eval_episodes > 0 else [float("nan")])
    eval_mean, eval_std = mean_std(eval_returns)
    summary = {
        "env": cfg.env, "algo": cfg.algo, "seed": cfg.seed, "total_steps": trainer.global_step,
        "wall_time_s": round(trainer.elapsed, 2), "sps": round(trainer.global_step / max(trainer.elapsed, 1e-9), 1),
        "final_return_mean": trainer.recent_return(), "eval_return_mean": eval_mean, "eval_return_std": eval_std,
        "eval_std_convention": "sample std (ddof=1)", "eval_episodes": cfg.eval_episodes,
        "health_events": dict(trainer.health_counts), "health_event_log": trainer.health_events,
        "device": str(trainer.device), "run_dir": str(run_dir),
        "software": software_versions(),
    }
    write_json(run_dir / "summary.json", summary)
    return summary
