"""``dapo bench NAME ...``: run a benchmark script of experiments/ in a source checkout.

experiments/ is not installed (it is the repository's benchmark code, not a library), and ``core`` imports nothing
above it: the script file runs in a child process (``python experiments/SCRIPT.py``), with the checkout that holds
this ``core`` first on its ``PYTHONPATH`` (so its own imports of ``experiments`` resolve) and the caller's working
directory kept (relative paths in its flags mean what they say). An installed ``core`` without a checkout says so in
one line (exit 2).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence

BENCHMARKS = {  # dapo bench NAME -> the script it runs (the same flags, the same outputs)
    "mujoco": "mujoco_benchmark",
    "throughput": "bench_throughput",
    "dt": "dt_benchmark",
    "ma": "ma_benchmark",
    "dt-predictability": "dt_return_predictability",
    "sparse": "sparse_benchmark",
    "lm": "lm_benchmark",
}
USAGE = "usage: dapo bench {" + ",".join(BENCHMARKS) + "} [its own options]"
PROG_VARIABLE = "DAPO_BENCH_PROG"  # the script's --help and errors say 'dapo bench NAME' (experiments/sweep.py)


def checkout_root() -> Optional[Path]:
    """The source checkout this ``core`` lives in (the folder holding core/ and experiments/), or None."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "experiments" / "__init__.py").is_file() else None


def _has_fd(stream) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return False


def bench(argv: Sequence[str]) -> int:
    """Hand ``argv[1:]`` to the script's own parser (so ``--help`` shows its flags); its exit code."""
    argv = list(argv)
    if not argv:
        print(f"dapo bench: error: name a benchmark; {USAGE} (its options: dapo bench NAME --help)", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(USAGE + "\n\nRun a benchmark script of experiments/ (resumable; tables, CSV and plots under "
              "experiments/results/). Its options: dapo bench NAME --help")
        return 0
    if argv[0] not in BENCHMARKS:
        print(f"dapo bench: error: unknown benchmark '{argv[0]}'; choose one of: {', '.join(BENCHMARKS)}",
              file=sys.stderr)
        return 2
    root = checkout_root()
    script = BENCHMARKS[argv[0]]
    if root is None or not (root / "experiments" / f"{script}.py").is_file():
        print(f"dapo bench: error: the benchmark scripts live in a source checkout (experiments/{script}.py), and "
              f"this dapo is installed from {Path(__file__).resolve().parents[2]} without one: clone the repository "
              "and run dapo bench there", file=sys.stderr)
        return 2
    env = {**os.environ, PROG_VARIABLE: f"dapo bench {argv[0]}",
           "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    cmd = [sys.executable, str(root / "experiments" / f"{script}.py"), *argv[1:]]  # a script file, not an import
    sys.stdout.flush()
    sys.stderr.flush()
    captured = not (_has_fd(sys.stdout) and _has_fd(sys.stderr))  # pytest's capsys: pass the text on
    # Ctrl-C reaches the script too (the terminal signals the whole foreground process group): it checkpoints and
    # exits, and this process waits for it (a no-op handler, not SIG_IGN, which the child would inherit)
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None) if _main_thread() else None
    try:
        proc = subprocess.run(cmd, env=env, capture_output=captured, text=True)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if captured:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
    return proc.returncode


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
