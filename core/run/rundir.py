"""The run directory: checked before anything is written, then held by one writer for the whole run.

:func:`check_run_dir` refuses, with one line and before any file is touched, a path that is a file, lies under a
file, cannot be written, is being written by another process, already holds a run (without ``--resume``) or holds
none (with it), or holds files that are not a run's.  A directory holds a run once it has a checkpoint or a summary; a
start stopped before its first checkpoint leaves only config.yaml and the lock, and a fresh start may reuse it.
:class:`RunLock` then creates the directory and takes an exclusive ``flock`` on ``run_dir/.lock`` that the process
keeps until it exits; the operating system releases it when the process dies, so the lock of a killed run never
blocks its resume.  :func:`load_run_config` reads the Gymnasium family's config.yaml back.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Optional

from core.config.legacy import translate
from core.config.options import ConfigError, TrainConfig
from core.config.parsing import load_run_config as read_run_config, required_fields
from core.envs.make import imports_code

RUN_FILES = ("config.yaml", "metrics.csv", "checkpoint.pt", "summary.json")
HOLDS_RUN = ("checkpoint.pt", "summary.json")  # without either, there is nothing to resume or report
LOCK_NAME = ".lock"
# what a start stopped before its first checkpoint may leave (besides .*.tmp files): a fresh start reuses them
LEFTOVERS = frozenset({*RUN_FILES, LOCK_NAME, "tb", "snapshots", "learning_curve.png"})


def _first_existing(path: Path) -> Path:
    for p in (path, *path.parents):
        if p.exists():
            return p
    return Path("/")


def holds_run(path: Path) -> bool:
    return any((Path(path) / name).exists() for name in HOLDS_RUN)


def holder(path: Path) -> Optional[str]:
    """The pid written by the process that holds ``path``'s lock (``"?"`` if unreadable), or None when no process
    does.  Probes the lock for an instant; creates nothing."""
    try:
        fd = os.open(Path(path) / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 64).decode(errors="replace").strip() or "?"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _busy(path: Path, pid: str) -> ConfigError:
    return ConfigError(f"{path} is being written by another process (pid {pid}); wait for it to finish or choose "
                       "another --run-dir")


def check_contents(path: Path) -> None:
    """For a fresh start: refuse a directory that holds a run, or files that are not a run's."""
    if not path.is_dir():
        return
    if holds_run(path):
        raise ConfigError(f"{path} already holds a run; continue it with --resume {path} or choose another --run-dir")
    others = sorted(p.name for p in path.iterdir() if p.name not in LEFTOVERS
                    and not (p.name.startswith(".") and p.name.endswith(".tmp")))
    if others:
        raise ConfigError(f"--run-dir {path} holds other files ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
                          "); choose an empty or new directory")


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
    pid = holder(path) if path.is_dir() else None
    if pid is not None:  # before the checks below: a live run's files say nothing about what to do next
        raise _busy(path, pid)
    if resume:
        if not (path / "checkpoint.pt").is_file():
            raise ConfigError(f"{path} has no checkpoint to resume; start it without --resume")
    else:
        check_contents(path)


class RunLock:
    """An exclusive lock on a run directory, held until :meth:`release` or the process's end."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.fd = Path(run_dir), None
        self.created: list[Path] = []  # what acquire() created, deepest first: abandon() removes it

    def acquire(self) -> "RunLock":
        missing = [p for p in (self.run_dir, *self.run_dir.parents) if not p.exists()]
        lock_path = self.run_dir / LOCK_NAME
        made_lock = not lock_path.exists()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError(f"cannot create {self.run_dir}: {e.strerror or e}; choose another --run-dir") from e
        self.created = ([lock_path] if made_lock else []) + missing
        for attempt in range(10):  # another process's holder() probe holds the lock for an instant
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 9:
                    holder_pid = os.read(fd, 64).decode(errors="replace").strip() or "?"
                    os.close(fd)
                    self.created = []
                    raise _busy(self.run_dir, holder_pid) from None
                time.sleep(0.02)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def abandon(self) -> None:
        """Release, and remove the lock file and directories that :meth:`acquire` created (a start that failed
        before writing anything leaves the place as it found it)."""
        self.release()
        for p in self.created:
            try:
                p.unlink() if p.name == LOCK_NAME else p.rmdir()  # rmdir: only if still empty
            except OSError:
                break
        self.created = []


# preset-filled fields (default None) that a resolved config may leave unset; config.yaml must record all others
MAY_BE_UNSET = ("policy_lr_drop_step", "clip_eps_low", "clip_eps_high", "run_dir", "snapshot_every")


def load_run_config(run_dir: Path, trust_env: bool = False) -> TrainConfig:
    """The resolved Gymnasium-family config in ``run_dir/config.yaml`` (older versions' options translated); an env
    that would import code named by the file is refused unless ``trust_env`` (core/config/trust.py)."""
    return read_run_config(run_dir, TrainConfig, translate, required_fields(TrainConfig, MAY_BE_UNSET), imports_code,
                           trust_env)
