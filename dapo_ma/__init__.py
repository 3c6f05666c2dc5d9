"""Multi-agent DAPO on PettingZoo: per-agent clip parameters over one shared buffer (docs/algorithms.md).

Python API: :func:`train`, :func:`load` (agents with ``predict`` and ``evaluate``); config: :class:`MAConfig`.
Algorithms: ippo, mappo, dapo-ma (one on-policy trainer, :mod:`dapo_ma.ppo`, differing by recipes) and maddpg
(:mod:`dapo_ma.maddpg`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from core.config.lazy import lazy_exports

# public name -> its module, imported on first use (PEP 562): the family's registration (family.py) and ``dapo --help``
# import no trainer and no torch
_EXPORTS = {
    "train": "dapo_ma.api", "load": "dapo_ma.api", "MAAgent": "dapo_ma.api", "MAConfig": "dapo_ma.config",
    "MA_ALGOS": "dapo_ma.config",
}

if TYPE_CHECKING:
    from dapo_ma.api import MAAgent, load, train
    from dapo_ma.config import MA_ALGOS, MAConfig

__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = ["train", "load", "MAAgent", "MAConfig", "MA_ALGOS"]
