"""Environment construction and observation/reward normalisation (statistics live in checkpoints)."""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import re
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from core.envs import minigrid, mujoco_log
from core.config.errors import ConfigError
from core.config.limits import check_env_sizes
from core.config.parsing import importable_name


def _ensure_registered(env_id: str) -> None:
    if env_id.startswith("ALE/"):
        try:
            import ale_py
        except ImportError as e:
            raise ConfigError(f"{env_id} needs ale-py; install it with: pip install 'gymnasium[atari]'") from e
        gym.register_envs(ale_py)


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


LOCAL_NAMESPACE = "dapo-local"  # envs given as Python callables that cannot be imported by name


def _import_module(module: str, env: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and e.name != module and not module.startswith(e.name + "."):  # found, but its own import failed
            raise ConfigError(f"--env {env}: module '{module}' imports '{e.name}', which is not installed; install it "
                              f"(pip install {e.name.split('.')[0]})") from e
        raise ConfigError(f"--env {env}: cannot import module '{module}' ({e}); put it on PYTHONPATH "
                          "(the run directory's env must stay importable for eval and --resume)") from e
    except Exception as e:  # the user's module failed while importing
        raise ConfigError(f"--env {env}: importing module '{module}' failed: {type(e).__name__}: {e}") from e


def _register_factory(env_id: str, factory: Callable[..., gym.Env]) -> str:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=factory, disable_env_checker=True)
    return env_id


def resolve_env_id(env: str) -> str:
    """The Gymnasium id to make for ``env``: a registered id as it is; ``module:Env-id`` after importing ``module``
    (which registers it); ``module:factory`` or ``module.factory`` (a function or class returning a
    ``gymnasium.Env``) registered under ``dapo-user/module.factory``.  One-line errors name the problem."""
    if not isinstance(env, str) or not env:
        raise ConfigError(f"--env must be an env id or 'module:name', got {env!r}")
    _ensure_registered(env)
    if minigrid.is_minigrid(env):  # dict observations: the flat one-hot view for the MLP (core/envs/minigrid.py)
        return minigrid.flat_id(env)
    if env in gym.registry:
        return env
    if env.startswith(LOCAL_NAMESPACE + "/"):
        raise ConfigError(f"env {env} was a Python callable that cannot be imported by name (a lambda or a local "
                          "function); pass it again: core.load(run_dir, env=make_env) or core.train(resume=run_dir, "
                          "env=make_env)")
    if ":" in env:
        module_name, _, attr = env.partition(":")
    elif "." in env:
        module_name, _, attr = env.rpartition(".")
        if importlib.util.find_spec(module_name.split(".")[0]) is None:
            _unknown(env)
    else:
        _unknown(env)
    module = _import_module(module_name, env)
    if attr in gym.registry:
        return attr
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"--env {env}: module '{module_name}' neither registers an env '{attr}' nor defines a "
                          f"function or class '{attr}'")
    return _register_factory(f"dapo-user/{module_name}.{attr}", factory)


def _unknown(env: str) -> None:
    close = difflib.get_close_matches(env, list(gym.registry.keys()), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.pprint_registry() for ids"
    raise ConfigError(f"unknown --env '{env}'{hint} (your own env: 'module:EnvId' or 'module:make_env')")


def env_reference(factory: Callable[..., gym.Env]) -> str:
    """The ``--env`` string for a Python callable: ``module:qualname`` when that imports back to the same object
    (so the run can be reopened), else a process-local id in the ``dapo-local`` namespace."""
    imported = importable_name(factory)
    if imported is not None:
        return imported
    name = re.sub(r"[^\w.-]", "_", getattr(factory, "__qualname__", "") or type(factory).__name__)
    return _register_factory(f"{LOCAL_NAMESPACE}/{name}-{id(factory):x}", factory)


def imports_code(env: str) -> bool:
    """Whether making ``env`` would import a module that the string names and call something from it (``module:name``,
    ``module.name``): an env named by a file must then be confirmed (core/config/trust.py).  Registered ids, ``ALE/`` and
    ``MiniGrid-`` ids, process-local callables and modules that do not exist (their error says so) import nothing."""
    if not isinstance(env, str) or is_atari(env) or minigrid.is_minigrid(env) or env.startswith(LOCAL_NAMESPACE + "/"):
        return False
    if env in gym.registry or not (":" in env or "." in env):
        return False
    top = (env.partition(":")[0] if ":" in env else env.rpartition(".")[0]).split(".")[0]
    try:
        return importlib.util.find_spec(top) is not None  # a top-level spec: found without running its code
    except (ImportError, ValueError):
        return True


# gym.make and gym.make_vec take these themselves; env kwargs go to the env's constructor and nowhere else
_MAKE_ARGS = frozenset(p for f in (gym.make, gym.make_vec) for p in inspect.signature(f).parameters
                       if p not in ("id", "kwargs"))


def constructor_kwargs(env: str, env_kwargs: Optional[dict]) -> dict:
    """``env_kwargs`` as a new dict, refusing a name that gym.make or gym.make_vec would take for themselves."""
    kwargs = dict(env_kwargs or {})
    check_env_sizes(kwargs)
    taken = sorted(set(kwargs) & _MAKE_ARGS)
    if taken:
        raise ConfigError(f"--env-kwargs {taken[0]} is an argument of gymnasium.make, not of the constructor of env "
                          f"'{env}'; env kwargs go to the env only: drop it")
    return kwargs


def check_env_id(env_id: str) -> None:
    """Raise a ConfigError naming close matches when ``env_id`` is not an env the toolkit can make."""
    resolve_env_id(env_id)


def make_env(env: str, env_kwargs: Optional[dict] = None, **extra) -> gym.Env:
    """One env, with one-line errors for bad kwargs or a failing constructor."""
    gym_id = resolve_env_id(env)
    mujoco_log.show_once(gym.registry.get(gym_id))
    try:
        made = gym.make(gym_id, **constructor_kwargs(env, env_kwargs), **extra)
    except ConfigError:
        raise
    except Exception as e:  # missing simulator, bad kwargs, the user's constructor failing: one line for the user
        raise ConfigError(f"cannot create env '{env}': {type(e).__name__}: {e}") from e
    if not isinstance(made.unwrapped, gym.Env):
        raise ConfigError(f"--env {env} did not return a gymnasium.Env (got {type(made.unwrapped).__name__})")
    return made


def make_vec_env(env_id: str, num_envs: int, asynchronous: bool = False,
                 env_kwargs: Optional[dict] = None) -> gym.vector.VectorEnv:
    """Gymnasium vector env with *same-step* autoreset: the step that ends an episode already returns
    the next episode's first observation and the final one in ``info['final_obs']``.  Sync envs hand
    out their observation buffer without copying (consumers copy); async envs use shared memory."""
    gym_id, env_kwargs = resolve_env_id(env_id), constructor_kwargs(env_id, env_kwargs)
    if is_atari(env_id):
        raise ConfigError(f"{env_id}: Atari ids need the DQN preprocessing of core.envs.atari.AtariBackend or EnvPool; "
                          "make them with core.envs.backends.make_backend")
    mujoco_log.show_once(gym.registry.get(gym_id))
    kwargs = {"autoreset_mode": AutoresetMode.SAME_STEP}
    kwargs.update({"shared_memory": True} if asynchronous else {"copy": False})

    def make(wrappers=None):
        try:
            return gym.make_vec(gym_id, num_envs=num_envs, vectorization_mode="async" if asynchronous else "sync",
                                vector_kwargs=kwargs, wrappers=wrappers, **env_kwargs)
        except Exception as e:  # missing simulator, bad kwargs, ...: one line for the user
            raise ConfigError(f"cannot create env '{env_id}': {type(e).__name__}: {e}") from e
    envs = make()
    raw_space = envs.single_observation_space
    try:
        env_family(raw_space, envs.single_action_space, env_id)
    except ConfigError:
        envs.close()
        raise
    if isinstance(raw_space, gym.spaces.Dict):
        # made again with each env flattened by itself, so that info["final_obs"] (same-step autoreset) is flat too
        envs.close()
        envs = make([gym.wrappers.FlattenObservation])
    envs.raw_observation_space = raw_space  # what the env returns: what Agent.predict takes
    return envs


def _one_line(space: gym.Space) -> str:
    return " ".join(str(space).split())  # a space of arrays prints its rows on lines of their own


DICT_ENTRIES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def dict_observation_problem(space: gym.spaces.Dict, prefix: str = "") -> Optional[str]:
    """Why the MLP trainer cannot read ``space`` flattened (``gymnasium.spaces.flatten``: entries in the space's key
    order, Box entries raveled, Discrete and MultiDiscrete ones one-hot), or None when it can.  Entries may be Box
    vectors or matrices, Discrete, MultiDiscrete, MultiBinary and Dicts of those; images (uint8 Box of rank 2 or
    more, any Box of rank 3 or more) would need a CNN per entry and are refused, and so are Tuple, Sequence, Graph
    and Text entries (variable or unstructured sizes)."""
    if not space.spaces:
        return "has no entries"
    for key, sub in space.spaces.items():
        name = f"{prefix}{key}"
        if isinstance(sub, gym.spaces.Dict):
            problem = dict_observation_problem(sub, name + ".")
            if problem is not None:
                return problem
        elif not isinstance(sub, DICT_ENTRIES):
            return f"entry '{name}' is a {type(sub).__name__} space"
        elif isinstance(sub, gym.spaces.Box) and len(sub.shape) >= (2 if sub.dtype == np.uint8 else 3):
            return f"entry '{name}' is an image {sub.shape} (the MLP trainer has no CNN for Dict entries)"
    return None


def flatten_observations(space: gym.spaces.Dict, obs: Any) -> tuple[np.ndarray, bool]:
    """Raw Dict observation(s) as the env returns them -> ``(B, D)`` rows as the trainer sees them (flattened by
    ``gymnasium.spaces.flatten``), and whether ``obs`` was one observation (a dict whose entries have the space's
    shapes) rather than a batch (a dict whose entries have a leading batch axis, or a list of dicts)."""
    def one(o) -> np.ndarray:
        try:
            return np.asarray(gym.spaces.flatten(space, o))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"observation does not match the env's {_one_line(space)}: {type(e).__name__}: {e}") from e

    def row(o: dict, i: int) -> dict:
        return {k: row(v, i) if isinstance(v, dict) else np.asarray(v)[i] for k, v in o.items()}
    if isinstance(obs, (list, tuple)):
        return np.stack([one(o) for o in obs]), False
    if not isinstance(obs, dict):
        raise ValueError(f"the env's observations are dicts ({_one_line(space)}); got {type(obs).__name__}")
    sub, leaf = space, obs
    while isinstance(sub, gym.spaces.Dict):  # the first entry says whether a batch axis leads
        key = next(iter(sub.spaces))
        if not isinstance(leaf, dict) or key not in leaf:
            raise ValueError(f"observation lacks the entry '{key}' of the env's {_one_line(space)}")
        sub, leaf = sub.spaces[key], leaf[key]
    if np.ndim(leaf) == len(sub.shape):
        return one(obs)[None], True
    try:
        return np.stack([one(row(obs, i)) for i in range(len(leaf))]), False
    except IndexError as e:
        raise ValueError(f"a batch of observations whose entries have different lengths: {e}") from e


def env_family(obs_space: gym.Space, act_space: gym.Space, env_id: str = "") -> str:
    """``atari`` (ALE ids, image observations), ``minigrid`` (MiniGrid ids, core/envs/minigrid.py), ``classic``
    (Discrete, MultiDiscrete or MultiBinary actions) or ``continuous`` (1-D Box actions); other envs need flat Box
    observations or Dicts the MLP can read flattened (:func:`dict_observation_problem`).  The family names the
    recipe the env gets (core/run/recipes).

    MultiDiscrete and MultiBinary actions get ``classic``: their heads are categorical (one softmax or Bernoulli per
    component, no log-std), which is what classic's settings (many short rollouts, 20 epochs on one minibatch, no
    reward normalisation) are tuned for; ``continuous``'s are CleanRL's MuJoCo settings for Gaussian policies (one
    env, 2048-step rollouts, normalised observations and rewards, ``--log-std-init``)."""
    if is_atari(env_id) and isinstance(act_space, gym.spaces.Discrete):
        return "atari"
    if minigrid.is_minigrid(env_id):
        return "minigrid"
    if isinstance(obs_space, gym.spaces.Dict):
        problem = dict_observation_problem(obs_space)
        if problem is not None:
            raise ConfigError(f"env '{env_id}' has a Dict observation space whose {problem}; the MLP trainer "
                              "flattens Dicts of Box vectors, Discrete, MultiDiscrete and MultiBinary entries")
    elif not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise ConfigError(f"env '{env_id}' has observation space {_one_line(obs_space)}; only flat Box observations "
                          "and Dicts of them are supported by the MLP trainer")
    if isinstance(act_space, gym.spaces.Discrete):
        return "classic"
    if isinstance(act_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)) and len(act_space.shape) == 1:
        return "classic"  # categorical-like heads: classic control's recipe, not the Gaussian policies' one
    if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        return "continuous"
    raise ConfigError(f"env '{env_id}' has action space {_one_line(act_space)}; supported: Discrete, MultiDiscrete, "
                      "MultiBinary (one axis), 1-D Box")


def save_env_states(envs: gym.vector.SyncVectorEnv) -> list[dict]:
    """Every sub-environment's mid-episode state as plain data (:mod:`core.envs.state`), for an exact resume."""
    from core.envs.state import env_state

    return [env_state(env) for env in envs.envs]


def load_env_states(envs: gym.vector.SyncVectorEnv, states: list[dict]) -> None:
    """Put states from :func:`save_env_states` back into freshly made sub-environments of the same env."""
    from core.envs.state import set_env_state

    if not isinstance(states, list) or len(states) != envs.num_envs:
        raise ConfigError(f"checkpoint holds {len(states) if isinstance(states, list) else 'no'} env states but the "
                          f"run uses {envs.num_envs}")
    for env, state in zip(envs.envs, states):
        set_env_state(env, state)
