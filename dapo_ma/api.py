"""The multi-agent Python API, the same shape as :mod:`core.run.api`:

    import dapo_ma
    result = dapo_ma.train(env="simple_spread_v3", env_kwargs={"N": 3}, algo="mappo", total_steps=50_000)
    agent = dapo_ma.load(result.run_dir)
    actions = agent.predict(observations)     # {agent: obs} -> {agent: action}
    agent.evaluate(episodes=10)               # per-agent return averaged over agents

``env`` is an mpe2 task name, a module with ``parallel_env()``, ``"module:make_env"`` or a callable returning a
PettingZoo ``ParallelEnv``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np
import torch

from core.run.api import EvalResult, RunResult
from core.run.api import train as core_train
from core.training.checkpoint import load_checkpoint, require
from core.config.errors import ConfigError


def train(config=None, *, resume: Optional[Union[str, Path]] = None, trust_env: bool = False,
          **options: Any) -> RunResult:
    """Train one run of this family (default algorithm: dapo-ma, unless options or a recipe name another); see
    :func:`core.run.api.train`."""
    return core_train(config, resume=resume, family="PettingZoo", trust_env=trust_env, **options)


def load(run_dir: Union[str, Path], device: str = "cpu", env: Union[None, str, Callable] = None,
         trust_env: bool = False) -> "MAAgent":
    """The trained agents of ``run_dir``: ``predict`` and ``evaluate``.  ``env`` replaces the saved env (needed where it
    was a lambda or a local function); ``trust_env`` confirms a saved env that would import code (core/config/trust.py)."""
    from core.training.trainer import pick_device
    from dapo_ma.config import complete
    from dapo_ma.envs import env_reference, env_spec
    from dapo_ma.runner import ALGORITHMS, load_run_config

    run_dir = Path(run_dir)
    cfg = complete(load_run_config(run_dir, trust_env=trust_env or env is not None))
    if env is not None:
        cfg = dataclasses.replace(cfg, env=env_reference(env) if callable(env) else env)
    path = run_dir / "checkpoint.pt"
    state = load_checkpoint(path)
    require(state, ("actor",), path)
    spec = env_spec(cfg.env, cfg.env_kwargs)
    dev = pick_device(device)
    actor = ALGORITHMS[cfg.algo][1](cfg, spec).to(dev)
    try:
        actor.load_state_dict(state["actor"])
    except (RuntimeError, KeyError, TypeError) as e:
        raise ConfigError(f"checkpoint {path} does not fit the run's networks ({type(e).__name__})") from e
    return MAAgent(cfg, actor.eval(), spec, dev)


def evaluate_run(run_dir: Path, episodes: int, seed: int, device: str = "cpu",
                 deterministic: Optional[bool] = None, trust_env: bool = False,
                 video_dir: Optional[Path] = None) -> list[float]:
    """``dapo eval`` for this family: load ``run_dir``'s config and checkpoint and evaluate its actor (``video_dir``:
    record the episodes there)."""
    from dapo_ma.evaluation import evaluate

    if video_dir is not None:  # before the checkpoint is read: bad input costs nothing
        from core.run.video import check_video_dir, frame_format

        check_video_dir(Path(video_dir))
        frame_format()
    agent = load(run_dir, device, trust_env=trust_env)
    return evaluate(agent.config, agent.actor, episodes, seed, agent.device, deterministic is not False, video_dir)


class MAAgent:
    """Trained decentralised policies: ``actor.act(obs (E, A, D), agent_id (E, A), deterministic)``."""

    def __init__(self, config, actor, spec, device):
        self.config, self.actor, self.spec, self.device = config, actor, spec, device

    @torch.no_grad()
    def predict(self, observations: dict, deterministic: bool = True) -> dict:
        """``{agent: observation}`` (raw, as the env returns them) -> ``{agent: action}`` for the agents given."""
        unknown = set(observations) - set(self.spec.agents)
        if unknown:
            raise ValueError(f"unknown agents {sorted(unknown)}; this run's agents are {list(self.spec.agents)}")
        obs = np.zeros((1, self.spec.n_agents, self.spec.obs_dim), np.float32)
        for i, a in enumerate(self.spec.agents):
            if a in observations:
                o = np.asarray(observations[a], np.float32).reshape(-1)
                obs[0, i, : len(o)] = o
        ids = torch.arange(self.spec.n_agents, device=self.device).unsqueeze(0)
        actions = self.actor.act(torch.as_tensor(obs, device=self.device), ids, deterministic)[0].cpu().numpy()
        lay, out = self.spec.layout, {}
        for i, a in enumerate(self.spec.agents):
            if a in observations:
                n = int(lay.mask[i].sum())
                out[a] = int(actions[i]) if lay.discrete else np.clip(actions[i][:n], lay.low[i, :n], lay.high[i, :n])
        return out

    def evaluate(self, episodes: int = 10, seed: int = 12345, deterministic: bool = True,
                 video_dir: Union[None, str, Path] = None) -> EvalResult:
        """Whole episodes: each return is the per-agent return averaged over agents; ``video_dir``: record each
        episode there (MP4 or GIF, :mod:`core.run.video`; the env must render ``rgb_array`` frames)."""
        from core.run.evaluation import mean_std
        from dapo_ma.evaluation import evaluate

        returns = evaluate(self.config, self.actor, episodes, seed, self.device, deterministic,
                           None if video_dir is None else Path(video_dir))
        mean, std = mean_std(returns)
        return EvalResult(mean, std, returns)
