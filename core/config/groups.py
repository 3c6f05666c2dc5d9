"""Option groups that several families' configs share, declared once and mixed into each config with flat field
names (``TrainConfig(collapse_window=5)``, ``--collapse-window``, ``collapse_window:`` in config.yaml).

A config places a group's fields with a ``# +GroupName`` line in its body (:func:`core.config.fields.field_docs`),
so that ``--help``, docs/options.md and config.yaml list them where the family declares that group.  A family keeps a
default of its own by declaring the field again (dataclass field override).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, Optional


@dataclass
class RunOptions:
    """Where and how a run of dapo_ma, dapo_dt or dapo_lm is made: seed, recipes, device, directory, threads.  (The
    Gymnasium family's config lists these options in two places, so it declares them itself.)"""

    # --- experiment
    seed: int = 1
    """Seed of torch, NumPy and every random draw of the run (0 .. 2**32-1)."""
    recipe: tuple[str, ...] = ()
    """Recipes applied on top of the algorithm's, in order. Names of shipped recipes (dapo recipes) or YAML paths."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N (auto: CUDA when available)."""
    run_dir: Optional[str] = None
    """Output directory (default: runs/<env>__<algo>__s<seed>__<time>). One writer at a time holds it."""
    torch_threads: int = 1
    """CPU threads for torch."""


@dataclass
class ProgressOptions:
    """How often a run of dapo_ma, dapo_dt or dapo_lm checkpoints and shows its progress (core.training.loop)."""

    # --- runtime
    checkpoint_every_s: float = 60.0
    """Seconds between checkpoints. One is also written after the first iteration, at the end and on Ctrl-C."""
    progress: bool = True
    """Show progress: a bar on a terminal, else a line every few s."""
    progress_every_s: float = 10.0
    """Seconds between progress lines when not on a terminal."""


@dataclass
class WandbOptions:
    """Logging to Weights & Biases beside metrics.csv and TensorBoard (:class:`core.training.logging.MetricLogger`);
    every family mixes it in.  wandb is an optional extra: pip install 'dapo-toolkit[wandb]'."""

    # --- runtime
    wandb: bool = False
    """Also log every metrics.csv scalar and the config to Weights & Biases (needs the wandb package)."""
    wandb_project: Optional[str] = None
    """W&B project (default: wandb's own, e.g. WANDB_PROJECT)."""
    wandb_group: Optional[str] = None
    """W&B group of the run, e.g. one name for all seeds of an experiment."""
    wandb_mode: Literal["online", "offline", "disabled"] = "online"
    """online sends to the W&B server; offline writes only under the run directory (or WANDB_DIR), for wandb sync
    later."""


WANDB_FIELDS = tuple(f.name for f in fields(WandbOptions))
"""Options that say where a run's metrics go, not what the run is: they may change on --resume."""


@dataclass
class SamplerOptions:
    """The temperature rule and importance weights of core's dynamic sampler (:mod:`core.algo.sampler`)."""

    # --- sampler
    temperature_mode: Literal["fixed", "ema", "decay", "learnable"] = "fixed"
    """Temperature rule of the draws. The ema rule follows the spread of the weights; learnable holds an ESS target.
    Fixed is the default: on HalfCheetah at 300k steps decay scored 1129 vs fixed's 1391
    (experiments/results/mujoco/ablation), and in a pilot on simple_spread decay (floor 0.2) made sampling so peaked
    (ESS ~0.1) that learning regressed."""
    temperature_init: float = 1.0
    """Initial temperature T (1: at most e-fold oversampling)."""
    temperature_decay: float = 0.99
    """Factor on T per update under the decay rule."""
    temperature_min: float = 0.2
    """Floor of T under the decay, ema and learnable rules."""
    ess_target: float = 0.5
    """Normalised effective sample size the learnable rule holds."""
    temperature_lr: float = 0.05
    """Adam learning rate of log T under the learnable rule."""
    importance_correction: bool = False
    """Weight drawn samples by 1/(N p_i): uniform sampling's gradient."""


@dataclass
class HealthOptions:
    """The switch of the health monitors and the collapse monitor's window (:mod:`core.algo.health`)."""

    # --- health
    health_monitors: Optional[bool] = None
    """Collapse and divergence monitors (preset: dapo, dapo-ma, dapo-maddpg). Each event is remedied and logged
    (docs/algorithms.md); dapo_ma watches every agent with its own pair; the non-finite guard is always on."""
    collapse_window: int = 10
    """Episodes in the collapse monitor's recent-return mean. The multi-agent default is 100: MPE returns are noisy."""
    collapse_drop: float = 0.7
    """Collapse: the recent mean lost this share of the best gain."""


@dataclass
class DivergenceOptions:
    """The value-divergence monitor (:class:`core.algo.health.ValueDivergenceMonitor`)."""

    # --- health
    divergence_window: int = 10
    """Updates of rising value loss that count as divergence. In dapo_ma each agent's value error is watched."""
    divergence_factor: float = 10.0
    """Divergence also needs the loss above this x its window minimum."""


HEALTH_FIELDS = tuple(f.name for group in (HealthOptions, DivergenceOptions) for f in fields(group)
                      if f.name != "health_monitors")
"""The shared health options that act only with --health-monitors (each family adds its own collapse options)."""
