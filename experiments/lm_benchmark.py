"""Sequence-generation benchmark (issue #48): DAPO's ablation ladder, TRL's GRPOTrainer beside it, throughput.

1. One warm start per task (supervised, seed 0), saved as a transformers model directory; every RL run starts
   from those weights (``--model-dir``), so seeds vary the RL sampling and prompts, not the warm start.
2. The ladder, each rung a recipe: grpo-lm, +overlong filtering (lm-overlong-filter), +clip-higher
   (lm-clip-higher), +soft penalty (lm-soft-penalty), +token-level loss (lm-token-loss), +dynamic sampling
   (dapo-lm); every run generates the same number of answers (filtered ones included).
3. TRL's GRPOTrainer with its DAPO settings (experiments/lm_trl.py) from the same weights and prompts.
4. The default ``dapo run --algo dapo-lm`` end to end (warm start included), timed.
5. Generation throughput: this toolkit's sampler against ``model.generate`` on the same batch.

Jobs run one at a time (``--jobs`` is 1 by design: timings are the point), seed-major, so a budget cut short
still has whole seeds; finished runs are skipped on re-runs.  Outputs in ``--out``: results.csv, curves.csv,
throughput.json, results.md, accuracy.png.

    python -m experiments.lm_benchmark --answers 3840 --seeds 5 --trl-seeds 5
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from experiments.sweep import ROOT, caller_path, parser, positive_int, script_main

LADDER = [("grpo-lm", "grpo-lm", None), ("lm-overlong-filter", "grpo-lm", "lm-overlong-filter"),
          ("lm-clip-higher", "grpo-lm", "lm-clip-higher"), ("lm-soft-penalty", "grpo-lm", "lm-soft-penalty"),
          ("lm-token-loss", "grpo-lm", "lm-token-loss"), ("dapo-lm", "dapo-lm", None)]
TRL = "trl-grpo-dapo-loss"


def run_child(module_args: list[str], log: Path) -> tuple[int, float, float]:
    """Run ``python -m MODULE ARGS`` in the repository; (exit code, wall seconds, the child's own peak RSS in MB).

    The peak is the child's VmHWM, written by :func:`peak_wrapper` as it exits: the kernel's ``ru_maxrss`` of a
    child would include this (larger) parent's size at the fork."""
    peak = log.with_suffix(".peak")
    t0 = time.perf_counter()
    with open(log, "w") as f:
        code = subprocess.call([sys.executable, "-m", "experiments.lm_benchmark", "--peak-to", str(peak), *module_args],
                               cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    return code, wall, float(peak.read_text()) / 1024 if peak.exists() else float("nan")


def peak_wrapper(argv: list[str]) -> None:
    """``--peak-to FILE MODULE ARGS...``: run the module as __main__, then write this process's VmHWM (kB)."""
    import runpy

    path, module = argv[0], argv[1]
    sys.argv = [module, *argv[2:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        hwm = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))
        Path(path).write_text(hwm)


def warm_start(task: str, steps: int, out: Path) -> dict:
    """The shared warm start of ``task`` (seed 0) as a model directory, with its held-out accuracy."""
    meta = out / "warm_start.json"
    if meta.exists():
        return json.loads(meta.read_text())
    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    cfg = resolve({"task": task, "seed": 0, "warm_start_steps": steps, "device": "cpu", "eval_samples": 4})
    trainer = LMTrainer(cfg, out)
    t0 = time.perf_counter()
    while not trainer.warm_done:
        trainer.warm_iterate()
    trainer.model.save_pretrained(out / "model")
    info = {"task": task, "steps": steps, "wall_time_s": round(time.perf_counter() - t0, 1),
            **{f"accuracy_{k}": v for k, v in trainer.warm_start_eval.items()}}
    meta.write_text(json.dumps(info))
    return info


def rl_job(label: str, algo: str, recipe, task: str, seed: int, args, model_dir: Path) -> dict:
    run_dir = args.runs_dir / task / f"{label}__s{seed}"
    row_file = run_dir.with_suffix(".row.json")
    if row_file.exists():
        return json.loads(row_file.read_text())
    if run_dir.exists():  # an interrupted run: start it again (timings must come from one process)
        import shutil

        shutil.rmtree(run_dir)
    cmd = ["core", "run", "--algo", algo, "--task", task, "--seed", str(seed),
           "--model-dir", str(model_dir), "--warm-start-steps", "0", "--total-steps", str(args.answers),
           "--eval-every", str(args.answers // 2), "--no-progress", "--no-tensorboard", "--device", "cpu",
           "--run-dir", str(run_dir), *(["--recipe", recipe] if recipe else [])]
    code, wall, rss = run_child(cmd, run_dir.with_suffix(".log"))
    if code != 0:
        return {"algo": label, "seed": seed, "failed": code}
    s = json.loads((run_dir / "summary.json").read_text())
    row = {"algo": label, "task": task, "seed": seed, "answers_generated": s["answers_generated"],
           "updates": s["optimizer_steps"], "wall_time_s": s["wall_time_s"], "rl_time_s": s["rl_time_s"],
           "answers_per_s": s["answers_per_s"], "tokens_per_s": s["tokens_per_s"], "heldout_accuracy": s["heldout_accuracy"],
           "heldout_accuracy_sampled": s["heldout_accuracy_sampled"], "warm_start_accuracy": s["warm_start_accuracy"],
           "peak_rss_mb": round(rss, 1), "health_events": sum(s["health_events"].values()),
           "process_wall_s": round(wall, 1)}
    row_file.write_text(json.dumps(row))
    return row


def trl_job(task: str, seed: int, args, model_dir: Path) -> dict:
    return trl_child(args.runs_dir / task / f"{TRL}__s{seed}", {"model_dir": str(model_dir), "task": task,
                                                              "answers": args.answers}, seed)


def trl_child(out: Path, spec: dict, seed: int) -> dict:
    """experiments.lm_trl in a process of its own on ``spec`` (plus the seed, ``out`` and the row file beside it);
    the row it writes, completed with the process's peak RSS and wall clock.  A finished run's row is read back."""
    row_file = out.with_suffix(".row.json")
    if row_file.exists():
        return json.loads(row_file.read_text())
    out.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "seed": seed, "out_dir": str(out), "row": str(row_file)}
    code, wall, rss = run_child(["experiments.lm_trl", json.dumps(spec)], out.with_suffix(".log"))
    if code != 0 or not row_file.exists():
        return {"algo": TRL, "seed": seed, "failed": code}
    row = json.loads(row_file.read_text())
    row.update(peak_rss_mb=round(rss, 1), process_wall_s=round(wall, 1))
    row_file.write_text(json.dumps(row))
    return row


def default_job(args) -> dict:
    """``dapo run --algo dapo-lm`` with every default (warm start included), as a user would run it."""
    run_dir = args.runs_dir / "default"
    if not (run_dir / "summary.json").exists():
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)
        code, wall, rss = run_child(["core", "run", "--algo", "dapo-lm", "--no-progress",
                                     "--no-tensorboard", "--run-dir", str(run_dir)], run_dir.with_suffix(".log"))
        if code != 0:
            return {"failed": code}
        (run_dir / "process.json").write_text(json.dumps({"process_wall_s": wall, "peak_rss_mb": rss}))
    s = json.loads((run_dir / "summary.json").read_text())
    return {**{k: s[k] for k in ("task", "answers_generated", "wall_time_s", "warm_start_accuracy", "heldout_accuracy",
                                 "warm_start_accuracy_sampled", "heldout_accuracy_sampled", "health_events")},
            **json.loads((run_dir / "process.json").read_text())}


def throughput(model_dir: Path, task: str, reps: int = 5) -> dict:
    """Answers of 128 sampled at once, ours vs ``model.generate`` (same prompts, limit, temperature), alternated."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from dapo_lm.model import left_pad
    from dapo_lm.tasks import TASKS
    from dapo_lm.tokenizer import CharTokenizer

    torch.set_num_threads(1)
    tok, t = CharTokenizer(), TASKS[task]
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True).eval()
    rng = np.random.default_rng(0)
    ids, mask = left_pad([tok.encode(t.sample(rng).prompt, bos=True) for _ in range(128)], tok.pad_id, "cpu")
    return sampler_vs_generate(model, ids, mask, t.max_new_tokens, tok.eos_id, tok.pad_id, reps)


def sampler_vs_generate(model, ids, mask, limit: int, eos_id: int, pad_id: int, reps: int = 5) -> dict:
    """Tokens per second sampling answers to the left-padded prompts ``ids (N, Lp)``: this toolkit's sampler and
    ``model.generate`` (same limit, temperature 1), alternated ``reps`` times."""
    import numpy as np
    import torch

    from dapo_lm.model import sample

    ours, raw = [], []
    for r in range(reps):
        torch.manual_seed(r)
        t0 = time.perf_counter()
        out = sample(model, ids, mask, limit, eos_id, pad_id)
        ours.append(float(out.lengths.sum()) / (time.perf_counter() - t0))
        torch.manual_seed(r)
        t0 = time.perf_counter()
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=mask, max_new_tokens=limit, do_sample=True, top_k=0,
                                 temperature=1.0, pad_token_id=pad_id, eos_token_id=eos_id)
        new = gen[:, ids.shape[1]:]
        ended = (new == eos_id).cumsum(1)
        lengths = ((ended == 0) | ((ended == 1) & (new == eos_id))).sum()  # tokens up to and with EOS
        raw.append(float(lengths) / (time.perf_counter() - t0))
    return {"batch": len(ids), "reps": reps, "ours_tokens_per_s": ours, "generate_tokens_per_s": raw,
            "ratio_median": float(np.median(np.array(ours) / np.array(raw)))}


def main(argv=None, prog=None) -> int:
    p = parser(prog, __doc__)
    p.add_argument("--task", default="add", choices=("add", "mul", "countdown"))
    p.add_argument("--answers", type=positive_int, default=3840, help="generated RL answers per run")
    p.add_argument("--warm-steps", type=positive_int, default=400, help="supervised steps of the shared warm start")
    p.add_argument("--seeds", type=positive_int, default=5, help="RL seeds 1..N of every ladder rung")
    p.add_argument("--trl-seeds", type=int, default=5, help="seeds 1..N of the TRL peer (0: none)")
    p.add_argument("--rungs", nargs="+", default=[label for label, _, _ in LADDER],
                   choices=[label for label, _, _ in LADDER], help="which ladder rungs to run (default: all)")
    p.add_argument("--no-default-run", action="store_true", help="skip timing the default dapo run")
    p.add_argument("--runs-dir", type=caller_path, default=Path("runs/lm_benchmark"))
    p.add_argument("--out", type=caller_path, default=Path("experiments/results/lm"))
    p.add_argument("--report-only", action="store_true", help="rebuild the report from the finished runs")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    wdir = args.runs_dir / args.task / "warm_start"
    wdir.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        warm = warm_start(args.task, args.warm_steps, wdir)
        print("warm start", warm, flush=True)
        tp = args.out / "throughput.json"
        if not tp.exists():
            tp.write_text(json.dumps(throughput(wdir / "model", args.task), indent=1))
        if not args.no_default_run:
            print("default run", default_job(args), flush=True)
        for seed in range(1, args.seeds + 1):
            for label, algo, recipe in (rung for rung in LADDER if rung[0] in args.rungs):
                print(rl_job(label, algo, recipe, args.task, seed, args, wdir / "model"), flush=True)
            if seed <= args.trl_seeds:
                print(trl_job(args.task, seed, args, wdir / "model"), flush=True)
        positions = args.out / "trl_positions.json"
        if args.trl_seeds and not positions.exists():  # the peer's position check needs trl
            from experiments.lm_trl import position_mismatch

            positions.write_text(json.dumps(position_mismatch(str(wdir / "model"), args.task), indent=1))
    from experiments.lm_report import report

    report(args)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--peak-to"]:
        peak_wrapper(sys.argv[2:])
    else:
        script_main(main)
