"""Mid-episode environment state as plain data, so that a resumed run continues its episodes exactly without
pickling (and so without ever unpickling) an environment.

:func:`capture` walks an object's attributes and records the plain values it finds (numbers, strings, NumPy arrays
of numeric dtype, NumPy and Python random generators, and lists, tuples, dicts and plain Python objects holding
them), with their structure; :func:`restore` writes those values back into the *same structure of a freshly made
env*.  No object is ever built from a checkpoint: restore only assigns plain values to attributes of objects that
the fresh env already has.  Things without Python state (MuJoCo's model and data) are skipped here; MuJoCo's
integration state is captured through ``mj_getState`` (:func:`env_state`).
"""
from __future__ import annotations

import random
import types
from typing import Any

import numpy as np

MAX_DEPTH = 12
# Body positions that Gymnasium's MuJoCo envs read *before* stepping (Ant's torso ``xpos``, Humanoid's mass centre
# from ``xipos``; Reacher and Pusher through ``get_body_com``).  After ``mj_step`` they hold the last substep's start,
# one substep behind ``qpos``; ``mj_forward`` on a restored state would bring them up to date and so change the first
# reward after a resume (Humanoid's forward reward by ~1e-4), so they are saved and put back as they were.
STALE_POSITIONS = ("xpos", "xipos")
_SKIP_TYPES = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.ModuleType, type,
               types.GeneratorType)


def _plain_leaf(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, bytes, np.generic)) or (
        isinstance(v, np.ndarray) and v.dtype.kind in "biufc")


def capture(obj: Any, depth: int = 0, seen: frozenset = frozenset()) -> Any:
    """Plain-data snapshot of ``obj`` (``{"__skip__": 1}`` where nothing plain can be recorded)."""
    if _plain_leaf(obj):
        return {"__leaf__": obj.copy() if isinstance(obj, np.ndarray) else obj}
    if depth > MAX_DEPTH or id(obj) in seen or isinstance(obj, _SKIP_TYPES):
        return {"__skip__": 1}
    seen = seen | {id(obj)}
    if isinstance(obj, np.random.Generator):
        return {"__np_rng__": obj.bit_generator.state}
    if isinstance(obj, np.random.RandomState):
        return {"__np_random_state__": obj.get_state()}
    if isinstance(obj, random.Random):
        return {"__py_rng__": obj.getstate()}
    if isinstance(obj, (list, tuple)):
        return {"__seq__": [capture(v, depth + 1, seen) for v in obj], "tuple": isinstance(obj, tuple)}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            return {"__skip__": 1}
        return {"__map__": {k: capture(v, depth + 1, seen) for k, v in obj.items()}}
    if hasattr(obj, "__dict__") and not callable(getattr(type(obj), "__get__", None)):
        return {"__obj__": {k: capture(v, depth + 1, seen) for k, v in vars(obj).items()}}
    return {"__skip__": 1}


def _value(snap: dict, current: Any) -> Any:
    """The value ``snap`` describes, restored into ``current`` where it is a container or an object."""
    if "__leaf__" in snap:
        return snap["__leaf__"]
    if "__np_rng__" in snap and isinstance(current, np.random.Generator):
        current.bit_generator.state = snap["__np_rng__"]
    elif "__np_random_state__" in snap and isinstance(current, np.random.RandomState):
        current.set_state(snap["__np_random_state__"])
    elif "__py_rng__" in snap and isinstance(current, random.Random):
        current.setstate(_tuples(snap["__py_rng__"]))
    elif "__seq__" in snap and isinstance(current, (list, tuple)) and len(current) == len(snap["__seq__"]):
        items = [_value(s, c) for s, c in zip(snap["__seq__"], current)]
        if isinstance(current, list):
            current[:] = items
            return current
        return type(current)(*items) if hasattr(current, "_fields") else tuple(items)
    elif "__map__" in snap and isinstance(current, dict):
        restore_mapping(current, snap)
    elif "__obj__" in snap and current is not None and hasattr(current, "__dict__"):
        restore(current, snap)
    return current


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


def restore_mapping(mapping: dict, snap: dict) -> None:
    """Write a captured dict's plain values back into ``mapping`` (keys the snapshot skipped stay as they are)."""
    for k, s in snap.get("__map__", {}).items():
        if "__skip__" not in s:
            mapping[k] = _value(s, mapping.get(k))


def restore(obj: Any, snap: dict) -> None:
    """Write the plain values of ``snap`` (from :func:`capture` of an object of the same kind) into ``obj``."""
    for name, s in snap.get("__obj__", {}).items():
        if "__skip__" in s:
            continue
        current = getattr(obj, name, None)
        value = _value(s, current)
        if value is not current:
            setattr(obj, name, value)


def env_state(env: Any) -> dict:
    """Plain-data state of a Gymnasium env (its wrappers and the unwrapped env), with MuJoCo's integration state."""
    out = {"python": capture(env)}
    u = getattr(env, "unwrapped", env)
    if hasattr(u, "model") and hasattr(u, "data"):
        import mujoco

        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(u.model, spec))
        mujoco.mj_getState(u.model, u.data, state, spec)
        out["mujoco"] = state
        out["mujoco_positions"] = {name: getattr(u.data, name).copy() for name in STALE_POSITIONS}
    return out


def set_env_state(env: Any, state: dict) -> None:
    restore(env, state["python"])
    if state.get("mujoco") is not None:
        import mujoco

        u = env.unwrapped
        mujoco.mj_setState(u.model, u.data, np.asarray(state["mujoco"], np.float64), mujoco.mjtState.mjSTATE_INTEGRATION)
        mujoco.mj_forward(u.model, u.data)
        saved = state.get("mujoco_positions") or {}  # absent in checkpoints from before it was saved
        for name in STALE_POSITIONS:
            if name in saved:
                getattr(u.data, name)[...] = np.asarray(saved[name], np.float64)
