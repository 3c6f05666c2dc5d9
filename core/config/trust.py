"""Envs named by files run no code unless the user confirms them.

An env string such as ``module:factory`` makes the toolkit import ``module`` and call ``factory`` with the run's env
kwargs.  Typed on the command line or passed from Python, that is the user's own choice; read from a file (a run
directory's config.yaml when a run is reopened by ``dapo eval``, ``dapo run --resume`` or ``core.load``, or a
``--config``/``--recipe`` YAML) it would let whoever wrote the file run code.  Such an env is refused unless the user
confirms it with ``--trust-env`` (Python: ``trust_env=True``) or names the env again.  Registered ids (Gymnasium's
registry, ``ALE/``, ``MiniGrid-``, mpe2 tasks) import nothing the file chooses and need no confirmation; each family
says which of its env strings do (``core.envs.make.imports_code``, ``dapo_ma.envs.imports_code``).
"""
from __future__ import annotations

from typing import Callable

from core.config.errors import ConfigError


def check_env(env: str, source: str, trusted: bool, imports_code: Callable[[str], bool]) -> None:
    """One line naming ``env``, the file it came from and the fix, unless ``trusted`` or ``env`` imports nothing."""
    if not trusted and imports_code(env):
        raise ConfigError(f"{source} names env '{env}', which would import and run code named by that file; if you "
                          "trust the file, pass --trust-env (Python: trust_env=True)")
