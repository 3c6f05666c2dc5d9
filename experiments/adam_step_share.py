"""How much of each network's Adam step survives Adam's eps?  (issue #4, why DAPO and GRPO differ on MuJoCo)

PPO and GRPO (CleanRL's recipe) clip the actor's and the critic's gradients by one joint norm; DAPO clips
each network's on its own (decoupled optimisers).  On MuJoCo the actor's gradient norm is ~100x the critic's,
so joint clipping multiplies the critic's gradient by the actor's clip factor (~0.05), and Adam's ``eps``
(1e-5), tiny against normal gradients, becomes comparable to the critic's ``sqrt(v)``: part of its step is
lost.  This script reads the Adam state in each finished run's checkpoint and reports, per network, the
share of the update that survives ``eps``:

    share = sum_i |m_i| / (sqrt(v_i) + eps)  /  sum_i |m_i| / sqrt(v_i)

(``m``, ``v`` bias-corrected), i.e. the L1 norm of Adam's step over the L1 norm it would have with eps = 0
(1 = eps costs nothing).  The learning rate cancels, so an annealed rate at the end of training does not
matter.  It is the state at the run's last checkpoint (the end of training), not an average over training.

    python -m experiments.adam_step_share --runs-dir runs/mujoco_1M --suites main ablation \\
        --variants ppo grpo dapo grpo-logstd-1 --out experiments/results/adam_step_share
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from experiments.notes import write_results_md
from experiments.result_rows import write_rows
from experiments.run_folders import add_run_folder_arguments, finished_runs, run_key

GROUPS = ("actor", "critic")  # the trainer's optimiser param groups, in this order (core/training/trainer.py)


def adam_step_share(exp_avg: list[torch.Tensor], exp_avg_sq: list[torch.Tensor], step: float, eps: float,
                    betas: tuple[float, float] = (0.9, 0.999)) -> float:
    """Share of the L1 norm of Adam's update that survives ``eps``, over one param group's tensors.

    ``exp_avg`` / ``exp_avg_sq``: Adam's first and second moments (any shapes, one tensor per parameter),
    ``step``: Adam's step count (for the bias corrections).  Entries with ``v = 0`` (never updated) are skipped."""
    b1, b2 = 1 - betas[0] ** step, 1 - betas[1] ** step
    kept = free = 0.0
    for m, v in zip(exp_avg, exp_avg_sq):
        m, root = m.double().abs().flatten() / b1, (v.double().flatten() / b2).sqrt()
        used = root > 0
        kept += (m[used] / (root[used] + eps)).sum().item()
        free += (m[used] / root[used]).sum().item()
    return kept / free if free > 0 else float("nan")


def checkpoint_shares(path: Path) -> dict[str, float]:
    """``{"actor": share, "critic": share}`` from a run's checkpoint.pt (the trainer's two param groups)."""
    from core.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(path)
    opt, shares = ckpt["optimizer"], {}
    for name, group in zip(GROUPS, opt["param_groups"]):
        states = [opt["state"][i] for i in group["params"] if i in opt["state"]]
        if not states:
            raise SystemExit(f"error: {path} has no Adam state for the {name}; is it a finished run's checkpoint?")
        if sum(s["exp_avg"].numel() for s in states) != sum(t.numel() for t in ckpt[name].values()):
            raise SystemExit(f"error: {path}: the optimiser's param groups do not match the {name}'s parameters")
        step = float(states[0]["step"])
        shares[name] = adam_step_share([s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], step,
                                       group["eps"], tuple(group["betas"]))
    return shares


def gradient_clip(run_dir: Path) -> str:
    """"joint" or "per network", from the run's config (``load_run_config`` fills it in for runs older than the flag)."""
    from core.run.rundir import load_run_config

    return "joint" if load_run_config(run_dir).joint_grad_clip else "per network"


def summary_table(rows: list[dict]) -> list[str]:
    lines = ["| env | variant | gradient clip | runs | actor share, mean [min, max] | critic share, mean [min, max] |",
             "|---|---|---|---|---|---|"]
    for env, variant in sorted({(r["env"], r["variant"]) for r in rows}):
        group = [r for r in rows if (r["env"], r["variant"]) == (env, variant)]
        cell = lambda k: (f"{np.mean([r[k] for r in group]):.2f} [{min(r[k] for r in group):.2f}, "  # noqa: E731
                          f"{max(r[k] for r in group):.2f}]")
        clips = "/".join(sorted({r["gradient_clip"] for r in group}))
        lines.append(f"| {env} | {variant} | {clips} | {len(group)} | {cell('actor_share')} | {cell('critic_share')} |")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_folder_arguments(p, variants_required=True)
    p.add_argument("--envs", nargs="*", default=None, help="envs to read (default: all found)")
    a = p.parse_args(argv)

    runs = [d for d in finished_runs(a.runs_dir, a.suites, a.envs, a.variants) if (d / "checkpoint.pt").exists()]
    if not runs:
        raise SystemExit(f"error: no finished runs of {', '.join(a.variants)} under {a.runs_dir}/"
                         f"{{{','.join(a.suites)}}}/; check --runs-dir, --suites, --variants and --envs")
    rows = []
    for d in runs:
        s = checkpoint_shares(d / "checkpoint.pt")
        rows.append({**run_key(d), "gradient_clip": gradient_clip(d), "actor_share": s["actor"],
                     "critic_share": s["critic"]})
    a.out.mkdir(parents=True, exist_ok=True)
    write_rows(a.out / "results.csv", rows)
    command = " ".join(["python -m experiments.adam_step_share", *(sys.argv[1:] if argv is None else argv)])
    table = summary_table(rows)
    write_results_md(a.out / "results.md", "\n".join(
        ["# Share of Adam's step that survives eps, per network (end of training)", "", f"Command: `{command}`", "",
         "share = L1 norm of Adam's update / the same with eps = 0, from each run's final checkpoint (1 = eps "
         "costs nothing). Gradient clip: both networks' gradients by one joint norm, or each on its own.",
         "", *table]))
    print("\n".join(table))


if __name__ == "__main__":
    main()
