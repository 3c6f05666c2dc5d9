"""Learning-curve plots from ``metrics.csv``."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np


def plot_learning_curve(metrics_csv: Path, out_png: Path, title: str, column: str = "rollout/ep_return_mean",
                        xlabel: str = "environment steps", events: Sequence[dict] = ()) -> None:
    """Episode return per logged row (dots) and its 10-row moving average (line) against ``global_step``; health
    ``events`` (dicts with ``step`` and ``event``) as dashed vertical lines, one colour per kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from core.training.logging import read_metrics

    m = read_metrics(metrics_csv)
    steps = np.array(m.get("global_step", []))
    ret = np.array(m.get(column, []))
    ok = ~np.isnan(ret) if len(ret) else np.array([], dtype=bool)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    if ok.any():
        ax.plot(steps[ok], ret[ok], ".", alpha=0.3, ms=3, label="per update")
        k = min(10, int(ok.sum()))
        smooth = np.convolve(ret[ok], np.ones(k) / k, mode="valid")
        ax.plot(steps[ok][k - 1:], smooth, lw=2, label=f"{k}-update mean")
    colours = {"policy_collapse": "tab:red", "value_divergence": "tab:orange", "non_finite": "tab:purple"}
    for kind in dict.fromkeys(e["event"] for e in events):
        steps_k = [e["step"] for e in events if e["event"] == kind]
        for i, x in enumerate(steps_k):
            ax.axvline(x, ls="--", lw=1, color=colours.get(kind, "tab:gray"),
                       label=f"{kind.replace('_', ' ')} ({len(steps_k)})" if i == 0 else None)
    if events or ok.any():
        ax.legend(loc="lower right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png)
    plt.close(fig)


def finish_figure(fig, ax, xlabel: str, ylabel: str, title: str, path: Path, **legend) -> None:
    """Label ``ax``, add a light grid and a legend (``legend``: its keyword arguments), write ``fig`` to ``path`` and
    close it: the end every benchmark plot shares."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(**legend)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
