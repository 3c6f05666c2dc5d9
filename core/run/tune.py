"""``dapo tune`` and ``core.tune``: an Optuna study over ``dapo run`` options, each trial an ordinary run directory.

    dapo tune space.yaml --study-dir runs/tune-cartpole --n-trials 20 --env CartPole-v1 --total-steps 50000

The space (:mod:`core.run.tune_space`) names the searched options; the other options (``--env``, ``--algo``,
``--total-steps``, ``--recipe``, ...) are the base every trial shares.  Trial ``N`` trains in
``STUDY_DIR/trials/NNNN`` through :func:`core.run.api.train`, as ``dapo run`` would.  Its objective (maximised) is,
with ``objective="train"``, the run's ``final_return_mean``: the mean return of its last 10 finished training
episodes; with ``"eval"``, its ``eval_return_mean`` (``--eval-episodes`` episodes after training).  While a trial
trains, the same running mean of the last 10 training episodes is reported after every iteration
(:func:`core.training.loop.observe_iterations`) at the percent of the budget done, so that trials of different batch
sizes line up, and Optuna's ``MedianPruner`` stops a trial whose curve lies below the median of the earlier ones.

The study lives in ``STUDY_DIR/study.db`` (SQLite): a killed study continues where it stopped when the same
command runs again, and several processes given the same ``--study-dir`` share it.  ``n_trials`` is the number of
trials the study should hold in total (complete, pruned, or failed with an error of their settings), not a number
per process: ``--n-trials 3`` after a study of 2 adds one.  A trial cut off (Ctrl-C, a kill) does not count: it is
marked failed and a new trial takes its place; its run directory stays.  After every trial the study's outputs are
rewritten (:mod:`core.run.tune_report`): ``best_recipe.yaml`` (``dapo run --recipe STUDY_DIR/best_recipe.yaml``),
``trials.csv``, ``trials.md`` and ``trials.png``.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, NamedTuple, Optional, Union

from core.config.errors import ConfigError, RunInterrupted, shown
from core.config.parsing import to_plain
from core.run.tune_space import NOT_IN_RECIPE, Param, load_space

STUDY_NAME = "dapo-tune"
INSTALL = "pip install 'dapo-toolkit[tune]'"  # pyproject's project name and extra


@dataclass(frozen=True)
class TuneOptions:
    """How ``dapo tune`` runs its study (the searched and base options are ``dapo run``'s)."""

    # --- tune
    n_trials: int = 20
    """Trials the study should hold in total (complete, pruned, or failed on their settings), counting those of
    earlier or parallel processes: a study of 2 given --n-trials 3 runs one more."""
    objective: Literal["train", "eval"] = "train"
    """What a trial maximises: train = the mean return of the run's last 10 training episodes (summary.json's
    final_return_mean); eval = the return of its --eval-episodes evaluation after training (eval_return_mean)."""
    prune: bool = True
    """Stop a trial whose learning curve (mean of the last 10 training episodes, by percent of the budget) lies below
    the median of the earlier trials at the same point (Optuna's MedianPruner)."""
    prune_warmup: int = 25
    """Percent of a trial's budget before it may be pruned."""
    prune_startup: int = 3
    """Trials that finish before any trial is pruned."""


class TuneResult(NamedTuple):
    """What :func:`tune` returns: the study directory, the best trial's number, objective and option values (None
    before any trial completed), and the best recipe's path (None likewise)."""

    study_dir: Path
    best_trial: Optional[int]
    best_value: Optional[float]
    best_params: Optional[dict]
    best_recipe: Optional[Path]


def optuna_module():
    """Optuna, or one line saying how to install it."""
    try:
        import optuna
    except ImportError as e:
        raise ConfigError(f"dapo tune needs optuna, which is not installed: {INSTALL}") from e
    return optuna


def check_options(options: TuneOptions) -> None:
    if not 1 <= options.n_trials <= 100_000:
        raise ConfigError(f"--n-trials must be in 1 .. 100000, got {options.n_trials}")
    if not 0 <= options.prune_warmup <= 100:
        raise ConfigError(f"--prune-warmup is a percent of the budget: 0 .. 100, got {options.prune_warmup}")
    if not 0 <= options.prune_startup <= 100_000:
        raise ConfigError(f"--prune-startup must be in 0 .. 100000, got {options.prune_startup}")


def check_study_dir(study_dir: Path) -> bool:
    """One line for a study directory that cannot be used; True if it holds a study to continue.  Creates nothing."""
    from core.run.rundir import check_name_lengths

    check_name_lengths(study_dir)
    if study_dir.exists() and not study_dir.is_dir():
        raise ConfigError(f"--study-dir {study_dir} is a file; choose a directory")
    parent = next((p for p in (study_dir, *study_dir.parents) if p.exists()), Path("."))
    if not parent.is_dir():
        raise ConfigError(f"--study-dir {study_dir} lies under the file {parent}; choose another directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {study_dir}: {parent} is not writable; choose another --study-dir")
    if (study_dir / "study.db").is_file():
        return True
    if study_dir.is_dir() and any(not p.name.startswith(".") for p in study_dir.iterdir()):
        raise ConfigError(f"--study-dir {study_dir} holds files but no study.db; choose an empty or new directory")
    return False


def _plan(params: list[Param], base: dict, objective: str) -> str:
    """What a study searches and over which base, as stored with it: a resumed study must search the same."""
    base = {k: v for k, v in base.items() if k not in NOT_IN_RECIPE}
    return json.dumps({"space": {p.name: p.spec() for p in params}, "base": to_plain(base), "objective": objective},
                      sort_keys=True, default=str)


def check_base(params: list[Param], base: dict, family, trust_env: bool) -> None:
    """Resolve the base options alone and with each edge of every range (:meth:`Param.corners`): a value the options'
    own checks refuse is one line now, before the study directory exists."""
    from core.run import api

    given = [p.name for p in params if p.name in base]
    if given:
        raise ConfigError(f"--{given[0].replace('_', '-')} is both given and searched by the space; drop one")
    if "run_dir" in base:
        raise ConfigError("--run-dir does not apply to dapo tune: trial N trains in STUDY_DIR/trials/NNNN")
    api.resolve(dict(base), None, family, trust_env)
    for p in params:
        for value in p.corners():
            try:
                api.resolve({**base, p.name: value}, None, family, trust_env)
            except ConfigError as e:
                raise ConfigError(f"space: {p.name} = {shown(value)} is refused: {e}") from e


@contextlib.contextmanager
def study_lock(study_dir: Path) -> Iterator[None]:
    """Processes sharing a study take turns to create it, count its trials and start one (so that together they
    run ``n_trials``, not more)."""
    fd = os.open(study_dir / ".tune.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):
        return True  # another user's process, or no pid recorded: leave it
    return True


def fail_orphans(study, optuna) -> None:
    """Trials left running by a process of this machine that is gone (killed): failed (uncounted: no 'error')."""
    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if t.user_attrs.get("host") == host and not _alive(t.user_attrs.get("pid")):
            study.tell(t.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)


def counted(trials, optuna) -> list:
    """The trials ``n_trials`` counts: complete, pruned, running, or failed on their settings (not cut off)."""
    state = optuna.trial.TrialState
    return [t for t in trials if t.state in (state.COMPLETE, state.PRUNED, state.RUNNING)
            or (t.state == state.FAIL and "error" in t.user_attrs)]


def open_study(study_dir: Path, plan: str, options: TuneOptions, optuna):
    """Create or load the study in ``study_dir/study.db``; a study of another plan (space, base, objective) is
    refused.  Called under :func:`study_lock`."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{study_dir.resolve() / 'study.db'}",
                                         engine_kwargs={"connect_args": {"timeout": 60}})
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=options.prune_startup,
                                          n_warmup_steps=options.prune_warmup) if options.prune
              else optuna.pruners.NopPruner())
    study = optuna.create_study(storage=storage, study_name=STUDY_NAME, direction="maximize", pruner=pruner,
                                load_if_exists=True)
    stored = study.user_attrs.get("plan")
    if stored is None:
        study.set_user_attr("plan", plan)
    elif stored != plan:
        raise ConfigError(f"{study_dir} holds a study of another space, base options or objective "
                          f"({json.loads(stored)}); give the same ones or another --study-dir")
    return study


def _reporter(trial, options: TuneOptions, optuna):
    """The hook of one trial's run: report the running return at each percent of the budget it passed; prune."""
    last = [0]

    def hook(trainer, metrics) -> None:
        budget = getattr(trainer.cfg, "total_steps", None)  # a family counting its budget otherwise: no reports
        value = trainer.recent_return()
        if not budget or math.isnan(value):
            return
        percent = min(100, 100 * trainer.global_step // budget)
        if percent <= last[0]:
            return
        for step in range(last[0] + 1, percent + 1):
            trial.report(value, step)
        last[0] = percent
        if options.prune and trial.should_prune():
            raise optuna.TrialPruned(f"pruned at {percent}% of the budget (running return {value:.4g})")
    return hook


def run_trial(study, trial, params: list[Param], base: dict, family, study_dir: Path, options: TuneOptions,
              trust_env: bool, optuna) -> None:
    """Train trial ``trial`` in ``study_dir/trials/NNNN`` and tell the study how it ended."""
    from core.run import api
    from core.training.loop import observe_iterations

    values = {p.name: p.suggest(trial) for p in params}
    run_dir = study_dir / "trials" / f"{trial.number:04d}"
    trial.set_user_attr("run_dir", str(run_dir))
    shown_values = " ".join(f"{k}={v}" for k, v in values.items())
    print(f"trial {trial.number}: {shown_values} -> {run_dir}", flush=True)
    state = optuna.trial.TrialState
    try:
        with observe_iterations(_reporter(trial, options, optuna)):
            result = api.train({**base, **values, "run_dir": str(run_dir)}, family=family.name, trust_env=trust_env)
    except optuna.TrialPruned as e:
        study.tell(trial, state=state.PRUNED)
        print(f"trial {trial.number}: {e}", flush=True)
        return
    except ConfigError as e:  # these settings together are refused: counted, the study goes on
        trial.set_user_attr("error", str(e))
        study.tell(trial, state=state.FAIL)
        print(f"trial {trial.number} failed: {e}", file=sys.stderr, flush=True)
        return
    except (RunInterrupted, KeyboardInterrupt):
        trial.set_user_attr("interrupted", "Ctrl-C")
        study.tell(trial, state=state.FAIL)
        raise
    except BaseException:  # a fault that is not the settings' (a full disk): not counted, the trial runs again later
        trial.set_user_attr("interrupted", "an error")
        study.tell(trial, state=state.FAIL)
        raise
    key = "final_return_mean" if options.objective == "train" else "eval_return_mean"
    value = result.summary.get(key)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        trial.set_user_attr("error", f"{key} is {value} (no finished episode?)")
        study.tell(trial, state=state.FAIL)
        print(f"trial {trial.number} failed: {key} is {value}; give a longer --total-steps", file=sys.stderr)
        return
    study.tell(trial, float(value))
    print(f"trial {trial.number}: {options.objective} return {value:.4g}", flush=True)


def tune(space: Union[str, Path, dict], study_dir: Union[str, Path], config: Union[None, dict, str, Path] = None, *,
         n_trials: int = 20, objective: str = "train", prune: bool = True, prune_warmup: int = 25,
         prune_startup: int = 3, family: Optional[str] = None, trust_env: bool = False, **options: Any) -> TuneResult:
    """Run (or continue) the study of ``study_dir`` until it holds ``n_trials`` trials (see the module's text).

    ``space``: a YAML file or the same mapping (:mod:`core.run.tune_space`); ``config`` and keyword ``options``: the
    base options of every trial, as :func:`core.train` takes them (``env``, ``algo``, ``total_steps``, ``recipe``...).
    Bad input raises :class:`ConfigError` (one line) before any file is written."""
    from core.run import api

    tune_options = TuneOptions(n_trials, objective, prune, prune_warmup, prune_startup)
    base = api.explicit_options(config, options)
    fam = api.plugins().family_named(family) if family is not None else api.family_for(base)
    return run_study(space, Path(study_dir), base, fam, tune_options, trust_env)


def run_study(space: Union[str, Path, dict], study_dir: Path, base: dict, family, options: TuneOptions,
              trust_env: bool = False) -> TuneResult:
    """:func:`tune` with the base options as explicit options (field -> value) and the family chosen."""
    from core.run.tune_report import write_outputs

    if options.objective not in ("train", "eval"):
        raise ConfigError(f"objective must be 'train' or 'eval', got {shown(options.objective)}")
    check_options(options)
    optuna = optuna_module()
    params = load_space(space, family.config_class)
    check_study_dir(study_dir)
    base = {k: (tuple(v) if k == "recipe" else v) for k, v in base.items()}
    check_base(params, base, family, trust_env)
    plan = _plan(params, base, options.objective)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study_dir.mkdir(parents=True, exist_ok=True)
    with study_lock(study_dir):
        study = open_study(study_dir, plan, options, optuna)
    while True:
        with study_lock(study_dir):  # count and start under the lock: parallel processes run n_trials together
            fail_orphans(study, optuna)
            if len(counted(study.get_trials(deepcopy=False), optuna)) >= options.n_trials:
                break
            trial = study.ask()
            trial.set_user_attr("host", socket.gethostname())
            trial.set_user_attr("pid", os.getpid())
        try:
            run_trial(study, trial, params, base, family, study_dir, options, trust_env, optuna)
        finally:
            write_outputs(study, study_dir, params, base, options.objective, optuna)
    best = write_outputs(study, study_dir, params, base, options.objective, optuna)
    if best is None:
        return TuneResult(study_dir, None, None, None, None)
    return TuneResult(study_dir, best.number, best.value, {p.name: p.value(best.params[p.name]) for p in params},
                      study_dir / "best_recipe.yaml")


def options_from_args(args) -> TuneOptions:
    """The :class:`TuneOptions` given on the command line (the others at their defaults)."""
    return TuneOptions(**{k: v for k, v in vars(args).items() if k in TuneOptions.__dataclass_fields__})

