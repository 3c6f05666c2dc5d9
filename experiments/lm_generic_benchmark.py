"""The generic path end to end (issue #56 item 6): your own model, tokenizer, prompts file and reward, ``dapo-lm``
against TRL's ``GRPOTrainer`` (``loss_type="dapo"``) from the same weights, tokenizer, prompts, reward and settings.

1. Data, made locally (seed 0; nothing downloaded): the built-in ``add`` problems written out as JSONL
   (``prompt``, ``answer`` = the sum), a held-out file of the task's 200 held-out problems, a byte-level BPE
   tokenizer trained with ``tokenizers`` on the training prompts and worked answers (saved as a
   ``PreTrainedTokenizerFast`` directory), and a Llama-style architecture (``LlamaConfig``, 4 layers, width 128).
2. One warm start (supervised steps on worked answers through that tokenizer, seed 0, in stages of 400 steps),
   saved with the tokenizer as a model directory: a fresh model cannot answer anything, so neither peer could
   learn from RL alone.
3. Per seed, from that directory: ``dapo run --algo dapo-lm --model-dir DIR --prompts train.jsonl --eval-prompts
   heldout.jsonl --reward experiments.lm_add_reward:reward`` (and ``lm-token-loss``, dapo-lm without the group
   filter, the like-for-like rung: TRL has no dynamic sampling); then TRL (experiments/lm_trl.py) with the same
   reward function, the prompts in the same order and the same settings.  Every run is timed by phase
   (experiments/lm_phases.py): generation, reward, pi_old scoring, update.

Run it with a Python that has trl 1.16 (``pip install -e ".[lm-bench]"``): the children use the same interpreter.

    python -m experiments.lm_generic_benchmark --answers 3072 --seeds 3 --warm-steps 800
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from experiments.lm_benchmark import run_child, sampler_vs_generate, trl_child
from experiments.sweep import caller_path, parser, positive_int, script_main

REWARD = "experiments.lm_add_reward:reward"
MAX_NEW_TOKENS, OVERLONG_BUFFER = 48, 8  # longest worked answer: 37 BPE tokens with EOS (data.json) <= 48 - 8
LLAMA = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 4,
         "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 128,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_dropout": 0.0}
RUNGS = [("dapo-lm", "dapo-lm", None), ("lm-token-loss", "grpo-lm", "lm-token-loss")]
TRL = "trl-grpo-dapo-loss"


def make_data(out: Path, n_train: int, vocab: int) -> dict:
    """train.jsonl, heldout.jsonl, tokenizer/ (byte-level BPE) and llama.json in ``out``; their sizes."""
    import numpy as np
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from dapo_lm.tasks import TASKS

    task, rng = TASKS["add"], np.random.default_rng(0)
    rows, seen = [], set()
    while len(rows) < n_train:
        p = task.sample(rng)
        if p.prompt not in seen:
            seen.add(p.prompt)
            rows.append(p)
    heldout = task.heldout_set(200)

    def write(path, problems):
        a_b = lambda p: sum(int(x) for x in p.prompt[:-1].split("+"))  # noqa: E731
        path.write_text("".join(json.dumps({"prompt": p.prompt, "answer": str(a_b(p))}) + "\n" for p in problems))

    write(out / "train.jsonl", rows)
    write(out / "heldout.jsonl", heldout)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator([p.prompt + p.answer for p in rows], trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<pad>", "<eos>"], show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>", pad_token="<pad>")
    tok.save_pretrained(out / "tokenizer")
    (out / "llama.json").write_text(json.dumps({**LLAMA, "vocab_size": len(tok), "eos_token_id": tok.eos_token_id,
                                                "pad_token_id": tok.pad_token_id, "bos_token_id": None}, indent=1))
    answer_tokens = [len(tok(p.answer, add_special_tokens=False)["input_ids"]) + 1 for p in rows]
    prompt_tokens = [len(tok(p.prompt, add_special_tokens=False)["input_ids"]) for p in rows]
    return {"train_rows": len(rows), "heldout_rows": len(heldout), "vocab": len(tok),
            "answer_tokens_mean": float(np.mean(answer_tokens)), "answer_tokens_max": int(max(answer_tokens)),
            "prompt_tokens_max": int(max(prompt_tokens)),
            "char_answer_mean": float(np.mean([len(p.answer) + 1 for p in rows]))}


WARM_STAGE = 400  # supervised steps per warm-start stage (each a fresh AdamW with its warm-up, from the last weights)


def warm_start(data: Path, steps: int) -> dict:
    """Supervised steps on the task's worked answers through the BPE tokenizer, from a fresh Llama of llama.json
    (seed 0), in stages of :data:`WARM_STAGE` steps, each starting from the weights the last one saved; the result,
    with the tokenizer, is ``data/model``, the directory both peers start from.  A finished stage is kept, so a
    larger ``--warm-steps`` continues where a smaller one stopped."""
    meta = data / "warm_start.json"
    info = json.loads(meta.read_text()) if meta.exists() else {"steps": 0, "wall_time_s": 0.0, "stages": []}
    if info["steps"] >= steps:
        return info
    from transformers import AutoTokenizer

    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    while info["steps"] < steps:
        stage = min(WARM_STAGE, steps - info["steps"])
        start = {"model_dir": str(data / "model")} if info["steps"] else {
            "tokenizer_dir": str(data / "tokenizer"), "model_config": str(data / "llama.json")}
        cfg = resolve({"task": "add", "seed": 0, "warm_start_steps": stage, "device": "cpu", "eval_samples": 4,
                       "max_new_tokens": MAX_NEW_TOKENS, "run_dir": str(data / "warm_run"), **start})
        trainer = LMTrainer(cfg, data / "warm_run")
        t0 = time.perf_counter()
        while not trainer.warm_done:
            trainer.warm_iterate()
        trainer.model.save_pretrained(data / "model")
        AutoTokenizer.from_pretrained(str(data / "tokenizer"), local_files_only=True).save_pretrained(data / "model")
        info["steps"] += stage
        info["wall_time_s"] = round(info["wall_time_s"] + time.perf_counter() - t0, 1)
        info["parameters"] = sum(p.numel() for p in trainer.model.parameters())
        info.update({f"accuracy_{k}": v for k, v in trainer.warm_start_eval.items()})
        info["stages"].append({"steps": stage, **trainer.warm_start_eval})
        meta.write_text(json.dumps(info))
    return info


def throughput(data: Path, reps: int = 5) -> dict:
    """Tokens per second answering 128 training prompts at once from the warm start: this toolkit's sampler (as the
    rollout calls it) against ``model.generate`` (as TRL calls it), alternated."""
    import torch
    from transformers import AutoModelForCausalLM

    from dapo_lm.hf_tokenizer import load_tokenizer
    from dapo_lm.model import left_pad
    from dapo_lm.prompts import file_prompts

    torch.set_num_threads(1)
    tok = load_tokenizer(str(data / "model"), "--model-dir", False)
    rows = file_prompts(str(data / "train.jsonl"), "prompt", str(data / "heldout.jsonl"), 0.1, 0).train[:128]
    model = AutoModelForCausalLM.from_pretrained(str(data / "model"), local_files_only=True).eval()
    ids, mask = left_pad([tok.encode_prompt(p.prompt) for p in rows], tok.pad_id, "cpu")
    return sampler_vs_generate(model, ids, mask, MAX_NEW_TOKENS, tok.eos_id, tok.pad_id, reps)


def dapo_job(label: str, algo: str, recipe, seed: int, args) -> dict:
    run_dir = args.runs_dir / f"{label}__s{seed}"
    row_file = run_dir.with_suffix(".row.json")
    if row_file.exists():
        return json.loads(row_file.read_text())
    if run_dir.exists():  # an interrupted run: start it again (timings must come from one process)
        import shutil

        shutil.rmtree(run_dir)
    d = args.data
    cmd = ["experiments.lm_phases", str(run_dir.with_suffix(".phases.json")), "run", "--algo", algo,
           "--seed", str(seed), "--model-dir", str(d / "model"), "--prompts", str(d / "train.jsonl"),
           "--eval-prompts", str(d / "heldout.jsonl"), "--reward", REWARD, "--max-new-tokens", str(MAX_NEW_TOKENS),
           "--overlong-buffer", str(OVERLONG_BUFFER), "--total-steps", str(args.answers),
           "--no-progress", "--no-tensorboard", "--device", "cpu", "--run-dir", str(run_dir),
           *(["--recipe", recipe] if recipe else [])]
    code, wall, rss = run_child(cmd, run_dir.with_suffix(".log"))
    if code != 0:
        return {"algo": label, "seed": seed, "failed": code}
    s = json.loads((run_dir / "summary.json").read_text())
    phases = json.loads(run_dir.with_suffix(".phases.json").read_text())
    row = {"algo": label, "seed": seed, "answers_generated": s["answers_generated"], "updates": s["optimizer_steps"],
           "rl_time_s": s["rl_time_s"], "answers_per_s": s["answers_per_s"], "tokens_per_s": s["tokens_per_s"],
           "heldout_accuracy": s["heldout_accuracy"], "heldout_accuracy_sampled": s["heldout_accuracy_sampled"],
           "start_accuracy": s["warm_start_accuracy"], "peak_rss_mb": round(rss, 1),
           "process_wall_s": round(wall, 1), **{f"phase_{k}_s": round(v, 3) for k, v in phases.items()}}
    row_file.write_text(json.dumps(row))
    return row


def trl_job(seed: int, args) -> dict:
    d = args.data
    return trl_child(args.runs_dir / f"{TRL}__s{seed}", {
        "generic": True, "model_dir": str(d / "model"), "prompts": str(d / "train.jsonl"),
        "eval_prompts": str(d / "heldout.jsonl"), "reward": REWARD, "max_new_tokens": MAX_NEW_TOKENS,
        "overlong_buffer": OVERLONG_BUFFER, "answers": args.answers}, seed)


def main(argv=None, prog=None) -> int:
    p = parser(prog, __doc__)
    p.add_argument("--answers", type=positive_int, default=3072, help="generated RL answers per run")
    p.add_argument("--warm-steps", type=positive_int, default=800,
                   help=f"supervised steps of the shared warm start (in stages of {WARM_STAGE})")
    p.add_argument("--seeds", type=positive_int, default=3, help="seeds 1..N of every peer")
    p.add_argument("--train-rows", type=positive_int, default=5000, help="rows of the prompts file")
    p.add_argument("--vocab", type=positive_int, default=96, help="BPE vocabulary size (special tokens included)")
    p.add_argument("--peers", nargs="+", default=["dapo-lm", "lm-token-loss", TRL],
                   choices=["dapo-lm", "lm-token-loss", TRL], help="which runs each seed makes")
    p.add_argument("--runs-dir", type=caller_path, default=Path("runs/lm_generic"),
                   help="runs, and data/ (prompts files, tokenizer, warm-start model directory)")
    p.add_argument("--out", type=caller_path, default=Path("experiments/results/lm"),
                   help="where generic.md and generic.csv go")
    p.add_argument("--prepare-only", action="store_true", help="make the data and the warm start, then stop")
    p.add_argument("--report-only", action="store_true", help="rebuild the report from the finished runs")
    args = p.parse_args(argv)
    args.data = args.runs_dir / "data"
    args.data.mkdir(parents=True, exist_ok=True)  # the runs directory too
    if not args.report_only:
        info = args.data / "data.json"
        if not info.exists():
            info.write_text(json.dumps(make_data(args.data, args.train_rows, args.vocab)))
        print("data", info.read_text(), flush=True)
        print("warm start", warm_start(args.data, args.warm_steps), flush=True)
        tp = args.data / "throughput.json"
        if not tp.exists():
            tp.write_text(json.dumps(throughput(args.data), indent=1))
        if args.prepare_only:
            return 0
        for seed in range(1, args.seeds + 1):
            for label, algo, recipe in RUNGS:
                if label in args.peers:
                    print(dapo_job(label, algo, recipe, seed, args), flush=True)
            if TRL in args.peers:
                print(trl_job(seed, args), flush=True)
    from experiments.lm_generic_report import report

    report(args)
    return 0


if __name__ == "__main__":
    script_main(main)
