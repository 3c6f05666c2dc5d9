"""Resumable sweeps of ``dapo run`` subprocesses, shared by the benchmark scripts."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]


def run_cli(run_dir: Path, fresh: Sequence[str], resume_flags: Sequence[str] = ("--no-progress",)) -> str:
    """Run ``python -m core run *fresh --run-dir run_dir`` unless ``run_dir`` already has a summary;
    an interrupted run (checkpoint, no summary) is resumed instead.  Returns a one-line status."""
    if (run_dir / "summary.json").exists():
        return f"skip {run_dir}"
    if (run_dir / "checkpoint.pt").exists():
        cmd = [sys.executable, "-m", "core", "run", "--resume", str(run_dir), *resume_flags]
    else:
        cmd = [sys.executable, "-m", "core", "run", *fresh, "--run-dir", str(run_dir)]
    return run_command(cmd, run_dir)


def run_command(cmd: Sequence[str], run_dir: Path) -> str:
    t0 = time.time()
    proc = subprocess.run(list(cmd), cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"FAILED {run_dir}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
    return f"done {run_dir} in {time.time() - t0:.0f}s"
