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

from core.config.errors import ConfigError

CHECKPOINT_VERSION = 2
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NUMERIC_KINDS = "biufc"  # bool, int, uint, float, complex: never object arrays


class DiskFull(OSError):
    """Writing a run file failed for lack of space; the previous version of the file is intact."""


def disk_full_cause(e: BaseException):
    """The :class:`DiskFull` or out-of-space OSError in ``e``'s chain of causes and contexts (a failure to close a
    file while reporting a full disk hides the first one), else None."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, DiskFull):
            return e
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            return DiskFull(e.errno, f"no space left to write {e.filename}" if e.filename else "no space left on the "
                                     "device")
        e = e.__cause__ or e.__context__
    return None


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
        if refused and any(word in str(e).lower() for word in ("unsupported global", "is blocked")):
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


def schema_mismatch(saved: Any, fresh: Any, where: str = "") -> Any:
    """Where ``saved`` (a checkpoint's entry) departs from ``fresh`` (the same entry of a trainer just built for the
    run's config), as ``(where, what)``, else None: a missing key, another type, a tensor or array of another shape or
    kind, a list of another length (per-agent values: one per agent), a NaN or infinity where the fresh entry is
    finite.  Extra keys are allowed (older and newer versions)."""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict):
            return where, f"is a {type(saved).__name__}, not a mapping"
        for k, v in fresh.items():
            if k not in saved:
                return f"{where}.{k}".lstrip("."), "is missing"
            found = schema_mismatch(saved[k], v, f"{where}.{k}".lstrip("."))
            if found:
                return found
        return None
    if isinstance(fresh, (torch.Tensor, np.ndarray)):
        if not isinstance(saved, (torch.Tensor, np.ndarray)):
            return where, f"is a {type(saved).__name__}, not an array"
        if tuple(saved.shape) != tuple(fresh.shape):
            return where, f"has shape {tuple(saved.shape)}, not {tuple(fresh.shape)}"
        saved_t, fresh_t = torch.as_tensor(saved), torch.as_tensor(fresh)
        if saved_t.is_floating_point() != fresh_t.is_floating_point():
            return where, f"holds {saved_t.dtype}, not {fresh_t.dtype}"
        if saved_t.is_floating_point() and bool(torch.isfinite(fresh_t).all()) and not bool(torch.isfinite(saved_t).all()):
            return where, "holds NaN or infinite values"
        return None
    if isinstance(fresh, (list, tuple)):
        if not isinstance(saved, (list, tuple)):
            return where, f"is a {type(saved).__name__}, not a list"
        if len(saved) != len(fresh):
            return where, f"has {len(saved)} entries, not {len(fresh)}"
        for i, (a, b) in enumerate(zip(saved, fresh)):
            found = schema_mismatch(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(fresh, float) and math.isfinite(fresh):
        if not (isinstance(saved, (int, float)) and not isinstance(saved, bool) and math.isfinite(saved)):
            return where, f"is {saved!r}, not a finite number"
    return None


def check_schema(state: dict, fresh: dict, keys: tuple[str, ...], path: Path) -> None:
    """One line for the first of ``keys`` whose checkpoint entry does not match the fresh trainer's
    (:func:`schema_mismatch`); checked before anything is loaded or trained on it."""
    for key in keys:
        if key in fresh and state.get(key) is not None:
            found = schema_mismatch(state[key], fresh[key], key)
            if found:
                raise ConfigError(f"checkpoint {path}: {found[0]} {found[1]} (damaged, or from another run); restore "
                                  "it from a backup or start a new run")


def load_state(target: Any, state: dict, path: Path) -> None:
    """``target.load_state_dict(state)`` with a checkpoint that does not fit (a tensor of another shape, a missing or
    mistyped entry) as one line instead of a traceback.  The entries named by ``target.CHECKPOINT_SCHEMA`` are first
    checked against the target's own state (:func:`check_schema`: shapes, lengths per agent, finiteness)."""
    keys = getattr(target, "CHECKPOINT_SCHEMA", ())
    if keys:
        check_schema(state, target.state_dict(), keys, path)
    try:
        target.load_state_dict(state)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as e:
        detail = str(e).strip().splitlines()[0][:120] if str(e).strip() else ""
        raise ConfigError(f"checkpoint {path} does not fit this run ({type(e).__name__}{': ' + detail if detail else ''}"
                          "); restore it from a backup or start a new run") from e
