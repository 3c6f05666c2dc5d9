"""Does the observation normaliser's drift change a restored policy?  (issue #4, the collapse remedy)

The collapse remedy (docs/algorithms.md) restores the actor's best weights, but the running observation statistics
kept moving after that snapshot.  For checkpoints of one run at an earlier step A (the "best" policy) and
later steps B (the "collapse"), this script plays A's actor three ways on the same evaluation seeds:
- ``as_trained``: with A's own statistics (the policy the snapshot was);
- ``bare_restore``: with B's statistics, the weights unchanged (the remedy before commit 010ab0e);
- ``refit_restore``: with B's statistics and the input layer refit (:func:`core.algo.networks.refit_input_layer`).
On the states A's policy visits with its own statistics it reports how far each restore moves the policy:
the mean KL(as trained || restored) and, for Gaussian actors, the mean action shift in units of the action
std (``|d mean| / std``, averaged over states and action dimensions), and the share of normalised inputs at
the normaliser's clip (+-10), where the refit cannot be exact.  Returns of 10 deterministic episodes are
noisy (Humanoid: std 100+); the KL is the clean measure.

    python -m experiments.normaliser_drift --early A.pt --late B1.pt B2.pt --env Humanoid-v5 --out OUT

Checkpoints are ``checkpoint.pt`` files of one ``dapo run`` with observation normalisation (copies taken
while it trained); ``experiments/results/normaliser_drift/README.md`` has the runs and commands used.
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path

import numpy as np
import torch
from torch.distributions import Normal, kl_divergence

from core.training.checkpoint import load_checkpoint
from core.envs.rollout import ObsNormalizer
from core.run.evaluation import evaluate, evaluation_envs, sample_std
from core.algo.networks import build_networks, input_layer, refit_input_layer
from experiments.notes import write_results_md
from experiments.result_rows import write_rows


def play(env_id: str, actor, obs_norm: ObsNormalizer, episodes: int, seed: int) -> tuple[list[float], np.ndarray]:
    """Deterministic returns of ``episodes`` episodes and the raw observations seen ``(S, D)``."""
    seen: list[np.ndarray] = []
    returns = evaluate(env_id, actor, obs_norm, episodes, seed, torch.device("cpu"), seen=seen)
    return returns, np.stack(seen)


@torch.no_grad()
def distance(actor_a, norm_a: ObsNormalizer, actor_b, norm_b: ObsNormalizer, raw: np.ndarray) -> tuple[float, float]:
    """Mean over the raw states ``raw`` ``(S, D)`` of KL(pi_a || pi_b), and of ``|mean_a - mean_b| / std_a``
    over action dimensions for Gaussian actors (NaN otherwise)."""
    p = actor_a.distribution(torch.as_tensor(norm_a(raw)))
    q = actor_b.distribution(torch.as_tensor(norm_b(raw)))
    kl = kl_divergence(p, q)
    kl = kl.sum(-1) if kl.dim() > 1 else kl
    shift = ((p.mean - q.mean).abs() / p.stddev).mean().item() if isinstance(p, Normal) else math.nan
    return kl.mean().item(), shift


def clipped(norm: ObsNormalizer, raw: np.ndarray) -> float:
    """Share of normalised coordinates at the normaliser's clip (where the refit cannot be exact)."""
    return float((np.abs(norm(raw)) >= norm.clip).mean())


def load(env_id: str, path: Path):
    """The checkpoint's MLP actor (hidden sizes read off its weights), its normaliser and its step."""
    state = load_checkpoint(path)
    hidden = [w.shape[0] for k, w in state["actor"].items() if k.endswith("weight")][:-1]
    envs = evaluation_envs(env_id, 0)
    shape, stats = envs.single_observation_space.shape, state["obs_norm"]
    if np.shape(stats["mean"]) != shape or len(shape) != 1:
        raise SystemExit(f"error: {path} does not hold observation statistics of {env_id}'s flat observations "
                         f"{shape}; pass --env the run's env (an MLP run)")
    if stats["count"] < 1:
        raise SystemExit(f"error: {path} comes from a run without observation normalisation (--no-norm-obs): "
                         "nothing drifts; pick a run with --norm-obs")
    actor, _ = build_networks(envs.single_observation_space, envs.single_action_space, hidden, False)
    envs.close()
    actor.load_state_dict(state["actor"])
    norm = ObsNormalizer(shape, True)
    norm.load_state_dict(state["obs_norm"])
    return actor, norm, int(state["global_step"])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--early", type=Path, required=True, help="checkpoint whose actor is restored (the best)")
    p.add_argument("--late", type=Path, nargs="+", required=True, help="later checkpoints of the same run")
    p.add_argument("--env", required=True, help="the run's env id, e.g. Humanoid-v5")
    p.add_argument("--episodes", type=int, default=10, help="deterministic evaluation episodes per condition")
    p.add_argument("--seed", type=int, default=1000, help="evaluation seed (the same for every condition)")
    p.add_argument("--out", type=Path, required=True, help="results folder (results.csv, results.md)")
    a = p.parse_args(argv)

    actor, norm_a, step_a = load(a.env, a.early)
    best_returns, states = play(a.env, actor, norm_a, a.episodes, a.seed)
    rows = [{"early_step": step_a, "late_step": step_a, "condition": "as_trained", "return_mean": np.mean(best_returns),
             "return_std": sample_std(best_returns), "kl": 0.0, "action_shift": 0.0, "clipped": clipped(norm_a, states)}]
    for late in a.late:
        _, norm_b, step_b = load(a.env, late)
        refit = copy.deepcopy(actor)
        refit_input_layer(input_layer(refit), ObsNormalizer.mean_std(norm_a.state_dict()),
                          ObsNormalizer.mean_std(norm_b.state_dict()))
        for name, policy in (("bare_restore", actor), ("refit_restore", refit)):
            returns, _ = play(a.env, policy, norm_b, a.episodes, a.seed)
            kl, shift = distance(actor, norm_a, policy, norm_b, states)
            rows.append({"early_step": step_a, "late_step": step_b, "condition": name, "return_mean": np.mean(returns),
                         "return_std": sample_std(returns), "kl": kl, "action_shift": shift,
                         "clipped": clipped(norm_b, states)})
            print(f"A {step_a} B {step_b} {name}: return {np.mean(returns):.0f} (as trained "
                  f"{np.mean(best_returns):.0f}), KL {kl:.2e}, |d mean|/std {shift:.2e}", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    write_rows(a.out / "results.csv", rows)
    table = ["| policy from step | statistics from step | restore | return (mean +- sample std) | KL(trained, restored) "
             "| mean action shift / std | share of inputs at the clip |", "|---|---|---|---|---|---|---|"]
    table += [f"| {r['early_step']} | {r['late_step']} | {r['condition']} | {r['return_mean']:.0f} +- "
              f"{r['return_std']:.0f} | {r['kl']:.3g} | {r['action_shift']:.3g} | {r['clipped']:.3g} |" for r in rows]
    command = " ".join(["python -m experiments.normaliser_drift", *(sys.argv[1:] if argv is None else argv)])
    write_results_md(a.out / "results.md", "\n".join(
        ["# Observation-normaliser drift and the restored policy", "", f"Command: `{command}`", "",
         f"{a.episodes} deterministic episodes per row on evaluation seed {a.seed}; the action shift is measured "
         "on the states the policy visits with its own statistics.", "", *table]))


if __name__ == "__main__":
    main()
