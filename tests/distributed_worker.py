"""Launched by test_distributed.py under torchrun: train a few updates, save this rank's weights."""
import sys
from pathlib import Path

import torch

from core.training.logging import MetricLogger
from core.run.runner import NullLogger, resolve_for_env
from core.training.trainer import Trainer

out = Path(sys.argv[1])
cfg = resolve_for_env(dict(env=sys.argv[2], algo=sys.argv[3], total_steps=8 * 256, num_envs=4, num_steps=32,
                           num_minibatches=2, num_epochs=2, progress=False, tensorboard=False, eval_episodes=0,
                           run_dir=str(out)))
trainer = Trainer(cfg, out)
first_obs = trainer.rollouts.collector.raw_obs.copy()
logger = MetricLogger(out, tensorboard=False) if trainer.dist.is_main else NullLogger()
trainer.train(logger)
torch.save({"params": [p.detach() for p in list(trainer.actor.parameters()) + list(trainer.critic.parameters())],
            "first_obs": first_obs, "global_step": trainer.global_step, "returns": list(trainer.recent_returns)},
           out / f"rank{trainer.dist.rank}.pt")
trainer.dist.close()
# Leaving the group must free it: gloo threads that outlive close() run into interpreter shutdown, where one
# CI run aborted ("terminate called without an active exception", issue 46).  Linux names its threads in /proc.
tasks = Path("/proc/self/task")
if tasks.is_dir():
    gloo = [n for n in ((t / "comm").read_text().strip() for t in tasks.iterdir()) if "gloo" in n]
    if gloo:
        sys.exit(f"rank {trainer.dist.rank}: gloo threads alive after close(): {gloo}")
