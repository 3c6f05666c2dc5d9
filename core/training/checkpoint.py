"""Checkpoints that carry no code: tensors and plain data only, written atomically.

:func:`save_checkpoint` encodes the state (:func:`encode`: NumPy arrays as bytes with a numeric dtype, named tuples
as their fields) and ``torch.save``s it; :func:`load_checkpoint` reads it with ``torch.load(weights_only=True)``,
whose unpickler builds nothing but tensors and Python's plain types, and decodes it.  A file with anything else is
refused with one line.  Checkpoints of the first format (version 1: NumPy arrays pickled as such, the toolkit's
named tuples, envs pickled whole) load through an allow-list of NumPy's array constructors and those named tuples
only; their pickled envs are never unpickled (the resumed run restarts its episodes, with a warning).
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import keyword
import math
import os
import signal
import tempfile
import threading
import warnings
from collections import deque, namedtuple
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from core.config.options import ConfigError

CHECKPOINT_VERSION = 2
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NUMERIC_KINDS = "biufc"  # bool, int, uint, float, complex: never object arrays


class DiskFull(OSError):
    """Writing a run file failed for lack of space; the previous version of the file is intact."""


@contextlib.contextmanager
def sigint_deferred():
    """Hold Ctrl-C until the block ends (then raise KeyboardInterrupt), so that a checkpoint being written is never
    abandoned half-way by a second Ctrl-C.  Only the main thread can set signal handlers; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write through a temporary file in the same directory, fsync, then rename over ``path``: a crash leaves
    either the old file or the new one, never a torn one.  Out of space: :class:`DiskFull`, the old file intact."""
    path = Path(path)
    with sigint_deferred():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~_UMASK)  # as open() would create it: run directories are shared
            with os.fdopen(fd, "wb" if binary else "w") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            cause = e
            while cause is not None and not (isinstance(cause, OSError) and cause.errno in DISK_FULL):
                cause = cause.__context__
            if cause is not None:
                raise DiskFull(cause.errno, f"no space left to write {path}") from e
            raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once: os.umask can only be read by setting it


def remove_orphans(run_dir: Path) -> list[Path]:
    """Delete temporary files a killed writer left in ``run_dir`` (and snapshots/); returns them."""
    run_dir = Path(run_dir)
    orphans = [p for d in (run_dir, run_dir / "snapshots") if d.is_dir() for p in d.glob(".*.tmp")]
    for p in orphans:
        p.unlink(missing_ok=True)
    return orphans


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN: an undefined std, a mean over no episodes) as None: JSON has no NaN."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def write_json(path: Path, obj: dict) -> None:
    """Standard JSON (non-finite numbers as null), written atomically."""
    clean = finite_or_none(obj)
    atomic_write(path, lambda f: json.dump(clean, f, indent=2, sort_keys=True, default=str, allow_nan=False))


# --- plain-data encoding -------------------------------------------------------------------------------------------
def encode(obj: Any) -> Any:
    """Tensors and plain Python data only: NumPy arrays and scalars, named tuples and deques are converted."""
    if isinstance(obj, np.generic):  # before the plain types: np.float64 is a float subclass that pickles as NumPy's
        return obj.item()
    if isinstance(obj, torch.Tensor) or obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"cannot checkpoint a NumPy array of dtype {obj.dtype}")
        return {"__ndarray__": np.ascontiguousarray(obj).tobytes(), "dtype": obj.dtype.str, "shape": list(obj.shape)}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return {"__namedtuple__": type(obj).__name__, "fields": list(obj._fields), "values": [encode(v) for v in obj]}
    if isinstance(obj, tuple):
        return tuple(encode(v) for v in obj)
    if isinstance(obj, (list, deque)):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    raise TypeError(f"cannot checkpoint an object of type {type(obj).__name__}; store tensors and plain data")


def decode(obj: Any) -> Any:
    """The inverse of :func:`encode` (named tuples come back as tuples of the same field names).  Anything that is not
    what :func:`encode` writes: a ConfigError (the caller names the file)."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return _decode_array(obj)
        if "__namedtuple__" in obj:
            name, fields = obj["__namedtuple__"], obj["fields"]
            if not (isinstance(name, str) and isinstance(fields, list) and all(isinstance(f, str) for f in fields)
                    and all(_plain_name(n) for n in (name, *fields)) and len(set(fields)) == len(fields)
                    and isinstance(obj["values"], list) and len(obj["values"]) == len(fields)):
                raise ConfigError("holds a record with invalid names or values")
            return namedtuple(name, fields)(*(decode(v) for v in obj["values"]))
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(decode(v) for v in obj)
    return obj


def _plain_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


def _decode_array(obj: dict) -> np.ndarray:
    """A numeric array from its bytes, dtype string and shape; object, structured and unparsable dtypes are refused."""
    data, dtype, shape = obj["__ndarray__"], obj["dtype"], obj["shape"]
    try:
        dtype = np.dtype(dtype) if isinstance(dtype, str) else None
    except (TypeError, ValueError, SyntaxError):
        dtype = None
    if dtype is None or dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None or dtype.hasobject:
        raise ConfigError(f"holds an array of unreadable or non-numeric dtype {obj['dtype']!r}")
    if not (isinstance(data, bytes) and isinstance(shape, list)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
            and math.prod(shape) * dtype.itemsize == len(data)):
        raise ConfigError(f"holds an array whose bytes do not fit its shape {shape!r} and dtype {dtype}")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def save_checkpoint(path: Path, state: dict) -> None:
    """Serialised in memory first, so that a failing disk meets one plain write (and no half-written archive)."""
    buffer = io.BytesIO()
    torch.save(encode({"version": CHECKPOINT_VERSION, **state}), buffer)
    atomic_write(path, lambda f: f.write(buffer.getbuffer()), binary=True)


def _legacy_globals() -> list:
    """What version-1 checkpoints pickled besides plain data: NumPy arrays, dtypes and scalars, and the toolkit's
    named tuples (rebuilt as plain tuples of their fields by :func:`_legacy_fix`)."""
    import numpy.core.multiarray as multiarray

    from core.envs.rollout import Rollout
    from core.algo.sampler import Transitions
    dtypes = [type(np.dtype(t)) for t in ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")]
    return [multiarray._reconstruct, np.ndarray, np.dtype, *dtypes, multiarray.scalar, Transitions, Rollout,
            *LEGACY_RECORDS]


LEGACY_RECORDS: list[type] = []  # named tuples of other families that version-1 checkpoints may hold (they add them)


def _legacy_fix(state: Any) -> Any:
    """Version-1 state in today's terms: pickled env blobs dropped (never unpickled)."""
    if isinstance(state, dict):
        return {k: (None if k == "envs" and isinstance(v, (bytes, list)) and _is_blob(v) else _legacy_fix(v))
                for k, v in state.items()}
    if isinstance(state, list):
        return [_legacy_fix(v) for v in state]
    return state


def _is_blob(v: Any) -> bool:
    return isinstance(v, bytes) or (isinstance(v, list) and bool(v) and all(isinstance(b, bytes) for b in v))


def load_checkpoint(path: Path) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` (or the first format) without running any code from it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no checkpoint at {path}; pass a run directory written by 'dapo run'")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as strict_error:
        state = _load_legacy(path, strict_error)
    if not isinstance(state, dict) or state.get("version") not in (1, CHECKPOINT_VERSION):
        raise ConfigError(f"checkpoint {path} has an unknown format (expected version {CHECKPOINT_VERSION})")
    if state["version"] != CHECKPOINT_VERSION:
        return state
    try:
        return decode(state)
    except ConfigError as e:
        raise ConfigError(f"checkpoint {path} {e}; refused (restore it from a backup or start a new run)") from e
    except Exception as e:  # decode builds nothing but arrays, tuples and containers: any failure is corrupt data
        raise ConfigError(f"checkpoint {path} is unreadable or corrupt ({type(e).__name__} while decoding); restore it "
                          "from a backup or start a new run") from e


def _load_legacy(path: Path, strict_error: Exception) -> dict:
    import pickle

    try:
        with torch.serialization.safe_globals(_legacy_globals()):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError, ValueError, EOFError) as e:
        refused = "Weights only load failed" in str(strict_error) or isinstance(e, pickle.UnpicklingError)
        if refused and "Unsupported global" in str(e):
            raise ConfigError(f"checkpoint {path} holds objects other than tensors and plain data; refused (loading "
                              "it could run code). Train again, or load it only if you trust its author with the "
                              "toolkit at commit c94a516") from e
        raise ConfigError(f"checkpoint {path} is unreadable or corrupt ({type(e).__name__}); restore it from a backup "
                          "or start a new run") from e
    if not isinstance(state, dict) or state.get("version") != 1:
        raise ConfigError(f"checkpoint {path} has an unknown format (expected version {CHECKPOINT_VERSION})")
    warnings.warn(f"{path} is a version-1 checkpoint: loaded without its pickled environments (never unpickled); "
                  "a resumed run restarts its episodes", stacklevel=2)
    return _legacy_fix(state)


def require(state: dict, keys: tuple[str, ...], path: Path) -> None:
    """One line naming the first key a checkpoint lacks."""
    for k in keys:
        if k not in state:
            raise ConfigError(f"checkpoint {path} lacks '{k}' (truncated or from another tool); restore it from a "
                              "backup or start a new run")


COUNTERS = ("global_step", "iteration", "grad_step", "env_steps", "batched_steps")  # whole, non-negative numbers


def check_counters(state: dict, path: Path) -> None:
    """One line naming a step counter that is not a non-negative integer, or a non-numeric ``elapsed``: values that
    would load and only fail, or train nonsense, later."""
    for k in COUNTERS:
        v = state.get(k, 0)
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            raise ConfigError(f"checkpoint {path} has {k} {v!r}, not a count of steps; restore it from a backup or "
                              "start a new run")
    v = state.get("elapsed", 0.0)
    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
        raise ConfigError(f"checkpoint {path} has elapsed {v!r}, not a number of seconds; restore it from a backup or "
                          "start a new run")


def load_state(target: Any, state: dict, path: Path) -> None:
    """``target.load_state_dict(state)`` with a checkpoint that does not fit (a tensor of another shape, a missing or
    mistyped entry) as one line instead of a traceback."""
    try:
        target.load_state_dict(state)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as e:
        detail = str(e).strip().splitlines()[0][:120] if str(e).strip() else ""
        raise ConfigError(f"checkpoint {path} does not fit this run ({type(e).__name__}{': ' + detail if detail else ''}"
                          "); restore it from a backup or start a new run") from e
