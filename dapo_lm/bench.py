"""Throughput of the sequence-generation trainer for the GPU check (experiments/gpu_check.py runs the same rows on
cuda and on cpu, side by side on one machine)."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Iterator


def gpu_check_rows(device: str, tiny: bool) -> Iterator[dict]:
    """Rows ``name, steps, wall_s, rate, unit, precision``: DAPO-LM RL iterations on the default model and task
    (generation, rewards, group filter and update; the first iteration, which pays for CUDA start-up, is not timed),
    then generation alone (``steps`` = answers, ``rate`` = generated tokens per second)."""
    import numpy as np
    import torch

    from dapo_lm.config import resolve
    from dapo_lm.model import autocast, left_pad, sample, uses_bf16
    from dapo_lm.trainer import LMTrainer

    size = {"n_layer": 1, "n_head": 2, "n_embd": 32, "prompts_per_batch": 2, "group_size": 4} if tiny else {}
    timed = 1 if tiny else 4
    with tempfile.TemporaryDirectory() as d:
        cfg = resolve({"algo": "dapo-lm", "device": device, "warm_start_steps": 0, "eval_problems": 4,
                       "eval_samples": 1, "progress": False, "tensorboard": False, "run_dir": d, **size})
        trainer = LMTrainer(cfg, Path(d))
        trainer.iterate()  # no warm start: the held-out evaluation that marks it done
        trainer.iterate()  # the first RL iteration (CUDA kernels, allocator), untimed
        sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
        answers, tokens = trainer.global_step, trainer.tokens_generated
        sync()
        t0 = time.perf_counter()
        for _ in range(timed):
            trainer.iterate()
        sync()
        wall = time.perf_counter() - t0
        precision = "bf16" if uses_bf16(trainer.device) else "fp32"
        done = trainer.global_step - answers
        yield {"name": "lm dapo-lm iteration", "steps": done, "wall_s": round(wall, 2),
               "rate": round(done / wall, 1), "unit": "answers/s", "precision": precision}
        yield {"name": "lm dapo-lm tokens", "steps": trainer.tokens_generated - tokens, "wall_s": round(wall, 2),
               "rate": round((trainer.tokens_generated - tokens) / wall, 1), "unit": "tokens/s",
               "precision": precision}

        n = 8 if tiny else 128
        rng = np.random.default_rng(0)
        ids, mask = left_pad([trainer.tok.encode_prompt(p.prompt) for p in trainer.source.draw(rng, n)],
                             trainer.tok.pad_id, trainer.device)
        model = trainer.model.eval()
        with torch.no_grad(), autocast(trainer.device):
            sync()
            t0 = time.perf_counter()
            out = sample(model, ids, mask, cfg.max_new_tokens, trainer.tok.eos_id, trainer.tok.pad_id)
            sync()
        wall = time.perf_counter() - t0
        made = int(out.lengths.sum())
        yield {"name": "lm generation (KV cache)", "steps": n, "wall_s": round(wall, 2), "rate": round(made / wall, 1),
               "unit": "tokens/s", "precision": precision}
