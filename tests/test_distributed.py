"""Data-parallel training with 2 CPU processes (gloo) under torchrun.  The worker also checks that leaving the
process group stopped its gloo threads (the cause of one CI abort, issue 46)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
# A rank that aborts (SIGABRT/SIGSEGV) then prints its Python stacks into the failure message.
ENV = {**os.environ, "PYTHONFAULTHANDLER": "1"}


@pytest.mark.parametrize("env,algo", [("CartPole-v1", "dapo"), ("Pendulum-v1", "ppo")])
def test_ranks_keep_identical_parameters_on_different_data(tmp_path, env, algo):
    proc = subprocess.run(TORCHRUN + [str(REPO / "tests" / "distributed_worker.py"), str(tmp_path), env, algo],
                          cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    assert not (r0["first_obs"] == r1["first_obs"]).all()          # each rank has its own env seeds
    assert r0["global_step"] == r1["global_step"] == 2048           # steps are counted over both ranks
    assert all(torch.equal(a, b) for a, b in zip(r0["params"], r1["params"]))
    assert r0["returns"] == r1["returns"]                           # episode stats are shared
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "metrics.csv").exists()


@pytest.mark.slow
def test_two_process_run_learns_cartpole(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(TORCHRUN + ["-m", "core", "run", "--env", "CartPole-v1", "--algo", "ppo",
                                      "--total-steps", "100000", "--run-dir", str(run_dir), "--no-progress",
                                      "--no-tensorboard", "--eval-episodes", "3"],
                          cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_return_mean"] >= 400, summary
