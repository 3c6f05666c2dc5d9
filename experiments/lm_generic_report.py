"""The report of experiments/lm_generic_benchmark.py: generic.csv (merged with the committed rows) and generic.md
(generated part; hand-written notes below the marker survive)."""
from __future__ import annotations

import json
import os
import platform

import numpy as np

from experiments.lm_report import _ci, _ms, diff_ci
from experiments.notes import write_results_md
from experiments.result_rows import merge_rows, read_rows, write_rows

ORDER = ("lm-token-loss", "dapo-lm", "trl-grpo-dapo-loss")
NAMES = {"lm-token-loss": "dapo-lm without the group filter (lm-token-loss)", "dapo-lm": "dapo-lm",
         "trl-grpo-dapo-loss": "TRL GRPOTrainer, loss_type=dapo"}
PHASES = ("generation", "reward", "scoring")


def command(args) -> str:
    opts = f"--answers {args.answers} --seeds {args.seeds} --warm-steps {args.warm_steps}"
    if args.train_rows != 5000 or args.vocab != 96:
        opts += f" --train-rows {args.train_rows} --vocab {args.vocab}"
    return f"python -m experiments.lm_generic_benchmark {opts}"


def phase_shares(rows: list[dict]) -> str:
    """Mean seconds per phase over seeds, and each phase's share of the RL clock; the update is the rest."""
    clock = np.mean([r["rl_time_s"] for r in rows])
    parts = {p: np.mean([r[f"phase_{p}_s"] for r in rows]) for p in PHASES}
    parts["update"] = clock - sum(parts.values())
    return " | ".join(f"{parts[p]:.1f} s ({100 * parts[p] / clock:.0f}%)" for p in (*PHASES, "update"))


def report(args) -> None:
    local = [json.loads(f.read_text()) for f in sorted(args.runs_dir.glob("*.row.json"))]
    local = [r for r in local if "failed" not in r]
    csv_path = args.out / "generic.csv"
    rows = merge_rows(read_rows(csv_path), local, ("algo", "seed"))
    if not rows:
        print("no finished runs")
        return
    write_rows(csv_path, rows)
    by = {a: sorted((r for r in rows if r["algo"] == a), key=lambda r: r["seed"]) for a in ORDER}
    data_file, warm_file = args.data / "data.json", args.data / "warm_start.json"
    data = json.loads(data_file.read_text()) if data_file.exists() else {}
    warm = json.loads(warm_file.read_text()) if warm_file.exists() else {}
    lines = ["# The generic path end to end: a Llama-style model, a BPE tokenizer, a prompts file and a "
             "`module:function` reward, dapo-lm vs TRL", ""]
    if data and warm:
        lines += [f"Data (made locally, seed 0): the `add` problems as JSONL, {data['train_rows']} training rows "
                  f"(`prompt`, `answer`) and {data['heldout_rows']} held-out rows (--eval-prompts); a byte-level BPE "
                  "tokenizer trained with `tokenizers` on the training prompts and worked answers "
                  f"({data['vocab']} ids; a worked answer is {data['answer_tokens_mean']:.1f} tokens on average, "
                  f"{data['char_answer_mean']:.1f} characters); a fresh `LlamaConfig` model (4 layers, width 128, "
                  f"4 heads, tied embeddings, {warm['parameters'] / 1e6:.2f}M parameters). Warm start: "
                  f"{warm['steps']} supervised steps on worked answers (seed 0, in stages of 400), greedy held-out "
                  f"accuracy {warm['accuracy_greedy']:.3f}, sampled "
                  f"{warm['accuracy_sampled']:.3f}; saved with the tokenizer as the model directory both peers start "
                  "from. Reward: `experiments.lm_add_reward:reward` (+1 when the text after the last `>` equals the "
                  "row's `answer`, else -1) plus the soft overlong punishment (limit 48, buffer 8).", ""]
    lines += ["Held-out accuracy: greedy answers to the 200 held-out rows, correct by the reward (and not truncated), "
              "measured for both peers by the same code (`dapo_lm.rollout.heldout_accuracy`); sampled: the mean of 4 "
              "answers at temperature 1. Answers/s: generated answers over the RL clock (evaluation excluded). "
              "Spreads: sample std over seeds; differences: mean difference with a 95% bootstrap CI (* excludes 0).",
              "", "| peer | seeds | held-out greedy per seed | mean +- std | sampled | updates | answers/s per seed | "
              "answers/s | tokens/s | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for a in ORDER:
        rs = by[a]
        if not rs:
            continue
        acc = [r["heldout_accuracy"] for r in rs]
        aps = [r["answers_per_s"] for r in rs]
        lines.append(f"| {NAMES[a]} | {len(rs)} | {', '.join(f'{x:.3f}' for x in acc)} | {_ms(acc)} | "
                     f"{_ms([r['heldout_accuracy_sampled'] for r in rs])} | "
                     f"{np.mean([r['updates'] for r in rs]):.0f} | {', '.join(f'{x:.1f}' for x in aps)} | "
                     f"{np.mean(aps):.1f} | {np.mean([r['tokens_per_s'] for r in rs]):.0f} | "
                     f"{np.mean([r['peak_rss_mb'] for r in rs]):.0f} |")
    trl = by["trl-grpo-dapo-loss"]
    if trl:
        lines += [""]
        for a in ("lm-token-loss", "dapo-lm"):
            if not by[a]:
                continue
            ours = {r["seed"]: r for r in by[a]}
            pairs = [ours[r["seed"]]["answers_per_s"] / r["answers_per_s"] for r in trl if r["seed"] in ours]
            ratio = np.mean([r["answers_per_s"] for r in by[a]]) / np.mean([r["answers_per_s"] for r in trl])
            d = diff_ci([r["heldout_accuracy"] for r in by[a]], [r["heldout_accuracy"] for r in trl])
            lines.append(f"{NAMES[a]} vs TRL: answers/s ratio {ratio:.2f}x (of the means; per seed, the runs of one "
                         f"seed back to back: {', '.join(f'{x:.2f}x' for x in pairs)}); held-out accuracy "
                         f"difference {_ci(d)}.")
            lines.append("")
    lines += ["## Where the time goes", "",
              "Mean seconds per run (share of the RL clock), experiments/lm_phases.py: generation = sampling the "
              "answers; reward = the reward calls; scoring = the no-gradient pi_old pass; update = the rest of the "
              "clock (the loss's forward and backward passes, the optimiser, batching).", "",
              "| peer | RL clock s | generation | reward | scoring | update |", "|---|---|---|---|---|---|"]
    for a in ORDER:
        if by[a]:
            lines.append(f"| {NAMES[a]} | {np.mean([r['rl_time_s'] for r in by[a]]):.1f} | {phase_shares(by[a])} |")
    load = os.getloadavg()
    lines += ["", f"Command: `{command(args)}` (run with a Python that has trl 1.16); machine: {platform.machine()}, "
              f"{os.cpu_count()} CPU cores shared with other work (load average at report time "
              f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}), one run at a time, torch 1 thread; every run in its "
              "own process (evaluation and start-up included in its process wall, "
              f"{sum(r['process_wall_s'] for r in rows) / 60:.0f} min for the {len(rows)} runs)."]
    write_results_md(args.out / "generic.md", "\n".join(lines))
    print("\n".join(lines))
