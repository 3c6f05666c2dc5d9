"""Launched by test_lm_distributed.py, under torchrun or alone: ``dapo run`` of dapo-lm on the copy task of
test_lm_runs.py (argv[2:] are the CLI's arguments); every rank saves its final weights to argv[1]/rank<R>.pt."""
import sys
from pathlib import Path

import torch

import dapo_lm.runner
from core.run.cli import main
from dapo_lm import tasks
from test_lm_runs import Copy  # this script's folder is on sys.path

tasks.TASKS["add"] = Copy()
# float64 weights: AdamW's first step moves every weight by about +-lr, the sign of its gradient, so float32 rounding of
# a gradient that is exactly zero (GPT-2's attention key biases: softmax ignores them) would flip weights by 2 lr
# between two equal runs; in float64 that rounding is far below AdamW's eps and moves nothing
torch.set_default_dtype(torch.float64)
out = Path(sys.argv[1])
report = dapo_lm.runner._train_and_report


def keep_weights(cfg, run_dir, trainer, resume):
    try:
        return report(cfg, run_dir, trainer, resume)
    finally:
        torch.save({k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
                   out / f"rank{trainer.shards.rank}.pt")


dapo_lm.runner._train_and_report = keep_weights
sys.exit(main(sys.argv[2:]))
