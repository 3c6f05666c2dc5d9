"""Resumable sweeps of ``dapo run`` subprocesses, shared by the benchmark scripts."""
from __future__ import annotations

import os
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


def run_jobs(jobs: Sequence, run, workers: int, runs_dir: Path) -> list[str]:
    """``run(*job)`` for every job, ``workers`` at a time (threads: each run is its own process), printing each
    one-line status as it arrives; returns the statuses."""
    from concurrent.futures import ThreadPoolExecutor

    print(f"{len(jobs)} runs, {workers} at a time, into {runs_dir}", flush=True)
    statuses = []
    with ThreadPoolExecutor(workers) as pool:
        for msg in pool.map(lambda job: run(*job), jobs):
            print(msg, flush=True)
            statuses.append(msg)
    return statuses


# --- command-line plumbing shared by the benchmark scripts -------------------------------------------------------
def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (one-line error otherwise)."""
    import argparse

    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seed_int(text: str) -> int:
    """argparse type: a seed in 0 .. 2**32-1."""
    import argparse

    value = int(text)
    if not 0 <= value <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"must be in 0 .. 2**32-1, got {value}")
    return value


def caller_path(text: str) -> Path:
    """argparse type: a path relative to the caller's directory (the runs themselves start in the repository)."""
    return Path(text).expanduser().resolve()


def parser(prog, description: str):
    """A benchmark script's parser: usage errors are one line and exit 2."""
    import argparse

    from core.config.flags import OneLineParser

    return OneLineParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)


def failures(statuses: Sequence[str]) -> int:
    """Exit code of a sweep: 1 (with one line naming how many and the first) when any run failed, else 0."""
    failed = [s for s in statuses if s.startswith("FAILED")]
    if failed:
        print(f"error: {len(failed)} of {len(statuses)} runs failed; first: {failed[0]}", file=sys.stderr)
    return 1 if failed else 0


PROG_VARIABLE = "DAPO_BENCH_PROG"  # set by 'dapo bench NAME' (core/run/bench.py): the name --help and errors use


def script_main(main) -> None:
    """``if __name__ == "__main__"`` of a benchmark script: one line and exit 2 for a bad input it finds late, exit
    130 on Ctrl-C (the last checkpoint stays); named as ``dapo bench`` names it when it started the script."""
    from core.config.errors import ConfigError

    sys.path.insert(0, str(ROOT))
    prog = os.environ.get(PROG_VARIABLE)
    try:
        sys.exit(main(prog=prog) or 0)
    except ConfigError as e:
        print(f"{prog or Path(sys.argv[0]).name}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; the last checkpoint (if any) is intact", file=sys.stderr)
        sys.exit(130)
