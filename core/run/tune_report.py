"""The outputs of a ``dapo tune`` study (:mod:`core.run.tune`), rewritten after every trial from the study database:
``best_recipe.yaml`` (the best complete trial as a recipe ``dapo run --recipe`` takes as it is), ``trials.csv`` and
``trials.md`` (one row per trial) and ``trials.png`` (the objective by trial and the best so far)."""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any, Optional

import yaml

from core.config.parsing import to_plain
from core.run import recipes
from core.run.tune_space import NOT_IN_RECIPE, Param
from core.training.checkpoint import atomic_write

OBJECTIVE_TEXT = {"train": "mean return of the last 10 training episodes",
                  "eval": "mean return of the evaluation episodes after training"}


def best_recipe(trial, params: list[Param], base: dict, objective: str, study_dir: Path) -> dict:
    """The recipe of ``trial`` (a complete FrozenTrial): the base recipes (paths made absolute, since a recipe's
    relative paths are read from its own folder) under the base options (but those of :data:`NOT_IN_RECIPE`), the
    algorithm and env its run resolved, and the trial's values."""
    out: dict[str, Any] = {"description": f"dapo tune {study_dir}: trial {trial.number}, {objective} return "
                                          f"{trial.value:.6g} ({OBJECTIVE_TEXT[objective]})"}
    bases = [str(Path(r).expanduser().resolve()) if recipes.is_path(r) else r for r in base.get("recipe", ())]
    if bases:
        out["base"] = bases
    run_config = _run_config(trial)
    out.update({k: run_config[k] for k in ("algo", "env") if k in run_config})
    out.update({k: v for k, v in base.items() if k != "recipe" and k not in NOT_IN_RECIPE})
    out.update({p.name: p.value(trial.params[p.name]) for p in params})
    return to_plain(out)


def _run_config(trial) -> dict:
    from core.config.errors import ConfigError
    from core.config.parsing import read_yaml

    try:
        data = read_yaml(Path(trial.user_attrs.get("run_dir", "")) / "config.yaml")
    except ConfigError:
        return {}
    return data if isinstance(data, dict) else {}


def rows(study, params: list[Param]) -> list[dict]:
    """One row per trial: number, state, objective (a pruned trial's last reported value), option values, the
    percent of the budget it reached, seconds, run directory and error."""
    out = []
    for t in study.get_trials(deepcopy=False):
        reached = max(t.intermediate_values, default=None)
        value = t.value if t.value is not None else (t.intermediate_values[reached] if reached is not None and
                                                     t.state.name == "PRUNED" else None)
        out.append({"trial": t.number, "state": t.state.name.lower(), "value": value,
                    **{p.name: p.value(t.params[p.name]) if p.name in t.params else None for p in params},
                    "budget_pct": reached, "seconds": None if t.duration is None else round(t.duration.total_seconds(), 1),
                    "run_dir": t.user_attrs.get("run_dir", ""),
                    "error": t.user_attrs.get("error", "")})
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write_outputs(study, study_dir: Path, params: list[Param], base: dict, objective: str, optuna) -> Optional[Any]:
    """Rewrite the study's outputs; returns the best complete trial (None before one completed)."""
    table = rows(study, params)
    columns = ["trial", "state", "value", *(p.name for p in params), "budget_pct", "seconds", "run_dir", "error"]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows([{k: _cell(v) for k, v in r.items()} for r in table])
    atomic_write(study_dir / "trials.csv", lambda f: f.write(text.getvalue()))
    md = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    md += ["| " + " | ".join(_cell(r[c]).replace("|", "/") for c in columns) + " |" for r in table]
    atomic_write(study_dir / "trials.md", lambda f: f.write("\n".join(md) + "\n"))
    plot_trials(table, study_dir / "trials.png", objective)
    complete = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    if not complete:
        return None
    best = max(complete, key=lambda t: (t.value, -t.number))
    recipe = yaml.safe_dump(best_recipe(best, params, base, objective, study_dir), sort_keys=False)
    atomic_write(study_dir / "best_recipe.yaml", lambda f: f.write(recipe))
    return best


def plot_trials(table: list[dict], path: Path, objective: str) -> None:
    """The objective of each complete trial (dots), pruned ones at their last reported value (crosses), and the
    best complete value so far (a step line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from core.run.plotting import finish_figure

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for state, marker, label in (("complete", "o", "complete"), ("pruned", "x", "pruned (last reported)")):
        pts = [(r["trial"], r["value"]) for r in table if r["state"] == state and r["value"] is not None]
        if pts:
            ax.plot(*zip(*pts), marker, ls="", label=label)
    best, xs, ys = -math.inf, [], []
    for r in table:
        if r["state"] == "complete" and r["value"] is not None:
            best = max(best, r["value"])
            xs.append(r["trial"])
            ys.append(best)
    if xs:
        ax.step(xs, ys, where="post", lw=2, label="best so far")
    if not ax.lines:  # no trial finished yet: an empty frame, and no legend to draw
        ax.plot([], [], ls="", label="no trial finished yet")
    finish_figure(fig, ax, "trial", f"{objective} return", f"dapo tune: {OBJECTIVE_TEXT[objective]}", path,
                  loc="lower right")
