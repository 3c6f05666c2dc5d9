"""``dapo compare RUN_DIR ...`` and ``core.compare(...)``: aggregate finished runs by algorithm, env or recipe.

Per group: the number of runs, the mean and the interquartile mean (IQM) of one summary.json metric, each with a
percentile 95% CI from a stratified bootstrap (runs resampled with replacement within each env, so every resample
keeps the per-env run counts), and a performance profile (the share of runs scoring above tau, averaged over envs)
with the same bootstrap's pointwise 95% band (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
Precipice").  The estimators are rliable's; they are computed here in NumPy (rliable needs arch, statsmodels, pandas
and seaborn): point estimates and profiles equal rliable's, its bootstrap CIs agree within resampling noise
(``tests/test_compare.py``), and the mean, IQM and CI agree to float precision with ``experiments/stats.py`` given
the same seed.

Scores of different envs are never pooled raw: without ``norm`` every env gets its own table; with ``norm`` (a
``(min, max)`` per env, e.g. random and expert returns) the scores become ``(x - min) / (max - min)`` and each group
gets one table over all envs.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

if TYPE_CHECKING:  # NumPy is imported in the functions that compute: the command is registered for dapo --help
    import numpy as np

from core.config.errors import ConfigError
from core.config.parsing import read_yaml

BY = ("algo", "env", "recipe")
METRICS = ("final_return_mean", "eval_return_mean")
DEFAULT_REPS = 2000
PROFILE_POINTS = 101


# --- statistics ----------------------------------------------------------------------------------------------------
def iqm(x: Sequence[float]) -> float:
    """Interquartile mean: the mean after cutting ``int(n / 4)`` values from each end (``scipy.stats.trim_mean(x,
    0.25)``, rliable's IQM); with fewer than 4 values nothing is cut."""
    import numpy as np

    v = np.sort(np.asarray(x, dtype=float))
    cut = int(0.25 * len(v))
    return float(v[cut:len(v) - cut].mean())


def bootstrap_indices(sizes: Sequence[int], reps: int, seed: int) -> list[list[np.ndarray]]:
    """``reps`` stratified resamples: per resample, per stratum of size n, n indices drawn with replacement.  Drawn in
    the order of ``experiments.stats.stratified_bootstrap_ci`` (resample by resample, stratum by stratum), so that
    the same seed gives the same resamples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [[rng.integers(0, n, n) for n in sizes] for _ in range(reps)]


def percentile_ci(values: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The ``alpha/2`` and ``1 - alpha/2`` quantiles (NumPy's linear interpolation) along axis 0."""
    import numpy as np

    lo, hi = np.quantile(values, alpha / 2, axis=0), np.quantile(values, 1 - alpha / 2, axis=0)
    return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)


def profile(strata: Sequence[np.ndarray], taus: np.ndarray) -> np.ndarray:
    """Performance profile: per tau, the share of runs with a score ``> tau``, averaged over strata (envs)."""
    import numpy as np

    return np.mean([(s[:, None] > taus[None, :]).mean(axis=0) for s in strata], axis=0)


@dataclass
class GroupStats:
    """One group's scores (per env) and their aggregates; CIs are ``None`` when no bootstrap was asked for."""

    runs: int
    mean: float
    iqm: float
    mean_ci: Optional[tuple[float, float]]
    iqm_ci: Optional[tuple[float, float]]
    profile: list[float]
    profile_ci: Optional[tuple[list[float], list[float]]]
    scores: dict[str, list[float]]
    run_dirs: list[str]

    def to_dict(self) -> dict:
        return dict(vars(self))


def group_stats(strata: Mapping[str, Sequence[float]], taus: np.ndarray, reps: int, seed: int,
                run_dirs: Sequence[str] = ()) -> GroupStats:
    """Mean, IQM and profile of the scores (env -> scores), and their stratified-bootstrap 95% CIs (``reps`` > 0)."""
    import numpy as np

    arrays = [np.asarray(v, dtype=float) for v in strata.values()]
    flat = np.concatenate(arrays)
    mean_ci = iqm_ci = profile_ci = None
    if reps > 0:
        means, iqms, profiles = np.empty(reps), np.empty(reps), np.empty((reps, len(taus)))
        for r, idx in enumerate(bootstrap_indices([len(a) for a in arrays], reps, seed)):
            sample = [a[i] for a, i in zip(arrays, idx)]
            joined = np.concatenate(sample)
            means[r], iqms[r], profiles[r] = joined.mean(), iqm(joined), profile(sample, taus)
        mean_ci, iqm_ci = percentile_ci(means), percentile_ci(iqms)
        lo, hi = percentile_ci(profiles)
        profile_ci = ([float(v) for v in lo], [float(v) for v in hi])
    return GroupStats(runs=len(flat), mean=float(flat.mean()), iqm=iqm(flat), mean_ci=mean_ci, iqm_ci=iqm_ci,
                      profile=[float(v) for v in profile(arrays, taus)], profile_ci=profile_ci,
                      scores={k: [float(x) for x in v] for k, v in strata.items()}, run_dirs=list(run_dirs))


# --- runs ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunRecord:
    run_dir: str
    algo: str
    env: str
    recipe: str
    score: float


def read_run(run_dir: Any, metric: str) -> RunRecord:
    """A finished run's algorithm, env, recipes and ``metric`` (one-line :class:`ConfigError` otherwise)."""
    path = Path(run_dir)
    summary_path = path / "summary.json"
    if not path.is_dir():
        raise ConfigError(f"{path} is not a directory (give run directories written by dapo run)")
    if not summary_path.is_file():
        raise ConfigError(f"{path} is not a finished run: it has no summary.json")
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{summary_path} is not readable JSON ({type(e).__name__})") from None
    if not isinstance(summary, dict):
        raise ConfigError(f"{summary_path} is not a JSON object")
    config = read_yaml(path / "config.yaml") if (path / "config.yaml").is_file() else {}
    config = config if isinstance(config, dict) else {}
    if "heldout_accuracy" in summary and metric not in summary:  # a sequence-generation run: no env, no return
        raise ConfigError(f"{path} is a sequence-generation run (held-out accuracy, no env return); dapo compare "
                          "compares runs of env families")
    value = summary.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        other = next(m for m in METRICS if m != metric)
        raise ConfigError(f"{path}: summary.json has no finite {metric} (got {value!r}); try --metric {other}")
    algo, env = summary.get("algo", config.get("algo")), summary.get("env", config.get("env"))
    if not isinstance(algo, str) or not isinstance(env, str):
        raise ConfigError(f"{path}: neither summary.json nor config.yaml names the run's algo and env")
    recipe = config.get("recipe") or ()
    recipe = "+".join(str(r) for r in ([recipe] if isinstance(recipe, str) else recipe)) or "(none)"
    return RunRecord(str(path), algo, env, recipe, float(value))


# --- comparison ----------------------------------------------------------------------------------------------------
@dataclass
class Table:
    """One table: the groups compared on one env (``task`` = its name) or, normalised, on all (``task`` =
    'normalised')."""

    task: str
    groups: dict[str, GroupStats]
    taus: list[float]


@dataclass
class Comparison:
    """What :func:`compare` returns: tables of per-group statistics, and the files written (if any)."""

    by: str
    metric: str
    normalised: bool
    reps: int
    tables: list[Table]
    files: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        ci = self.reps > 0
        lines = [f"# dapo compare: {self.metric} by {self.by}", ""]
        if self.normalised:
            lines += ["Scores normalised per env: (x - min) / (max - min).", ""]
        if ci:
            lines += [f"95% CIs: percentile stratified bootstrap (strata: envs), {self.reps} resamples.", ""]
        for table in self.tables:
            lines += [f"## {table.task}", ""]
            header = [self.by, "runs", "mean", *(["mean 95% CI"] if ci else []), "IQM", *(["IQM 95% CI"] if ci else [])]
            lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for name, g in table.groups.items():
                cells = [name, str(g.runs), _num(g.mean), *([_ci(g.mean_ci)] if ci else []), _num(g.iqm),
                         *([_ci(g.iqm_ci)] if ci else [])]
                lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def to_dict(self) -> dict:
        return {"by": self.by, "metric": self.metric, "normalised": self.normalised, "reps": self.reps,
                "files": self.files,
                "tables": [{"task": t.task, "taus": t.taus, "groups": {k: g.to_dict() for k, g in t.groups.items()}}
                           for t in self.tables]}


def _num(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"


def _ci(ci: Optional[tuple[float, float]]) -> str:
    return "" if ci is None else f"[{_num(ci[0])}, {_num(ci[1])}]"


def parse_norm(items: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``ENV=MIN:MAX`` words -> env -> (min, max)."""
    out = {}
    for item in items:
        env, eq, bounds = item.rpartition("=")
        lo, colon, hi = bounds.partition(":")
        try:
            pair = (float(lo), float(hi))
        except ValueError:
            pair = None
        if not (eq and colon and env and pair and all(map(math.isfinite, pair)) and pair[1] != pair[0]):
            raise ConfigError(f"--norm wants ENV=MIN:MAX with two different finite numbers, got '{item}'")
        out[env] = pair
    return out


def compare(run_dirs: Sequence[Any], by: str = "algo", metric: str = "final_return_mean",
            norm: Optional[Mapping[str, tuple[float, float]]] = None, reps: int = DEFAULT_REPS, seed: int = 0,
            out: Any = None) -> Comparison:
    """Compare finished runs grouped ``by`` algo, env or recipe on a summary.json ``metric``.

    ``norm``: env -> (min, max); given, scores are normalised and pooled over envs (strata of the bootstrap),
    otherwise each env gets its own table.  ``reps``: bootstrap resamples (0: no CIs; a CI needs at least 2 runs of
    each group on each env).  ``out``: a folder to write compare.md, compare.json and compare.png into (None: write
    nothing).  Bad input raises :class:`ConfigError` with a one-line message."""
    import numpy as np

    if by not in BY:
        raise ConfigError(f"unknown --by '{by}'; choose one of: {', '.join(BY)}")
    if metric not in METRICS:
        raise ConfigError(f"unknown --metric '{metric}'; choose one of: {', '.join(METRICS)}")
    if not isinstance(reps, int) or not 0 <= reps <= 1_000_000:
        raise ConfigError(f"--reps must be in 0 .. 1000000, got {reps}")
    out_dir = None if out is None else Path(out)
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file; give a directory (it is created if missing)")
    if len(run_dirs) < 2:
        raise ConfigError(f"give at least 2 run directories to compare, got {len(run_dirs)}")
    records = [read_run(d, metric) for d in run_dirs]
    envs = list(dict.fromkeys(r.env for r in records))
    if norm:
        missing = [e for e in envs if e not in norm]
        if missing:
            raise ConfigError(f"--norm gives no MIN:MAX for {', '.join(missing)}; give one per env of the runs")
        records = [RunRecord(r.run_dir, r.algo, r.env, r.recipe, (r.score - norm[r.env][0]) /
                             (norm[r.env][1] - norm[r.env][0])) for r in records]
        tasks = [("normalised", records)]
    else:
        tasks = [(env, [r for r in records if r.env == env]) for env in envs]
    tables = []
    for task, recs in tasks:
        grouped: dict[str, dict[str, list[RunRecord]]] = {}
        for r in recs:
            grouped.setdefault(getattr(r, by), {}).setdefault(r.env, []).append(r)
        if reps > 0:
            for name, strata in grouped.items():
                for env, rs in strata.items():
                    if len(rs) < 2:
                        raise ConfigError(f"{by} '{name}' has {len(rs)} run on {env}: a bootstrap CI needs at least 2 "
                                          f"runs (seeds) per group and env; add runs or pass --reps 0")
        scores = np.array([r.score for r in recs])
        taus = np.linspace(scores.min(), scores.max(), PROFILE_POINTS) if len(scores) else np.zeros(1)
        groups = {name: group_stats({env: [r.score for r in rs] for env, rs in strata.items()}, taus, reps, seed,
                                    [r.run_dir for rs in strata.values() for r in rs])
                  for name, strata in grouped.items()}
        tables.append(Table(task, groups, [float(t) for t in taus]))
    result = Comparison(by, metric, bool(norm), reps, tables)
    if out_dir is not None:
        write(result, out_dir)
    return result


def write(result: Comparison, out_dir: Path) -> None:
    """compare.md, compare.json and compare.png into ``out_dir`` (created if missing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "compare.md").write_text(result.markdown())
    (out_dir / "compare.json").write_text(json.dumps(result.to_dict(), indent=1))
    plot(result, out_dir / "compare.png")
    result.files = [str(out_dir / n) for n in ("compare.md", "compare.json", "compare.png")]


def plot(result: Comparison, path: Path) -> None:
    """Per table, a row of two panels: mean and IQM with their CIs per group, and the performance profiles."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(result.tables)
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.2 * rows + 0.6), dpi=110, squeeze=False)
    label = f"{'normalised ' if result.normalised else ''}{result.metric}"
    for (ax_bar, ax_prof), table in zip(axes, result.tables):
        names = list(table.groups)
        y = np.arange(len(names))
        for offset, stat, colour in ((-0.15, "mean", "tab:blue"), (0.15, "iqm", "tab:orange")):
            values = [getattr(table.groups[n], stat) for n in names]
            cis = [getattr(table.groups[n], f"{stat}_ci") for n in names]
            err = None if result.reps == 0 else np.array([[v - c[0] for v, c in zip(values, cis)],
                                                          [c[1] - v for v, c in zip(values, cis)]])
            ax_bar.errorbar(values, y + offset, xerr=err, fmt="o", color=colour, capsize=3,
                            label=stat.upper() if stat == "iqm" else stat)
        ax_bar.set_yticks(y, names)
        ax_bar.invert_yaxis()
        ax_bar.set_xlabel(label)
        ax_bar.set_title(f"{table.task}: mean and IQM" + (" (95% CI)" if result.reps else ""))
        ax_bar.grid(alpha=0.3)
        ax_bar.legend(fontsize=8)
        for name in names:
            g = table.groups[name]
            line, = ax_prof.plot(table.taus, g.profile, label=name)
            if g.profile_ci is not None:
                ax_prof.fill_between(table.taus, *g.profile_ci, color=line.get_color(), alpha=0.2)
        ax_prof.set_xlabel(f"{label} threshold tau")
        ax_prof.set_ylabel("fraction of runs > tau")
        ax_prof.set_title(f"{table.task}: performance profile")
        ax_prof.grid(alpha=0.3)
        ax_prof.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --- the command ---------------------------------------------------------------------------------------------------
COMPARE_DESCRIPTION = (
    "Compare finished runs (their summary.json): per group (--by), the mean and the interquartile mean (IQM) of "
    "--metric with percentile 95% CIs of a stratified bootstrap (runs resampled within each env), and performance "
    "profiles (share of runs above each threshold). Returns of different envs are never pooled raw: without --norm "
    "each env gets its own table; with --norm ENV=MIN:MAX for every env the scores become (x - min)/(max - min) and "
    "are pooled into one table (the bootstrap still resamples within each env). Prints the Markdown table and writes "
    "compare.md, compare.json and compare.png into --out.")


class Compare:
    """``dapo compare RUN_DIR ...``: :func:`compare` on the command line."""

    name = "compare"
    help = "compare finished runs: mean, IQM, bootstrap CIs and performance profiles per algo, env or recipe"
    raw = False

    def add_arguments(self, parser) -> None:
        parser.description = COMPARE_DESCRIPTION
        parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="Run directories of dapo run")
        parser.add_argument("--by", choices=BY, default="algo",
                            help="Group by the algorithm, the env, or the recipes applied (config.yaml) [algo]")
        parser.add_argument("--metric", choices=METRICS, default="final_return_mean",
                            help="summary.json value compared: the training return at the end, or the evaluation "
                                 "after training [final_return_mean]")
        parser.add_argument("--norm", action="append", default=None, metavar="ENV=MIN:MAX",
                            help="Normalise ENV's scores to (x - MIN)/(MAX - MIN) (e.g. random and expert returns); "
                                 "repeat for every env of the runs to pool them into one table")
        parser.add_argument("--reps", type=int, default=DEFAULT_REPS,
                            help=f"Bootstrap resamples [{DEFAULT_REPS}]; 0: no CIs (then groups of one run are fine; "
                                 "a CI needs 2 runs per group and env)")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap [0]")
        parser.add_argument("--out", type=Path, default=Path("compare"),
                            help="Folder for compare.md, compare.json and compare.png [./compare]")

    def run(self, args) -> int:
        if not 0 <= args.seed < 2**32:
            raise ConfigError(f"--seed must be in 0 .. {2**32 - 1}, got {args.seed}")
        result = compare(args.run_dirs, by=args.by, metric=args.metric, norm=parse_norm(args.norm or ()),
                         reps=args.reps, seed=args.seed, out=args.out)
        print(result.markdown(), end="")
        print(f"wrote {', '.join(result.files)}")
        return 0
