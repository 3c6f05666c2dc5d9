"""The LM warm start's fingerprint: train it, print the loss of every chunk, a SHA-1 of the parameters and the
held-out accuracy, so two machines, thread counts or commits can be compared bit for bit.

Why it exists: the `add` warm start (seed 0, 400 supervised steps) gave 0.465 held-out accuracy in one session and
0.355 in the next with the same code; this script showed the code gives identical weights at both commits on one
host, and that 2 torch threads instead of 1 already end at 0.230 (experiments/results/lm/results.md, notes).

    python -m experiments.lm_warm_fingerprint --steps 400 --threads 1
    python -m experiments.lm_warm_fingerprint --steps 40 --task add --save warm.pt
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path


def parameter_hash(model) -> str:
    """SHA-1 (12 hex digits) of every parameter's bytes, in order."""
    return hashlib.sha1(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()[:12]


def main(argv=None, prog=None) -> int:
    from experiments.sweep import caller_path, parser, positive_int

    p = parser(prog, __doc__)
    p.add_argument("--task", default="add", help="built-in task [add]")
    p.add_argument("--steps", type=positive_int, default=400, help="supervised warm-start steps [400]")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads [1]")
    p.add_argument("--seed", type=int, default=0, help="the warm start's seed [0]")
    p.add_argument("--save", type=caller_path, help="write the final state_dict here (torch.save)")
    args = p.parse_args(argv)
    import torch

    from dapo_lm.config import resolve
    from dapo_lm.trainer import LMTrainer

    cfg = resolve({"task": args.task, "seed": args.seed, "warm_start_steps": args.steps, "device": "cpu",
                   "eval_samples": 4, "torch_threads": args.threads})
    trainer = LMTrainer(cfg, Path(tempfile.mkdtemp()))
    print(f"initial parameters {parameter_hash(trainer.model)}", flush=True)
    while not trainer.warm_done:
        m = trainer.warm_iterate()
        print(f"step {m['warm/step']} loss {m['warm/loss']:.6f}", flush=True)
    print(f"final parameters {parameter_hash(trainer.model)}; held-out {trainer.warm_start_eval}", flush=True)
    if args.save is not None:
        torch.save(trainer.model.state_dict(), args.save)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.sweep import script_main
    script_main(main)
