"""Evaluate a multi-agent policy: undiscounted per-agent returns averaged over agents."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch

from dapo_ma.config import MAConfig, parse_env_kwargs
from dapo_ma.envs import BatchedParallelEnv


@torch.no_grad()
def evaluate(cfg: MAConfig, actor: torch.nn.Module, episodes: int, seed: int, device: torch.device,
             deterministic: bool = True, video_dir: Optional[Path] = None) -> list[float]:
    """Returns of ``episodes`` full episodes on one env copy; each return is the mean over agents
    of the agent's summed raw rewards.  ``actor.act(obs, agent_id, deterministic)`` picks actions.  ``video_dir``:
    the env is made with ``render_mode="rgb_array"`` and each episode written there (:mod:`core.run.video`)."""
    kwargs = parse_env_kwargs(cfg.env_kwargs)
    writer = None
    if video_dir is not None:
        from core.run.video import EpisodeWriter, check_video_dir, frame_format

        fmt = frame_format()
        check_video_dir(Path(video_dir))
        kwargs = {**kwargs, "render_mode": "rgb_array"}
    env = BatchedParallelEnv(cfg.env, kwargs, 1, seed)
    if video_dir is not None:
        Path(video_dir).mkdir(parents=True, exist_ok=True)
        writer = EpisodeWriter(Path(video_dir), fmt, float(env.envs[0].metadata.get("render_fps") or 10), cfg.env)
        writer.add(env.envs[0].render())
    agent_id = torch.arange(len(env.agents), device=device).unsqueeze(0)  # (1, A)
    returns: list[float] = []
    while len(returns) < episodes:
        action = actor.act(torch.as_tensor(env.obs, device=device), agent_id, deterministic)
        out = env.step(action.cpu().numpy())
        returns.extend(float(np.mean(ep.returns)) for ep in out.episodes)
        if writer is not None:
            if out.episodes:  # the env was reset within the step: the frame below is the next episode's first
                writer.finish()
            if len(returns) < episodes:
                writer.add(env.envs[0].render())
    if writer is not None:
        writer.finish()
    env.close()
    return returns[:episodes]
