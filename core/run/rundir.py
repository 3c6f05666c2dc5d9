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

import errno
import fcntl
import os
import platform
import time
from pathlib import Path
from typing import Optional

from core.config.legacy import translate
from core.config.errors import ConfigError, shown
from core.config.options import TrainConfig
from core.config.parsing import load_run_config as read_run_config, required_fields

# packages whose release can move a run's numbers (MuJoCo's physics, torch's kernels): summary.json records them
SOFTWARE = ("dapo-toolkit", "torch", "numpy", "gymnasium", "mujoco", "pettingzoo", "minari", "transformers")
RUN_FILES = ("config.yaml", "metrics.csv", "checkpoint.pt", "summary.json")
HOLDS_RUN = ("checkpoint.pt", "summary.json")  # without either, there is nothing to resume or report
LOCK_NAME = ".lock"
# what a start stopped before its first checkpoint may leave (besides .*.tmp files): a fresh start reuses them
LEFTOVERS = frozenset({*RUN_FILES, LOCK_NAME, "tb", "snapshots", "learning_curve.png"})


def software_versions() -> dict[str, str]:
    """Python's version and those of the :data:`SOFTWARE` packages installed here (summary.json's ``software``)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in SOFTWARE:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _first_existing(path: Path) -> Path:
    for p in (path, *path.parents):
        try:
            if p.exists():
                return p
        except OSError:  # a name too long to look up (check_name_lengths says so)
            continue
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


def check_name_lengths(path: Path) -> None:
    """One line for a path whose name, or one of its folders' names, is longer than the file system allows (it would
    fail with ENAMETOOLONG on the first file written)."""
    existing = _first_existing(Path(path).absolute())
    try:
        name_max, path_max = os.pathconf(existing, "PC_NAME_MAX"), os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    long = next((part for part in Path(path).parts if len(os.fsencode(part)) > name_max), None)
    if long is not None:
        raise ConfigError(f"--run-dir {shown(str(path))}: the name {shown(long)} is {len(os.fsencode(long))} bytes "
                          f"long; the file system allows {name_max}; choose a shorter name")
    if len(os.fsencode(str(Path(path).absolute()))) + 32 > path_max:  # 32: room for the files written inside
        raise ConfigError(f"--run-dir {shown(str(path))} is too long a path (the file system allows {path_max} "
                          "bytes); choose a shorter one")


def check_run_dir(path: Path, resume: bool) -> None:
    """One-line errors for a run directory that cannot be used; creates nothing."""
    path = Path(path)
    check_name_lengths(path)
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
    """An exclusive lock on a run directory, held until :meth:`release` or the process's end.  :meth:`acquire` takes
    the lock without changing an existing lock file; :meth:`claim` writes this process's pid into it once the start is
    accepted, so that a refused start (or resume) leaves the run's files, its lock included, as they were."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.fd = Path(run_dir), None
        self.created: list[Path] = []  # what acquire() created, deepest first: abandon() removes it

    def acquire(self) -> "RunLock":
        missing = [p for p in (self.run_dir, *self.run_dir.parents) if not p.exists()]
        lock_path = self.run_dir / LOCK_NAME
        made_lock = not lock_path.exists()
        self.created = ([lock_path] if made_lock else []) + missing
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            self.abandon()  # the folders made before the failure
            from core.training.checkpoint import DISK_FULL, DiskFull
            if e.errno in DISK_FULL:
                raise DiskFull(e.errno, f"no space left to create {self.run_dir}") from e
            raise ConfigError(f"cannot create {self.run_dir}: {e.strerror or e}; choose another --run-dir") from e
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
        self.fd = fd
        return self

    def claim(self) -> None:
        """Write this process's pid into the held lock file (what :func:`holder` reports to others).  Out of space:
        :class:`core.training.checkpoint.DiskFull`."""
        from core.training.checkpoint import DISK_FULL, DiskFull

        pid = str(os.getpid()).encode()
        try:  # the write first: on a full disk it fails with the old pid still in place
            os.pwrite(self.fd, pid, 0)
            os.ftruncate(self.fd, len(pid))
        except OSError as e:
            if e.errno in DISK_FULL:
                raise DiskFull(e.errno, f"no space left to write {self.run_dir / LOCK_NAME}") from e
            raise

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
            except FileNotFoundError:  # a failed acquire() had not made it yet
                continue
            except OSError:
                break
        self.created = []


def os_error_line(e: OSError) -> str:
    """One line for a failure of the operating system on a run's files (a name too long, a read-only or vanished
    directory, an I/O error): what failed on which file and what to do."""
    where = f" {shown(str(e.filename), 200)}" if e.filename else ""
    what = e.strerror or type(e).__name__
    if e.errno == errno.ENAMETOOLONG:
        return f"cannot write{where}: {what}; choose a shorter --run-dir"
    return f"cannot write{where}: {what}; the last checkpoint (if any) is intact: fix it, then continue with dapo run " \
           "--resume RUN_DIR"


# preset-filled fields (default None) that a resolved config may leave unset; config.yaml must record all others
MAY_BE_UNSET = ("policy_lr_drop_step", "clip_eps_low", "clip_eps_high", "run_dir", "snapshot_every")


def load_run_config(run_dir: Path, trust_env: bool = False) -> TrainConfig:
    """The resolved Gymnasium-family config in ``run_dir/config.yaml`` (older versions' options translated); an env
    that would import code named by the file is refused unless ``trust_env`` (core/config/trust.py)."""
    from core.envs.make import imports_code  # gymnasium: only when a run is read

    return read_run_config(run_dir, TrainConfig, translate, required_fields(TrainConfig, MAY_BE_UNSET), imports_code,
                           trust_env)
