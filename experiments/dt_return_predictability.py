"""How predictable is the return-to-go in a DT dataset?  (issue #6: why DAPO-DT's critic explains ~0)

DAPO-DT weights each action by ``exp(A_t / T)`` with ``A_t = G_t - V(s_t)``.  The weights can only
prefer good actions if some of ``G_t``'s variance is predictable; what ``V`` cannot predict is outcome
luck, and weighting by luck only shrinks the effective batch.  For each dataset this script measures
how much better than a constant lookup tables predict ``G_t`` (undiscounted reward-to-go) on held-out
games, keyed on what the state shows (time step, score so far) and on which behaviour policy played the
game.  5-fold cross-validation by episode (each fold holds out every fifth game), so a key with many
values cannot score by memorising games; the skill is ``1 - MSE(table) / MSE(constant)``.  A frame also
shows the ball, which predicts the next point a few steps ahead; these tables do not see it, so they
bound only the score/time part.

    python -m experiments.dt_return_predictability --datasets pong/mixed-v2 pong/greedy-v4

Needs the datasets locally (``dapo dataset collect``; ``MINARI_DATASETS_PATH`` sets the folder).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from experiments.notes import write_results_md
from experiments.result_rows import write_rows
from experiments.stats import heldout_skill, sample_std

TIME_BIN, COARSE_TIME_BIN, FOLDS = 100, 500, 5


def predictors(episodes: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """``episodes``: ``(rewards (T,), behaviour policy id)`` each.  Returns ``G`` ``(S,)`` (reward-to-go),
    the keys ``{name: (S,)}`` and the episode index ``(S,)`` of every step."""
    G, t, won, lost, pol, ep = [], [], [], [], [], []
    for i, (r, policy) in enumerate(episodes):
        r = np.asarray(r, np.float64)
        G.append(np.cumsum(r[::-1])[::-1])
        t.append(np.arange(len(r)))
        won.append(np.concatenate([[0], np.cumsum(r > 0)[:-1]]))    # points before step t
        lost.append(np.concatenate([[0], np.cumsum(r < 0)[:-1]]))
        pol.append(np.full(len(r), policy))
        ep.append(np.full(len(r), i))
    G, t, won, lost, pol, ep = map(np.concatenate, (G, t, won, lost, pol, ep))
    score = won * 1000 + lost
    keys = {"time step (bins of 100)": t // TIME_BIN,
            "points played": won + lost,
            "score (won, lost)": score,
            "score x time (bins of 500)": score * 100_000 + t // COARSE_TIME_BIN,
            "behaviour policy": pol,
            "behaviour policy x points played": pol * 1000 + won + lost}
    return G, keys, ep


def cross_validated_skill(G: np.ndarray, key: np.ndarray, episode: np.ndarray, folds: int = FOLDS) -> float:
    """:func:`heldout_skill` averaged over ``folds`` splits by episode (fold k holds out episodes i % folds == k;
    fewer folds when there are fewer games)."""
    folds = min(folds, int(episode.max()) + 1)
    return float(np.mean([heldout_skill(G, key, episode % folds != k) for k in range(folds)]))


def load_episodes(name: str) -> tuple[list[tuple[np.ndarray, int]], list[str]]:
    from dapo_dt.data import load

    ds, meta = load(name)
    owners = meta.get("episode_policy") or [0] * ds.total_episodes
    episodes = [(np.asarray(ep.rewards), int(owners[i])) for i, ep in enumerate(ds.iterate_episodes())]
    return episodes, meta.get("policies", ["?"])


def main(argv=None, prog=None) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", required=True, help="local Minari dataset names")
    ap.add_argument("--out", default="experiments/results/dt/return_predictability", help="results folder")
    args = ap.parse_args(argv)
    from core.config.errors import ConfigError

    rows, policy_lines = [], []
    for name in args.datasets:
        try:
            episodes, labels = load_episodes(name)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if len(episodes) < 2:
            print(f"error: dataset '{name}' has {len(episodes)} game(s); held-out scores need at least 2", file=sys.stderr)
            return 2
        G, keys, ep = predictors(episodes)
        for key_name, key in keys.items():
            rows.append({"dataset": name, "predictor": key_name, "heldout_skill": round(cross_validated_skill(G, key, ep), 4),
                         "steps": len(G), "episodes": len(episodes), "var_return_to_go": round(float(G.var()), 2)})
        returns = np.array([r.sum() for r, _ in episodes])
        owners = np.array([p for _, p in episodes])
        for p in np.unique(owners):
            sel = returns[owners == p]
            policy_lines.append(f"| {name} | {labels[p] if p < len(labels) else p} | {len(sel)} | "
                                f"{sel.mean():+.1f} +- {sample_std(sel):.1f} |")
        print(f"{name}: " + ", ".join(f"{r['predictor']} {r['heldout_skill']:+.3f}" for r in rows if r["dataset"] == name))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "results.csv", rows)
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    preds = list(dict.fromkeys(r["predictor"] for r in rows))
    skill = {(r["dataset"], r["predictor"]): r["heldout_skill"] for r in rows}
    lines = [f"# Return-to-go predictability ({time.strftime('%Y-%m-%d')})", "",
             f"Command: `python -m experiments.dt_return_predictability --datasets {' '.join(names)}`", "",
             f"Held-out skill of a lookup table on each key at predicting the reward-to-go G_t: 1 - MSE(table) / "
             f"MSE(constant), both fitted on the training games, {FOLDS}-fold cross-validated by game (0 = no "
             "better than a constant V, 1 = perfect, < 0 = worse).", "",
             "| predictor | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {p} | " + " | ".join(f"{skill[(n, p)]:+.3f}" for n in names) + " |" for p in preds]
    lines += ["", "| dataset | steps | episodes | Var(G_t) |", "|---|---|---|---|"]
    first_rows = {r["dataset"]: r for r in reversed(rows)}  # one row per dataset carries its sizes
    lines += [f"| {n} | {first_rows[n]['steps']} | {first_rows[n]['episodes']} | {first_rows[n]['var_return_to_go']} |"
              for n in names]
    lines += ["", "Episode returns per behaviour policy:", "", "| dataset | policy | games | return (mean +- sample std) |",
              "|---|---|---|---|", *policy_lines]
    write_results_md(out / "results.md", "\n".join(lines))
    print(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    from experiments.sweep import script_main

    script_main(main)
