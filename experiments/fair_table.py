"""The equal-recipe MuJoCo table (issue #49): every algorithm with CleanRL's settings and with the mujoco recipe.

Columns: ``ppo``, ``grpo`` and ``dapo-mechanisms`` (DAPO's own mechanisms on: dapo-v1) with CleanRL's settings; the
same three on the ``mujoco`` recipe (initial std e^-1, one joint gradient clip, KL brake, noise floor); and ``dapo``
with the ``dapo-mujoco`` recipe (DAPO's tuned MuJoCo settings).  The CleanRL-settings rows and that dapo row are *copied* from the committed 1M-step folders, whose
resolved configs are the suite's recipes (``tests/test_recipes.py``; ``tests/test_fair_table.py`` checks that every
copy equals its source row); the recipe rows come from ``dapo bench mujoco --suite fair`` runs.  Every column uses
the same seeds.

The headline is the mechanism-only effect per env, ``dapo-mechanisms-recipe`` against ``grpo-recipe`` and
``ppo-recipe`` (same network, noise, normalisation, clip, brake and floor): P(run pairs won) and each column's IQM
with a stratified-bootstrap 95% CI; the recipe's effect on each algorithm is the same algorithm's two rows.

    python -m experiments.fair_table --new runs/fair_out/fair/results.csv     # merge new runs, rebuild the report
    python -m experiments.fair_table                                           # rebuild from the committed rows
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from experiments.sweep import ROOT, caller_path, parser, script_main

RESULTS = ROOT / "experiments" / "results"
SOURCES = {"HalfCheetah-v5": "mujoco_1M", "Walker2d-v5": "mujoco_1M", "Ant-v5": "mujoco_1M_ant",
           "Humanoid-v5": "mujoco_1M_humanoid"}
COPIED = {"ppo": "ppo", "grpo": "grpo", "dapo-mechanisms": "dapo-v1", "dapo": "dapo"}  # label here -> label there
ALGOS = ("ppo", "grpo", "dapo-mechanisms")
SEEDS = (1, 2, 3, 4, 5)
BUDGET = 1_000_000
LABELS = {**{a + "-recipe": f"{a} (mujoco recipe)" for a in ALGOS}, "dapo": "dapo (dapo-mujoco recipe)",
          **{a: f"{a} (CleanRL settings)" for a in ALGOS}}  # row order of the across-envs table; ppo-recipe first


def algo_and_recipe(label: str) -> tuple[str, str]:
    """``grpo-recipe`` -> ("grpo", "mujoco"); ``grpo`` -> ("grpo", "cleanrl"); ``dapo`` -> ("dapo", "dapo-mujoco")."""
    if label == "dapo":
        return "dapo", "dapo-mujoco"
    base, recipe = (label[: -len("-recipe")], "mujoco") if label.endswith("-recipe") else (label, "cleanrl")
    return ("dapo" if base == "dapo-mechanisms" else base), recipe


def row(env: str, label: str, seed: int, final_return: float, total_steps: int, source: str) -> dict:
    algo, recipe = algo_and_recipe(label)
    return {"env": env, "variant": label, "algo": algo, "recipe": recipe, "seed": seed, "total_steps": total_steps,
            "final_return": final_return, "source": source}


def copied_rows() -> list[dict]:
    """The CleanRL-settings rows and dapo with the dapo-mujoco recipe, from the committed folders (seeds SEEDS)."""
    from experiments.result_rows import read_rows

    out = []
    for env, folder in SOURCES.items():
        for r in read_rows(RESULTS / folder / "results.csv"):
            label = next((k for k, v in COPIED.items() if v == r["variant"]), None)
            if r["env"] == env and label and r["seed"] in SEEDS:
                out.append(row(env, label, r["seed"], r["final_return_mean"], r["total_steps"], folder))
    return out


def new_rows(path: Path) -> list[dict]:
    """Rows of a ``mujoco_benchmark --suite fair`` results.csv (the recipe columns)."""
    from experiments.result_rows import read_rows

    return [row(r["env"], r["variant"], r["seed"], r["final_return_mean"], r["total_steps"], "fair runs")
            for r in read_rows(path) if r["variant"].endswith("-recipe") and r["seed"] in SEEDS and r["env"] in SOURCES]


def scores(rows: list[dict], env: str, label: str) -> np.ndarray:
    return np.array([r["final_return"] for r in rows if r["env"] == env and r["variant"] == label], dtype=float)


def cell(x: np.ndarray) -> str:
    from core.run.evaluation import sample_std
    from experiments.stats import iqm, stratified_bootstrap_ci

    if not len(x):
        return "not run"
    if len(x) == 1:
        return f"{x[0]:.0f} (1 run: no spread yet)"
    lo, hi = stratified_bootstrap_ci({"env": x})
    return f"{x.mean():.0f} +- {sample_std(x):.0f} ({len(x)}); IQM {iqm(x):.0f} [{lo:.0f}, {hi:.0f}]"


def report(rows: list[dict], command: str) -> list[str]:
    from experiments.stats import probability_of_improvement

    envs = [e for e in SOURCES if any(r["env"] == e for r in rows)]
    md = [f"# Equal-recipe MuJoCo table ({time.strftime('%Y-%m-%d')})", "", f"Command: `{command}`", "",
          f"Budget: {BUDGET} env steps per run; seeds {list(SEEDS)} in every column; score = mean return of the last "
          "10 training episodes. Cells: mean +- sample std (ddof=1) (n); IQM [stratified-bootstrap 95% CI]. CleanRL "
          "rows and the dapo-mujoco recipe's dapo are copies of the committed rows named in the `source` column of results.csv.", ""]
    for env in envs:
        md += [f"## {env}", "", "| algorithm | CleanRL settings | mujoco recipe |", "|---|---|---|"]
        md += [f"| {a} | {cell(scores(rows, env, a))} | {cell(scores(rows, env, a + '-recipe'))} |" for a in ALGOS]
        md += [f"| dapo (dapo-mujoco recipe: the mujoco recipe plus GRPO's lambda rule, eps_V 0.2, uniform minibatches) | | "
               f"{cell(scores(rows, env, 'dapo'))} |", ""]
    md += ["## Mechanism-only effect", "",
           "P(run pairs won) by dapo-mechanisms against each peer under the same settings (0.5: level).", "",
           "| env | vs grpo (recipe) | vs ppo (recipe) | vs grpo (CleanRL) | vs ppo (CleanRL) |",
           "|---|---|---|---|---|"]
    for env in envs:
        def p(a: str, b: str) -> str:
            x, y = scores(rows, env, a), scores(rows, env, b)
            return f"{probability_of_improvement({env: x}, {env: y}):.2f}" if len(x) and len(y) else "-"
        md.append(f"| {env} | {p('dapo-mechanisms-recipe', 'grpo-recipe')} | "
                  f"{p('dapo-mechanisms-recipe', 'ppo-recipe')} | {p('dapo-mechanisms', 'grpo')} | "
                  f"{p('dapo-mechanisms', 'ppo')} |")
    return md + across_envs(rows) + ["", "## README table", "",
                                     "The README's MuJoCo table, made from these rows (tests/test_fair_table.py "
                                     "checks that the README carries it line for line).", ""] + readme_table(rows)


def _as_benchmark_rows(rows: list[dict]) -> list[dict]:
    """This table's rows under the score name ``mujoco_report``'s across-envs statistics read."""
    return [{**r, "final_return_mean": r["final_return"]} for r in rows]


def across_envs(rows: list[dict]) -> list[str]:
    """The headline across envs: each column's IQM of min-max normalised returns with its bootstrap CI, and P(> ppo
    with the recipe), over the envs where every column has runs (``mujoco_report.aggregate_table``)."""
    from experiments.mujoco_report import aggregate_table

    md = aggregate_table(_as_benchmark_rows(rows), list(SOURCES), list(LABELS), LABELS)
    return ["", "## Across envs"] + md if md else []


def readme_table(rows: list[dict]) -> list[str]:
    """The README's headline: per env each column's mean +- sample std (n when not 5), then the normalised IQM
    [95% CI] across the envs where every column ran, and CleanRL's published PPO where it has one."""
    from core.run.evaluation import sample_std
    from experiments.mujoco_report import CLEANRL_PPO_1M, normalised_summary

    def short(x: np.ndarray) -> str:
        if not len(x):
            return "not run"
        spread = f" +- {sample_std(x):.0f}" if len(x) > 1 else ""
        return f"{x.mean():.0f}{spread}" + ("" if len(x) == len(SEEDS) else f" ({len(x)})")

    recipe_cols = [a + "-recipe" for a in ALGOS] + ["dapo"]
    md = ["| env | ppo | grpo | dapo, own mechanisms | dapo, `dapo-mujoco` recipe | no recipe (CleanRL settings), means: ppo / "
          "grpo / dapo own | CleanRL PPO (published, v4) |", "|---|---|---|---|---|---|---|"]
    for env in SOURCES:
        cells = [short(scores(rows, env, c)) for c in recipe_cols]
        cleanrl = " / ".join(f"{scores(rows, env, a).mean():.0f}" for a in ALGOS)  # a reference: means only
        md.append(f"| {env} | {' | '.join(cells)} | {cleanrl} | {CLEANRL_PPO_1M.get(env.split('-')[0], '-')} |")
    used, summary = normalised_summary(_as_benchmark_rows(rows), list(SOURCES), list(LABELS))
    if used:
        def iqm_cell(label: str) -> str:
            m, lo, hi = summary[label][:3]
            return f"{m:.2f} [{lo:.2f}, {hi:.2f}]"
        where = "all four" if len(used) == len(SOURCES) else ", ".join(e.split("-")[0] for e in used)
        md.append(f"| {where}: normalised IQM [95% CI] | {' | '.join(iqm_cell(c) for c in recipe_cols)} | "
                  f"{' / '.join(f'{summary[a][0]:.2f}' for a in ALGOS)} | |")
    return md


def main(argv=None, prog=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = parser(prog, __doc__)
    p.add_argument("--new", type=caller_path, help="results.csv of fair-suite runs to merge (the recipe columns)")
    p.add_argument("--out", type=caller_path, default=RESULTS / "fair")
    args = p.parse_args(argv)
    if args.new is not None and not args.new.is_file():
        p.error(f"--new {args.new}: no such file")
    from experiments.notes import write_results_md
    from experiments.result_rows import check_budget, merge_rows, read_rows, write_rows

    key = ("env", "variant", "seed")
    committed = [r for r in read_rows(args.out / "results.csv") if r["source"] == "fair runs"]
    new = new_rows(args.new) if args.new else []
    check_budget(new, BUDGET, args.new)  # a shorter fair run must not enter a 1M table
    rows = merge_rows(committed, copied_rows() + new, key)
    rows.sort(key=lambda r: (list(SOURCES).index(r["env"]), r["variant"], r["seed"]))
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "results.csv", rows)
    md = report(rows, "python -m experiments.fair_table" + (" --new <fair results.csv>" if args.new else ""))
    write_results_md(args.out / "results.md", "\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    script_main(main)
