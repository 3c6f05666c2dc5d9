"""Cross-env aggregate over several MuJoCo results folders (the README's "over the four envs" numbers).

Each env of the 1M benchmark lives in its own folder (HalfCheetah and Walker2d in ``mujoco_1M/``, Ant in
``mujoco_1M_ant/``, Humanoid in ``mujoco_1M_humanoid/``, ablations in their ``ablation/`` subfolders), so the
per-folder reports cannot compare variants across all four envs.  This reads the committed ``results.csv``
of the folders given, keeps the named variants and seeds, and prints the same aggregate table as the
per-folder reports: IQM of min-max normalised returns (per env over the runs of the variants named) with a
stratified-bootstrap 95% CI, and P(variant > first variant).  Nothing is run.

    python -m experiments.mujoco_crossenv --variants ppo grpo dapo dapo-v2 dapo-v1 --seeds 1 2 3 4 5 6 7 8 9 10
    python -m experiments.mujoco_crossenv --folders experiments/results/mujoco_1M* experiments/results/mujoco_1M*/ablation \\
        experiments/results/mujoco_1M/walker2d_only/ablation --seeds 1 2 3 4 5 \\
        --variants ppo grpo dapo-v1 dapo-no-dynamic dapo-auto-lambda dapo-auto-lambda-epsV0.2 dapo-grpo-settings
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
ENVS = ["HalfCheetah-v5", "Walker2d-v5", "Humanoid-v5", "Ant-v5"]


def crossenv_rows(folders, variants, seeds, total_steps: int) -> list[dict]:
    """The runs of ``variants`` and ``seeds`` at ``total_steps`` (+-5%) in the folders' results.csv files;
    a run found in two folders (same env, variant, seed) must agree, else it is an error."""
    from experiments.result_rows import read_rows

    runs = {}
    for folder in folders:
        for r in read_rows(Path(folder) / "results.csv"):
            if r["variant"] in variants and r["seed"] in seeds and abs(r["total_steps"] - total_steps) <= 0.05 * total_steps:
                key = (r["env"], r["variant"], r["seed"])
                if key in runs and runs[key]["final_return_mean"] != r["final_return_mean"]:
                    raise SystemExit(f"{key} has two different results in {folder} and an earlier folder; "
                                     "name only one of those folders")
                runs[key] = r
    return list(runs.values())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folders", nargs="+", type=Path,
                   default=[RESULTS / "mujoco_1M", RESULTS / "mujoco_1M_ant", RESULTS / "mujoco_1M_humanoid"],
                   help="results folders whose results.csv to read (default: the three main 1M folders)")
    p.add_argument("--variants", nargs="+", required=True, help="variants to compare; P is against the first")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--envs", nargs="+", default=ENVS)
    p.add_argument("--total-steps", type=int, default=1_000_000)
    args = p.parse_args(argv)
    from experiments.mujoco_report import aggregate_table

    rows = crossenv_rows(args.folders, set(args.variants), set(args.seeds), args.total_steps)
    missing = [f"{v} on {e}" for v in args.variants for e in args.envs
               if not any(r["variant"] == v and r["env"] == e for r in rows)]
    if missing:
        print(f"note: no runs of {', '.join(missing)}; those envs drop out of the aggregate", file=sys.stderr)
    print("\n".join(aggregate_table(rows, args.envs, args.variants)))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
