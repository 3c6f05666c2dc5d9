"""Data-parallel dapo-lm under torchrun (dapo_lm/data_parallel.py): two CPU ranks (gloo) train the same weights as
one process on the same global batch, to float rounding, through a checkpoint and a resume; a rank count that does
not divide the batch's prompts is one line (rank 0's), exit 2 on every rank, nothing written."""
import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
WORKER = str(REPO / "tests" / "lm_distributed_worker.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
ENV = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(REPO)}
# dynamic sampling with the surplus carried, micro-batches, an evaluation mid-run: every path the ranks share
RUN = ["run", "--algo", "dapo-lm", "--task", "add", "--n-layer", "2", "--n-head", "2", "--n-embd", "32",
       "--warm-start-steps", "120", "--warm-start-batch", "16", "--prompts-per-batch", "8", "--group-size", "4",
       "--num-minibatches", "2", "--micro-batch-size", "5", "--carry-surplus", "--eval-problems", "8",
       "--eval-samples", "0", "--eval-every", "64", "--lr", "1e-3", "--no-progress", "--no-tensorboard",
       "--device", "cpu", "--torch-threads", "1"]


def _launch(cmd):
    proc = subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _rows(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def copy_task_in_float64(monkeypatch):
    """What the worker sets up, in this process: the copy task, float64 weights (the worker says why)."""
    from dapo_lm import tasks
    from tests.test_lm_runs import Copy

    monkeypatch.setitem(tasks.TASKS, "add", Copy())
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_two_ranks_train_the_one_process_weights_through_a_resume(tmp_path, copy_task_in_float64):
    """dapo-lm with dynamic sampling (groups filtered and refilled, the surplus carried), micro-batches and an
    evaluation mid-run: one process with the groups' own sampling streams (--group-streams, which torchrun's ranks
    take by default), then two ranks for half the budget and two again resumed to the whole.  The same answers are sampled and
    filtered (every metric but timings agrees, losses to float rounding) and the weights agree."""
    from core.run.cli import main
    from core.training.checkpoint import load_checkpoint

    assert main([*RUN, "--group-streams", "--total-steps", "192", "--run-dir", str(tmp_path / "run1")]) == 0
    (tmp_path / "half").mkdir(), (tmp_path / "two").mkdir()
    half = _launch([*TORCHRUN, WORKER, str(tmp_path / "half"), *RUN, "--total-steps", "96",
                    "--run-dir", str(tmp_path / "run2")])
    assert half.stdout.count("dapo-lm on add:") == 1  # rank 0 alone reports
    _launch([*TORCHRUN, WORKER, str(tmp_path / "two"), "run", "--resume", str(tmp_path / "run2"),
             "--total-steps", "192", "--no-progress", "--torch-threads", "1"])
    for part in ("half", "two"):
        r0, r1 = (torch.load(tmp_path / part / f"rank{r}.pt") for r in (0, 1))
        assert all(torch.equal(r0[k], r1[k]) for k in r0)  # the ranks hold one model
    one, two = load_checkpoint(tmp_path / "run1" / "checkpoint.pt")["model"], torch.load(tmp_path / "two" / "rank0.pt")
    before = torch.load(tmp_path / "half" / "rank0.pt")
    assert any(not torch.equal(before[k], two[k]) for k in two)  # the resumed half trained
    for k in one:
        torch.testing.assert_close(two[k], one[k], rtol=1e-6, atol=1e-7)
    rows1, rows2 = _rows(tmp_path / "run1"), _rows(tmp_path / "run2")
    assert len(rows1) == len(rows2)
    rl = [r for r in rows1 if int(r["global_step"]) > 0]
    assert len(rl) >= 4 and all(r["train/loss"] for r in rl) and any(float(r["sampler/surplus"]) for r in rl)
    for a, b in zip(rows1, rows2):
        assert a.keys() == b.keys()
        for key in a:
            if not key.startswith("time/") and a[key] != b[key]:  # losses: float32 log-probs (dapo_lm.model)
                assert math.isclose(float(a[key]), float(b[key]), rel_tol=1e-4, abs_tol=1e-6), (key, a[key], b[key])


def test_ranks_that_do_not_divide_the_prompts_are_one_line_and_exit_2_on_every_rank(tmp_path):
    run_dir = tmp_path / "never"
    procs = [subprocess.Popen([sys.executable, "-m", "core", "run", "--algo", "dapo-lm", "--prompts-per-batch", "3",
                               "--run-dir", str(run_dir), "--no-progress"], cwd=REPO, text=True,
                              env={**ENV, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [2, 2], outs
    (out0, err0), (out1, err1) = outs
    assert len(err0.strip().splitlines()) == 1 and "--prompts-per-batch 3" in err0 and "2 torchrun ranks" in err0
    assert out0 == out1 == err1 == ""  # rank 1 is silent
    assert not run_dir.exists()
