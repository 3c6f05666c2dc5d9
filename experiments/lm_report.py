"""The report of experiments/lm_benchmark.py: results.csv (merged with the committed rows), curves.csv,
results.md (generated part; hand-written notes below the marker survive) and curves.png."""
from __future__ import annotations

import json
import math
import platform
from pathlib import Path

import numpy as np

from experiments.notes import write_results_md
from experiments.result_rows import merge_rows, read_rows, write_rows

RUNGS = ("grpo-lm", "lm-overlong-filter", "lm-clip-higher", "lm-soft-penalty", "lm-token-loss", "dapo-lm")
NAMES = {"grpo-lm": "grpo-lm", "lm-overlong-filter": "+ overlong filtering", "lm-clip-higher": "+ clip-higher",
         "lm-soft-penalty": "+ soft penalty", "lm-token-loss": "+ token-level loss",
         "dapo-lm": "+ dynamic sampling = dapo-lm", "trl-grpo-dapo-loss": "TRL GRPOTrainer, loss_type=dapo"}
TRLS = ("trl-grpo-dapo-loss",)


def diff_ci(a, b, reps: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """mean(a) - mean(b) with a 95% percentile bootstrap CI, resampling each side's seeds independently."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    stats = (a[rng.integers(0, len(a), (reps, len(a)))].mean(1) - b[rng.integers(0, len(b), (reps, len(b)))].mean(1))
    return float(a.mean() - b.mean()), float(np.quantile(stats, 0.025)), float(np.quantile(stats, 0.975))


def _ms(x) -> str:
    x = np.asarray(x, float)
    return f"{x.mean():.3f} +- {x.std(ddof=1):.3f}" if len(x) > 1 else (f"{x.mean():.3f}" if len(x) else "-")


def _ci(d) -> str:
    mark = " *" if d[1] > 0 or d[2] < 0 else ""
    return f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]{mark}"


def curves(run_dir: Path, label: str, seed: int) -> list[dict]:
    from core.training.logging import read_metrics

    m = read_metrics(run_dir / "metrics.csv")
    keys = ("rollout/accuracy", "train/entropy", "rollout/length_mean", "eval/greedy", "time/elapsed_s",
            "rollout/zero_variance_share", "train/clip_low", "train/clip_high")
    return [{"algo": label, "seed": seed, "answers": int(step), **{k: m[k][i] for k in keys if k in m}}
            for i, step in enumerate(m["global_step"]) if step > 0]


def command(args) -> str:
    """The benchmark's command line with the options this report was built with (``--report-only`` left out)."""
    opts = f"--task {args.task} --answers {args.answers} --seeds {args.seeds} --trl-seeds {args.trl_seeds}"
    if args.warm_steps != 400:
        opts += f" --warm-steps {args.warm_steps}"
    rungs = getattr(args, "rungs", RUNGS)
    if set(rungs) != set(RUNGS):
        opts += " --rungs " + " ".join(rungs)
    if args.no_default_run:
        opts += " --no-default-run"
    return f"python -m experiments.lm_benchmark {opts}"


def report(args) -> None:
    task = args.task
    local = [json.loads(p.read_text()) for p in sorted((args.runs_dir / task).glob("*.row.json"))]
    local = [r for r in local if "failed" not in r]
    rows = merge_rows(read_rows(args.out / "results.csv"), local, ("algo", "task", "seed"))
    rows = [r for r in rows if r.get("task") == task and r.get("algo") in (*RUNGS, *TRLS)]  # retired labels out
    if rows:
        write_rows(args.out / "results.csv", rows)
    curve_rows = []
    for r in local:
        run_dir = args.runs_dir / task / f"{r['algo']}__s{r['seed']}"
        if (run_dir / "metrics.csv").exists():
            curve_rows += curves(run_dir, r["algo"], r["seed"])
    if curve_rows:
        write_rows(args.out / "curves.csv", curve_rows)
    by = {a: sorted((r for r in rows if r["algo"] == a), key=lambda r: r["seed"])
          for a in (*RUNGS, *TRLS)}
    acc = {a: [r["heldout_accuracy"] for r in rs] for a, rs in by.items()}
    warm_file = args.runs_dir / task / "warm_start" / "warm_start.json"
    warm = json.loads(warm_file.read_text()) if warm_file.exists() else {}
    lines = [f"# Sequence generation: DAPO's ablation ladder and TRL on `{task}` ({args.answers:,} answers per run)",
             "",
             "Held-out accuracy = share of 200 held-out problems answered correctly with greedy decoding (sampled: "
             "mean over 4 answers at temperature 1). Every RL run starts from the same warm start (seed 0, "
             f"{warm.get('steps', '?')} supervised steps: greedy {warm.get('accuracy_greedy', math.nan):.3f}, sampled "
             f"{warm.get('accuracy_sampled', math.nan):.3f}) and generates the same number of answers (filtered ones "
             "included); seeds vary the RL prompts and sampling. Spreads: sample std (ddof=1) over seeds; differences: "
             "mean difference with a 95% bootstrap CI (10,000 resamples of each side's seeds; * = excludes 0).", "",
             "| rung | seeds | held-out greedy per seed | mean +- std | sampled mean +- std | updates | answers/s | "
             "vs previous rung | vs grpo-lm |", "|---|---|---|---|---|---|---|---|---|"]
    prev = None
    for a in RUNGS:
        rs = by[a]
        if not rs:
            continue
        d_prev = _ci(diff_ci(acc[a], acc[prev])) if prev and len(acc[prev]) > 1 and len(rs) > 1 else "-"
        d_base = (_ci(diff_ci(acc[a], acc["grpo-lm"])) if a != "grpo-lm" and len(acc["grpo-lm"]) > 1 and len(rs) > 1
                  else "-")
        lines.append(f"| {NAMES[a]} | {len(rs)} | {', '.join(f'{x:.3f}' for x in acc[a])} | {_ms(acc[a])} | "
                     f"{_ms([r['heldout_accuracy_sampled'] for r in rs])} | {np.mean([r['updates'] for r in rs]):.0f} | "
                     f"{np.mean([r['answers_per_s'] for r in rs]):.1f} | {d_prev} | {d_base} |")
        prev = a
    trl = by["trl-grpo-dapo-loss"]
    if trl:
        lines += ["", "## TRL's GRPOTrainer side by side", "",
                  "Same warm-start weights, prompts (same order), group size 8, 16 prompts per batch, 4 optimiser steps "
                  "per batch, lr 1e-4, response limit, rewards (+1/-1 and the soft overlong punishment) and held-out "
                  "evaluation. TRL: loss_type=dapo, epsilon 0.2, epsilon_high 0.28, mask_truncated_completions, beta 0, "
                  "no dynamic sampling (TRL has none), so `lm-token-loss` is the like-for-like rung. Answers/s and "
                  "tokens/s: generated answers (tokens, EOS included) over the training time, evaluation excluded; "
                  "peak RSS of the run's process.", "",
                  "| algo | seeds | held-out greedy mean +- std | sampled | updates | answers/s | tokens/s | "
                  "peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
        for a in ("lm-token-loss", "dapo-lm", *TRLS):
            rs = by[a]
            if rs:
                sampled = _ms([r["heldout_accuracy_sampled"] for r in rs])
                lines.append(f"| {NAMES[a]} | {len(rs)} | {_ms(acc[a])} | {sampled} | "
                             f"{np.mean([r['updates'] for r in rs]):.0f} | {_ms([r['answers_per_s'] for r in rs])} | "
                             f"{np.mean([r['tokens_per_s'] for r in rs]):.0f} | "
                             f"{np.mean([r['peak_rss_mb'] for r in rs]):.0f} |")
        for a, t in (("lm-token-loss", TRLS[0]), ("dapo-lm", TRLS[0])):
            trl = by[t]
            if by[a] and len(trl) > 1 and len(by[a]) > 1:
                speed = np.mean([r["answers_per_s"] for r in by[a]]) / np.mean([r["answers_per_s"] for r in trl])
                theirs = {r["seed"]: r["answers_per_s"] for r in trl}
                paired = [r["answers_per_s"] / theirs[r["seed"]] for r in by[a] if r["seed"] in theirs]
                lines.append(f"\n{NAMES[a]} vs {NAMES[t]}: answers/s ratio {speed:.2f}x (of the means; per seed, the two runs "
                             f"back to back: median {np.median(paired):.2f}x, range {min(paired):.2f}-"
                             f"{max(paired):.2f}x); held-out accuracy difference "
                             f"{_ci(diff_ci(acc[a], acc[t]))}.")
    tp_file = args.out / "throughput.json"
    if tp_file.exists():
        tp = json.loads(tp_file.read_text())
        lines += ["", "## Generation throughput", "",
                  f"128 answers sampled at once from the warm start (temperature 1, limit as in training), {tp['reps']} "
                  f"alternating repetitions: this toolkit's KV-cache sampler {np.median(tp['ours_tokens_per_s']):.0f} "
                  f"tokens/s, `model.generate` {np.median(tp['generate_tokens_per_s']):.0f} tokens/s (medians); "
                  f"ratio {tp['ratio_median']:.2f}."]
    default = args.runs_dir / "default" / "summary.json"
    if default.exists():
        s = json.loads(default.read_text())
        lines += ["", "## The default run", "",
                  f"`dapo run --algo dapo-lm` (task {s['task']}, every default: warm start then {s['answers_generated']} "
                  f"RL answers): held-out greedy accuracy {s['warm_start_accuracy']:.3f} after the warm start -> "
                  f"{s['heldout_accuracy']:.3f} at the end (sampled {s['warm_start_accuracy_sampled']:.3f} -> "
                  f"{s['heldout_accuracy_sampled']:.3f}); {s['wall_time_s'] / 60:.1f} min of training and evaluation."]
    shown = [r for a in (*RUNGS, *TRLS) for r in by[a]]
    runs_min = sum(r.get("process_wall_s", r["wall_time_s"]) for r in shown) / 60
    earlier = (" (its default-run section comes from an earlier invocation without --no-default-run)"
               if args.no_default_run and default.exists() else "")
    lines += ["", f"Command: `{command(args)}`{earlier}; machine: {platform.processor() or platform.machine()}, "
              "2 CPU cores shared with other work, one job at a time, torch 1 thread; the "
              f"{len(shown)} runs in the tables took {runs_min:.0f} min of wall clock together (each run's own "
              "process, evaluation included; finished runs are skipped on re-runs, so one invocation may time only "
              "some).",
              "", "![curves](curves.png)"]
    write_results_md(args.out / "results.md", "\n".join(lines))
    if curve_rows:
        plot(curve_rows, args.out / "curves.png")


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 4), dpi=110)
    for a in (*RUNGS, *TRLS):
        rs = [r for r in rows if r["algo"] == a]
        if not rs:
            continue
        for ax, key, x in ((axes[0], "eval/greedy", "answers"), (axes[1], "eval/greedy", "time/elapsed_s"),
                           (axes[2], "train/entropy", "answers"), (axes[3], "rollout/length_mean", "answers")):
            pts = sorted((r[x], r[key]) for r in rs if not math.isnan(r.get(key, math.nan)))
            if not pts:
                continue
            xs = np.array([p[0] for p in pts])
            grid = np.unique(np.round(xs, -2 if x == "answers" else 0))
            ys = [np.mean([p[1] for p in pts if abs(p[0] - g) <= (64 if x == "answers" else 15)]) for g in grid]
            ax.plot(grid, ys, ".-" if key == "eval/greedy" else "-", label=NAMES[a], lw=1.2)
    for ax, t, xl in zip(axes, ("held-out greedy accuracy", "held-out accuracy vs wall clock", "token entropy",
                                "response length"), ("generated answers", "seconds", "generated answers",
                                                     "generated answers")):
        ax.set_title(t)
        ax.set_xlabel(xl)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
