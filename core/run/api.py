"""The Python API: :func:`train` a run, :func:`load` its agent, :meth:`Agent.predict` actions.

    import core
    result = core.train(env="CartPole-v1", algo="dapo", total_steps=50_000, seed=1)
    agent = core.load(result.run_dir)
    agent.predict(obs, deterministic=True)          # raw observations in, actions out (batched or single)
    agent.evaluate(episodes=10)                      # EvalResult(mean, std, returns); video_dir= records them
    agent.export_onnx("policy.onnx")                 # the policy for onnxruntime (deterministic=False: sampling)

Options are the ``dapo run`` option names (``TrainConfig`` fields).  ``env`` is a registered id, ``"module:Env-id"``,
``"module:make_env"`` or a callable returning a ``gymnasium.Env``; ``algo`` may name any family's algorithm (e.g.
``"mappo"`` trains on PettingZoo through ``dapo_ma``).  The same runs as the CLI: one run directory per call with
config.yaml, metrics.csv, checkpoint.pt, summary.json and learning_curve.png.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np
import torch

from core.config.parsing import coerce_mapping, read_yaml
from core.config.errors import ConfigError
from core.config.options import TrainConfig
from core.run.registry import Family, plugins


class RunResult(NamedTuple):
    """What :func:`train` returns: the run directory, its summary.json contents and the resolved config."""

    run_dir: Path
    summary: dict
    config: Any


class EvalResult(NamedTuple):
    """Mean and sample std (ddof=1) of the episode returns, and the returns."""

    mean: float
    std: float
    returns: list


def explicit_options(config: Union[None, dict, str, Path, Any], options: dict[str, Any]) -> dict[str, Any]:
    """Options given by the caller: a config object's non-default fields or a dict, with keyword options on top; a
    YAML path is applied as the first recipe, as ``dapo run --config FILE`` does (so both resolve alike)."""
    def plain(mapping: dict) -> dict:
        out = {str(k).replace("-", "_"): v for k, v in mapping.items() if v is not None}
        if isinstance(out.get("recipe"), (str, Path)):
            out["recipe"] = (str(out["recipe"]),)
        return out

    if config is None or isinstance(config, (str, Path)):
        base: dict[str, Any] = {}
    elif dataclasses.is_dataclass(config):
        defaults = type(config)()
        base = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                if getattr(config, f.name) != getattr(defaults, f.name)}
    elif isinstance(config, dict):
        base = dict(config)
    else:
        raise ConfigError(f"config must be a config dataclass, a dict or a YAML path, got {type(config).__name__}")
    out = {**plain(base), **plain(options)}
    if isinstance(config, (str, Path)):
        out["recipe"] = (str(config), *out.get("recipe", ()))
    return out


def family_for(explicit: dict[str, Any]) -> Family:
    """The family an options mapping asks for (:meth:`core.run.registry.Plugins.select`, as the CLI's): by its
    algorithm (given, or in a recipe file), else by its env, else the Gymnasium family."""
    return plugins().select(explicit.get("algo"), recipes=explicit.get("recipe", ()), env=explicit.get("env"))


def resolve(explicit: dict[str, Any], resume: Optional[Path] = None, family: Optional[Family] = None,
            trust_env: bool = False, env_callable: bool = False):
    """``(family, resolved config)`` for a new run with ``explicit`` options, or for resuming ``resume`` with the
    options that may change on resume.  ``trust_env`` confirms an env named by a file that would import code
    (core/config/trust.py); ``env_callable``: ``explicit["env"]`` stands for a Python callable given again, which may replace
    a saved process-local env (``dapo-local/...``, a lambda or a local function)."""
    from core.run.runner import resume_config

    if resume is not None:
        if "run_dir" in explicit and Path(explicit["run_dir"]).resolve() != Path(resume).resolve():
            raise ConfigError("--run-dir cannot be combined with --resume; the resumed run stays in its directory")
        fam = _family_of_run(Path(resume))
        # an env given again confirms it: a different one is refused by resume_config before anything is made
        side = fam.run_side()
        saved = side.load_config(Path(resume), trust_env=trust_env or "env" in explicit)
        overrides = {**explicit, "run_dir": str(resume)}
        saved_env = getattr(saved, "env", None)  # None: a family without envs (sequence generation)
        if "env" in overrides and overrides["env"] == saved_env:
            del overrides["env"]
        replaceable = ("env",) if env_callable and str(saved_env).startswith("dapo-local/") else ()
        return fam, side.complete(resume_config(type(saved), saved, overrides, replaceable))
    fam = family or family_for(explicit)
    typed = coerce_mapping({k: v for k, v in explicit.items()}, fam.config_class, "options")
    return fam, fam.run_side().resolve(typed, trust_env=trust_env)


def _family_of_run(run_dir: Path) -> Family:
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml); pass a directory written by 'dapo run'")
    raw = read_yaml(path)
    algo = raw.get("algo") if isinstance(raw, dict) else None
    if not isinstance(algo, str):
        raise ConfigError(f"{path} names no algorithm; it was not written by 'dapo run'")
    return plugins().family_of(algo)


def train(config: Union[None, dict, str, Path, Any] = None, *, resume: Optional[Union[str, Path]] = None,
          family: Optional[str] = None, trust_env: bool = False, **options: Any) -> RunResult:
    """Train one run (or continue ``resume``, a run directory) and return its :class:`RunResult`.

    ``config``: a config dataclass, a dict or a YAML path (applied as a recipe); keyword ``options`` win over it.
    ``family`` (a family's name, e.g. "PettingZoo") picks the family when no algorithm is given (each family's own
    ``train`` passes it).  ``trust_env=True`` confirms an env that a file (a recipe, the resumed run's config.yaml)
    names and that would import code; ``env=make_env`` passed again resumes a run trained on a lambda or a local
    function.  Raises :class:`core.config.errors.ConfigError` (a one-line message) for bad options and
    :class:`core.config.errors.RunInterrupted` after Ctrl-C (the run directory can be resumed)."""
    explicit = explicit_options(config, options)
    fam = None
    if family is not None and "algo" not in explicit:
        fam = plugins().family_named(family)
    elif "algo" not in explicit and dataclasses.is_dataclass(config) and not isinstance(config, type):
        # a config object left at its defaults names no algorithm: its class names the family
        fam = next((f for f in plugins().families if f.config_class is type(config)), None)
    env_callable = callable(explicit.get("env"))
    if env_callable:  # recorded as 'module:name' so that eval and resume can make it again
        explicit["env"] = (fam or family_for(explicit)).env_reference(explicit["env"])
    fam, cfg = resolve(explicit, None if resume is None else Path(resume), fam, trust_env, env_callable)
    summary = fam.run_side().run(cfg, resume is not None)
    return RunResult(Path(cfg.run_dir) if summary is None else Path(summary["run_dir"]), summary or {}, cfg)


def load(run_dir: Union[str, Path], device: str = "cpu", env: Union[None, str, Callable] = None,
         trust_env: bool = False):
    """The trained agent of ``run_dir`` (any family); ``env`` replaces the run's env (needed where it was a Python
    callable that cannot be imported by name); ``trust_env=True`` confirms a saved env that would import code named
    by the run's config.yaml (core/config/trust.py)."""
    fam = _family_of_run(Path(run_dir))
    return fam.run_side().load(Path(run_dir), device=device, env=env, trust_env=trust_env)


def load_agent(run_dir: Path, device: str = "cpu", env: Union[None, str, Callable] = None,
               trust_env: bool = False) -> "Agent":
    """:func:`load` for the Gymnasium family."""
    from core.training.checkpoint import load_checkpoint, load_state, require
    from core.envs.make import env_reference
    from core.run.evaluation import evaluation_envs
    from core.algo.networks import build_networks
    from core.run.presets import complete
    from core.run.rundir import load_run_config
    from core.training.trainer import pick_device

    cfg = complete(load_run_config(run_dir, trust_env or env is not None))  # an env given replaces the saved one
    if env is not None:
        cfg = dataclasses.replace(cfg, env=env_reference(env) if callable(env) else env)
    path = run_dir / "checkpoint.pt"
    state = load_checkpoint(path)
    require(state, ("actor", "critic", "obs_norm"), path)
    envs = evaluation_envs(cfg.env, 0, cfg.env_kwargs)
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    raw_space = getattr(envs, "raw_observation_space", obs_space)  # a Dict the trainer saw flattened
    envs.close()
    actor, critic = build_networks(obs_space, act_space, cfg.hidden_sizes, cfg.precision == "bf16", cfg.log_std_init)
    dev = pick_device(device)
    from core.envs.rollout import ObsNormalizer

    obs_norm = ObsNormalizer(obs_space.shape, cfg.norm_obs)
    for module, key in ((actor, "actor"), (critic, "critic"), (obs_norm, "obs_norm")):
        load_state(module, state[key], path)
    return Agent(cfg, actor.to(dev).eval(), critic.to(dev).eval(), obs_norm, raw_space, act_space, dev)


def export_run(run_dir: Path, path: Path, deterministic: bool = True, trust_env: bool = False) -> Path:
    """:attr:`core.run.registry.RunSide.export` of the Gymnasium family: ``run_dir``'s policy to the ONNX file
    ``path`` (:mod:`core.run.export`); the output path and the onnx package are checked before the run is read."""
    from core.run.export import check_output, export_agent, onnx_module

    check_output(Path(path))
    onnx_module()
    return export_agent(load_agent(Path(run_dir), trust_env=trust_env), path, deterministic)


class Agent:
    """A trained single-agent policy with its observation normaliser.

    ``predict`` takes raw observations (as the env returns them) and returns env actions; the modules are
    ``actor`` (``mode``/``sample``/``evaluate``), ``critic`` and ``obs_norm``; ``config`` is the resolved config.
    ``observation_space`` is the env's own: for a Dict, the networks read ``gymnasium.spaces.flatten`` of it."""

    def __init__(self, config: TrainConfig, actor, critic, obs_norm, observation_space, action_space, device):
        self.config, self.actor, self.critic, self.obs_norm = config, actor, critic, obs_norm
        self.observation_space, self.action_space, self.device = observation_space, action_space, device

    @torch.no_grad()
    def predict(self, obs, deterministic: bool = True, noise=None) -> np.ndarray:
        """Action(s) for raw observation(s): ``(D,)`` -> one action, ``(B, D)`` -> ``(B, ...)`` actions (Box actions
        clipped to the bounds, MultiDiscrete ones from the space's ``start``, as the env receives them).  A Dict
        observation space takes one dict, a dict of ``(B, ...)`` entries or a list of dicts.  ``noise`` (with
        ``deterministic=False``) draws the sample from given noise, as an exported stochastic policy does
        (:mod:`core.run.export`): Discrete actions: uniform in [0, 1), one per observation; Box actions: standard
        normal, the action's shape."""
        import gymnasium as gym

        from core.envs.make import flatten_observations
        from core.envs.rollout import to_env_actions

        if isinstance(self.observation_space, gym.spaces.Dict):
            batch, single = flatten_observations(self.observation_space, obs)
        else:
            obs = np.asarray(obs)
            single = obs.ndim == len(self.observation_space.shape)
            batch = obs[None] if single else obs
            if batch.shape[1:] != self.observation_space.shape:
                raise ValueError(f"observation of shape {obs.shape} does not match the env's "
                                 f"{self.observation_space.shape}")
        x = torch.as_tensor(self.obs_norm(batch), device=self.device)
        if noise is not None:
            if deterministic:
                raise ValueError("noise is for sampled actions: pass deterministic=False")
            z = torch.as_tensor(np.asarray(noise, dtype=np.float32), device=self.device)
            action = self.actor.sample_with_noise(x, z[None] if single else z)
        else:
            action = self.actor.mode(x) if deterministic else self.actor.sample(x)[0]
        out = to_env_actions(action, self.action_space)
        return out[0] if single else out

    def export_onnx(self, path: Union[str, Path], deterministic: bool = True) -> Path:
        """Write the policy as an ONNX file (raw observations in, env actions out; with ``deterministic=False`` a
        second input ``noise``, as :meth:`predict`'s): see :mod:`core.run.export`.  Returns the path."""
        from core.run.export import export_agent

        return export_agent(self, path, deterministic)

    def evaluate(self, episodes: int = 10, seed: int = 12345, deterministic: Optional[bool] = None,
                 video_dir: Union[None, str, Path] = None) -> EvalResult:
        """Whole episodes on the run's env (with its env kwargs): the returns' mean and sample std; ``video_dir``:
        record each episode there (MP4 or GIF, :mod:`core.run.video`)."""
        from core.run.evaluation import evaluate, mean_std

        if deterministic is None:
            deterministic = self.config.eval_deterministic is not False
        returns = evaluate(self.config.env, self.actor, self.obs_norm, episodes, seed, self.device, deterministic,
                           env_kwargs=self.config.env_kwargs, video_dir=None if video_dir is None else Path(video_dir))
        mean, std = mean_std(returns)
        return EvalResult(mean, std, returns)

    def make_env(self, **kwargs):
        """A fresh instance of the run's env (its env kwargs, overridden by ``kwargs``)."""
        from core.envs.make import make_env

        return make_env(self.config.env, {**self.config.env_kwargs, **kwargs})
