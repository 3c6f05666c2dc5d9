"""The run directory: checked before anything is written, then held by one writer for the whole run.

:func:`check_run_dir` refuses, with one line and before any file is touched, a path that is a file, lies under a
file, cannot be written, already holds a run (without ``--resume``) or holds none (with it).  :func:`acquire` then
creates the directory and takes an exclusive ``flock`` on ``run_dir/.lock`` that the process keeps until it exits;
the operating system releases it when the process dies, so the lock of a killed run never blocks its resume.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from core.config import ConfigError

RUN_FILES = ("config.yaml", "metrics.csv", "checkpoint.pt", "summary.json")
LOCK_NAME = ".lock"


def _first_existing(path: Path) -> Path:
    for p in (path, *path.parents):
        if p.exists():
            return p
    return Path("/")


def check_run_dir(path: Path, resume: bool) -> None:
    """One-line errors for a run directory that cannot be used; creates nothing."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--run-dir {path} is a file; choose a directory")
    existing = _first_existing(path)
    if not existing.is_dir():
        raise ConfigError(f"--run-dir {path} lies under the file {existing}; choose another directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write {path}: {existing} is not writable; choose another --run-dir")
    if resume:
        if not (path / "checkpoint.pt").is_file():
            raise ConfigError(f"{path} has no checkpoint to resume; start it without --resume")
    elif path.is_dir() and any((path / name).exists() for name in RUN_FILES):
        raise ConfigError(f"{path} already holds a run; continue it with --resume {path} or choose another --run-dir")


class RunLock:
    """An exclusive lock on a run directory, held until :meth:`release` or the process's end."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.fd = Path(run_dir), None

    def acquire(self) -> "RunLock":
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError(f"cannot create {self.run_dir}: {e.strerror or e}; choose another --run-dir") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError(f"{self.run_dir} is being written by another process (pid {holder}); wait for it to "
                              "finish or choose another --run-dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
