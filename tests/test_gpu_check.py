"""The GPU check (experiments/gpu_check.sh) rehearsed on the CPU, its arguments, and its wheel list."""
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.gpu_check import write_throughput

ROOT = Path(__file__).resolve().parents[1]


def _sh(script, *args, **env):
    return subprocess.run(["bash", f"experiments/{script}", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable, **env}, timeout=600)


@pytest.mark.parametrize("args,message", [
    ((), "name the results folder"), (("--bogus", "out"), "unknown option '--bogus'"),
    (("a", "b"), "one OUT_DIR only"), (("--budget-s", "ten", "out"), "--budget-s wants whole seconds")])
def test_gpu_check_rejects_bad_arguments_in_one_line(args, message):
    r = _sh("gpu_check.sh", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_gpu_check_without_wheels_says_how_to_get_them(tmp_path):
    empty = tmp_path / "repo"  # a checkout without .whl/ (this one may have it)
    (empty / "experiments").mkdir(parents=True)
    (empty / "experiments/gpu_check.sh").write_text((ROOT / "experiments/gpu_check.sh").read_text())
    r = subprocess.run(["bash", "experiments/gpu_check.sh", str(tmp_path / "out")], cwd=empty, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "no wheels in .whl/" in r.stderr and "gpu_wheels.sh" in r.stderr


@pytest.mark.parametrize("args,message", [(("--python", "x"), "--python wants a version"),
                                          (("--what",), "unknown argument '--what'")])
def test_gpu_wheels_rejects_bad_arguments(args, message):
    r = _sh("gpu_wheels.sh", *args)
    assert r.returncode == 2 and message in r.stderr


def test_wheel_list_is_pinned_and_leaves_out_what_the_image_has():
    specs = [line.split("#")[0].split() for line in (ROOT / "experiments/gpu_wheels.txt").read_text().splitlines()]
    specs = [s[0] for s in specs if s]
    assert specs and all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][A-Za-z0-9.]*", s) for s in specs), specs
    names = {s.split("==")[0].lower() for s in specs}
    image = {x.strip().lower() for x in (ROOT / "experiments/device_image/packages.txt").read_text().splitlines()
             if x.strip() and not x.startswith("#")}
    assert not names & image and "envpool" not in names and {"torch", "numpy", "h5py"} <= image
    assert {"gymnasium", "mujoco", "ale-py", "pettingzoo", "mpe2", "minari"} <= names
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "/.whl/" in ignored and "/.whl-cache/" in ignored


def test_throughput_table_puts_cuda_and_cpu_side_by_side(tmp_path):
    row = dict(part="mlp", name="ppo x1", num_envs=1, steps=10, wall_s=1.0, unit="env steps/s", rate_e2e=1.0)
    write_throughput([dict(row, device="cuda", precision="bf16", rate=300.0, peak_gpu_mib=12.5),
                      dict(row, device="cpu", precision="fp32", rate=100.0, peak_gpu_mib=""),
                      dict(row, name="dt", device="cpu", precision="fp32", rate=5.0, peak_gpu_mib="")], tmp_path)
    table = (tmp_path / "throughput.md").read_text().splitlines()
    assert table[2] == "| ppo x1 | env steps/s | 300.0 | 100.0 | 3.00 | 12.5 | bf16 / fp32 |"
    assert table[3] == "| dt | env steps/s | - | 5.0 | - | - | - / fp32 |"
    assert len(list(csv.DictReader(open(tmp_path / "throughput.csv")))) == 3


@pytest.mark.slow
def test_dry_run_of_the_whole_gpu_check(tmp_path):
    """The same script on the CPU with tiny budgets: wheels for this Python (downloaded once into
    .whl-cache/), installed with --target, every package the GPU image lacks hidden; every part passes."""
    out = tmp_path / "out"
    r = _sh("gpu_check.sh", "--dry-run", "--budget-s", "300", out)
    summary = (out / "summary.txt").read_text() if (out / "summary.txt").exists() else r.stdout + r.stderr
    assert r.returncode == 0, summary[-3000:]
    assert re.search(r"total: 10 wheels, [0-9.]+ MiB", r.stdout)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["e2e.txt", "log.txt", "summary.txt", "tests.txt", "throughput.csv", "throughput.md"]
    assert "envpool -" in summary and "gymnasium 1.4.0" in summary  # hidden vs carried
    assert re.search(r"\d+ passed", (out / "tests.txt").read_text()) and "failed" not in (out / "tests.txt").read_text()
    assert (out / "e2e.txt").read_text().count(": PASS") == 6  # mujoco, atari, dataset, dt, mpe, lm
    rows = list(csv.DictReader(open(out / "throughput.csv")))
    assert [r["part"] for r in rows] == ["mlp"] * 4 + ["atari", "dt"] + ["lm"] * 3
    assert all(float(r["rate"]) > 0 for r in rows)
    assert "throughput lm" in summary and "0 failed" in summary
