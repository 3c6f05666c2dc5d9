"""Checks of what a run may ask of the machine, before anything is made: env sizes, memory, the device, W&B."""
from __future__ import annotations

import os
from typing import Optional

from core.config.errors import ConfigError, require as _require, shown


# env kwargs that size an episode or a world, as envs commonly name them: each must be a whole number in these bounds
# (0 makes episodes that end before a step, or none; a huge one allocates or steps for minutes before failing)
ENV_SIZE_KWARGS = {"max_steps": 10**8, "max_episode_steps": 10**8, "max_cycles": 10**8, "size": 1000, "N": 100,
                   "num_agents": 100, "n_agents": 100, "num_good": 100, "num_adversaries": 100, "num_obstacles": 100}


def check_env_sizes(kwargs: Optional[dict], limits: Optional[dict] = None) -> None:
    """One line for an env kwarg of :data:`ENV_SIZE_KWARGS` (or ``limits``) that is not a whole number in 1 .. its
    bound: refused before any env is made."""
    for key, bound in (limits or ENV_SIZE_KWARGS).items():
        value = (kwargs or {}).get(key)
        if value is None or isinstance(value, str):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ConfigError(f"--env-kwargs {key}={shown(value)} must be a whole number in 1 .. {bound}")
        if value < 1:
            raise ConfigError(f"--env-kwargs {key}={shown(value)} must be >= 1")
        if value > bound:
            raise ConfigError(f"--env-kwargs {key}={shown(value)} is beyond the sane limit of {bound}")


def available_memory(device: str = "cpu") -> Optional[int]:
    """Bytes a run may still allocate: the host's available memory (``MemAvailable``), or a CUDA device's total; None
    when unknown."""
    if str(device).startswith("cuda"):
        try:
            import torch

            return torch.cuda.get_device_properties(torch.device(device)).total_memory
        except Exception:
            return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_memory(need: int, what: str, fix: str, device: str = "cpu") -> None:
    """One line, before anything is allocated or created, when ``what`` would need more than 80% of the memory
    :func:`available_memory` reports."""
    avail = available_memory(device)
    if avail is not None and need > 0.8 * avail:
        raise ConfigError(f"{what} needs about {need / 2**30:.1f} GiB, more than the {avail / 2**30:.1f} GiB of memory "
                          f"available; {fix}")


def check_device(device: str) -> None:
    """auto, cpu, cuda or cuda:N, and CUDA present when asked for."""
    name, _, index = device.partition(":")
    _require(device in ("auto", "cpu", "cuda") or (name == "cuda" and index.isdigit()),
             f"--device must be auto, cpu, cuda or cuda:N, got '{device}'")
    if name == "cuda":
        import torch

        _require(torch.cuda.is_available(), "--device cuda requested but CUDA is not available; use --device auto or cpu")
        _require(not index or int(index) < torch.cuda.device_count(),
                 f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")


def check_wandb(c) -> None:
    """``--wandb`` needs the wandb package (checked before any file is made); the mode must be one W&B knows."""
    if getattr(c, "wandb_mode", "online") not in ("online", "offline", "disabled"):
        raise ConfigError(f"--wandb-mode must be online, offline or disabled, got '{c.wandb_mode}'")
    if getattr(c, "wandb", False):
        import importlib.util

        if importlib.util.find_spec("wandb") is None:
            raise ConfigError("--wandb needs the wandb package: pip install 'dapo-toolkit[wandb]' (or pip install wandb)")
        if c.wandb_mode == "online" and not _wandb_credentials():  # wandb.init would wait for a key at a prompt
            raise ConfigError("--wandb-mode online needs W&B credentials (WANDB_API_KEY or 'wandb login'); or use "
                              "--wandb-mode offline and 'wandb sync' later")


def _wandb_credentials() -> bool:
    """An API key in the environment or a login in ~/.netrc (where 'wandb login' writes it)."""
    import netrc
    import os

    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators(os.environ.get("WANDB_BASE_URL", "api.wandb.ai").split("//")[-1]) is not None
    except (OSError, netrc.NetrcParseError):
        return False
