"""Aggregate statistics for benchmark tables (Agarwal et al. 2021, "Deep RL at the Edge of the
Statistical Precipice"): interquartile mean and stratified-bootstrap confidence intervals (the estimators of
``dapo compare``, core/run/compare.py); plus the
held-out skill of a lookup-table predictor (how predictable a target is from a key).  Every spread the
reports print is a sample std (ddof=1, :func:`core.run.evaluation.sample_std`), labelled so."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from core.run.compare import bootstrap_indices, iqm, percentile_ci
from core.run.evaluation import sample_std


def mean_pm_std(x: Sequence[float], digits: int = 0) -> str:
    """``"mean +- sample std"`` of ``x`` ``(n,)`` with ``digits`` decimals; just ``"mean"`` when ``n < 2``
    (a single run has no spread to show)."""
    v = np.asarray(x, dtype=float)
    mean = f"{v.mean():.{digits}f}"
    return f"{mean} +- {sample_std(v):.{digits}f}" if v.size > 1 else mean


def stratified_bootstrap_ci(scores: Mapping[str, Sequence[float]], statistic: Callable = iqm,
                            reps: int = 2000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of ``statistic`` over all scores, resampling runs with replacement *within*
    each task (stratum) so every resample keeps the per-task run counts (the resamples of
    :func:`core.run.compare.bootstrap_indices`, which ``dapo compare`` draws too)."""
    strata = [np.asarray(v, dtype=float) for v in scores.values()]
    stats = np.array([statistic(np.concatenate([s[i] for s, i in zip(strata, idx)]))
                      for idx in bootstrap_indices([len(s) for s in strata], reps, seed)])
    return percentile_ci(stats, alpha)


def steps_to_threshold(steps: Sequence[float], values: Sequence[float], threshold: float) -> float:
    """First step at which ``values`` reach ``threshold`` (NaN if never)."""
    hit = np.flatnonzero(np.asarray(values, dtype=float) >= threshold)
    return float(np.asarray(steps, dtype=float)[hit[0]]) if len(hit) else float("nan")


def probability_of_improvement(x: Mapping[str, Sequence[float]], y: Mapping[str, Sequence[float]]) -> float:
    """``P(X > Y)`` (ties count 1/2) between runs of two algorithms, averaged over the tasks both have
    (Agarwal et al. 2021): per task, the fraction of (run of X, run of Y) pairs that X wins."""
    per_task = []
    for task in x.keys() & y.keys():
        a, b = np.asarray(x[task], dtype=float)[:, None], np.asarray(y[task], dtype=float)[None, :]
        if a.size and b.size:
            per_task.append(float(((a > b) + 0.5 * (a == b)).mean()))
    return float(np.mean(per_task)) if per_task else float("nan")


def heldout_skill(targets: np.ndarray, keys: np.ndarray, train: np.ndarray) -> float:
    """How much better than a constant a lookup table on ``keys`` predicts ``targets`` on held-out rows.

    The table maps each key to the mean target of the ``train`` rows with that key (keys unseen in
    training fall back to the training mean).  On the other rows the score is
    ``1 - MSE(table) / MSE(training mean)``: 0 = no better than the constant fitted on the same rows,
    1 = perfect, < 0 = worse (the table overfits).  All arrays ``(S,)``; ``train`` is a bool mask.
    """
    keys, targets, train = np.asarray(keys), np.asarray(targets, np.float64), np.asarray(train, bool)
    uniq, inv = np.unique(keys, return_inverse=True)
    sums = np.bincount(inv[train], targets[train], minlength=len(uniq))
    counts = np.bincount(inv[train], minlength=len(uniq))
    mean = targets[train].mean()
    table = np.where(counts > 0, sums / np.maximum(counts, 1), mean)
    test = ~train
    y = targets[test]
    return float(1.0 - np.mean((y - table[inv[test]]) ** 2) / np.mean((y - mean) ** 2))
