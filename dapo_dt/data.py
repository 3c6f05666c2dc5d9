"""Offline datasets in Minari's format (docs/algorithms.md section 6): the toolkit's own Atari datasets and any
Minari dataset with flat Box observations and Box or Discrete actions.

Nothing is downloaded: :mod:`dapo_dt.collect` writes the toolkit's Atari datasets.  Each of their steps stores only
the newest 84x84 grey frame (4x less disk than the stack); the 4-frame stacks the policies saw are rebuilt on
loading here, padding an episode's start with its first frame exactly as EnvPool's stack (and core/envs/atari.py's)
does at reset.

Any other Minari dataset is read as it is (from Minari's local store by name, or from a directory): no toolkit
metadata is needed.  Its env is the one the dataset records (``env_spec``); Box actions are scaled to [-1, 1] by
the action space's bounds (:func:`scale_actions`), observations are kept raw here (the model normalises them by
the dataset's mean and std).
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from core.config.errors import ConfigError
from core.run.evaluation import sample_std

FRAME_SPACE = gym.spaces.Box(0, 255, (84, 84), np.uint8)
STACK = 4
METADATA_KEY = "dapo_toolkit"


def _datasets_root() -> Path:
    """Minari's local dataset folder (``MINARI_DATASETS_PATH``, default ~/.minari/datasets), found without creating
    it: Minari's own lookup makes the folder, and a refused command must leave no trace."""
    return Path(os.environ.get("MINARI_DATASETS_PATH") or Path.home() / ".minari" / "datasets")


def _local_datasets() -> list[str]:
    """Ids of the local datasets, found by their ``data/metadata.json`` files.  Not ``minari.list_local_datasets``:
    it reads every dataset's metadata and warns about each malformed one on every call (issue 57)."""
    root = _datasets_root()
    if not root.is_dir():
        return []
    found = []
    for meta_file in root.rglob("data/metadata.json"):
        rel = meta_file.parent.parent.relative_to(root)
        if rel.parts and not any(p.startswith(".") for p in rel.parts):
            found.append(rel.as_posix())
    return sorted(found)


def dataset_label(name: Optional[str] = None, path: Optional[str] = None) -> str:
    return f"'{name}'" if path is None else f"at {path}"


def _data_dir(path: str) -> Path:
    """The ``data`` folder (holding metadata.json) of a dataset directory given as the dataset's folder or its data/."""
    p = Path(path).expanduser()
    for d in (p, p / "data"):
        if (d / "metadata.json").is_file():
            return d
    raise ConfigError(f"--dataset-path {path} is not a Minari dataset (no metadata.json in it or in its data/ "
                      "folder)")


def load(name: Optional[str] = None, path: Optional[str] = None):
    """A Minari dataset by local ``name`` or by directory ``path``, checked (:func:`check_spaces`); returns it and its
    metadata: the toolkit's own (``dapo dataset collect``) or, for any other dataset, ``{"env_id": ...}`` from the
    env spec the dataset records (``None`` when it records none).  One-line errors for anything unusable."""
    import minari

    if (name is None) == (path is None):
        raise ConfigError("give a dataset by --dataset NAME (Minari's local store) or by --dataset-path DIR, not both")
    if path is None:
        if name not in _local_datasets():
            known = ", ".join(_local_datasets()) or "none"
            raise ConfigError(f"no local Minari dataset '{name}' (local: {known}); make one with "
                              "'dapo dataset collect', or give a dataset folder with --dataset-path "
                              "(MINARI_DATASETS_PATH sets the local folder)")
        data_dir = _datasets_root() / name / "data"
    else:
        data_dir = _data_dir(path)
    label = dataset_label(name, path)
    try:
        with warnings.catch_warnings():  # Minari warns about versions and missing optional fields
            warnings.simplefilter("ignore")
            ds = minari.MinariDataset(data_dir)
            env_spec = ds.spec.env_spec
    except Exception as e:
        raise ConfigError(f"dataset {label} is unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                          "; write it again") from e
    raw = ds.storage.metadata.get(METADATA_KEY)
    if raw is not None:
        try:
            meta = json.loads(raw)
            assert isinstance(meta, dict) and isinstance(meta.get("env_id"), str)
        except Exception as e:
            raise ConfigError(f"dataset {label}: its {METADATA_KEY} metadata is malformed; write it again") from e
    else:
        meta = {"env_id": None if env_spec is None else env_spec.id}
    check_spaces(ds.observation_space, ds.action_space, label)
    if ds.total_episodes < 1:
        raise ConfigError(f"dataset {label} has no episodes")
    return ds, meta


def is_frames(space: gym.Space) -> bool:
    return space == FRAME_SPACE


def check_spaces(obs_space: gym.Space, act_space: gym.Space, label: str) -> None:
    """Datasets the DT reads: 84x84 uint8 Atari frames with Discrete actions (``dapo dataset collect``), or flat
    Box observations with Discrete or 1-D Box actions of finite bounds."""
    if is_frames(obs_space):
        if not isinstance(act_space, gym.spaces.Discrete):
            raise ConfigError(f"dataset {label} has Atari frames but {act_space} actions; frames need Discrete actions")
        return
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        raise ConfigError(f"dataset {label} has observation space {obs_space}; dt reads flat Box observations or the "
                          "84x84 uint8 Atari frames of 'dapo dataset collect'")
    if isinstance(act_space, gym.spaces.Discrete):
        return
    if not (isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1):
        raise ConfigError(f"dataset {label} has action space {act_space}; dt reads Discrete or 1-D Box actions")
    if not (np.all(np.isfinite(act_space.low)) and np.all(np.isfinite(act_space.high))
            and np.all(act_space.high > act_space.low)):
        raise ConfigError(f"dataset {label} has Box actions without finite bounds ({act_space}); they are scaled "
                          "to [-1, 1] by the bounds")


def scale_actions(a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Box actions to [-1, 1] by the action space's bounds, clipped: ``2 (a - low) / (high - low) - 1``."""
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    return np.clip(2.0 * (np.asarray(a, np.float32) - low) / (high - low) - 1.0, -1.0, 1.0).astype(np.float32)


def unscale_actions(a: np.ndarray, low, high) -> np.ndarray:
    """The inverse of :func:`scale_actions` for actions in [-1, 1]: ``low + (a + 1) (high - low) / 2``."""
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    return (low + (np.asarray(a, np.float32) + 1.0) * 0.5 * (high - low)).astype(np.float32)


def info(name: str, path: Optional[str] = None) -> dict:
    """Episodes, steps and the return distribution of a dataset (``dapo dataset info``)."""
    ds, meta = load(name, path)
    returns = np.array([float(np.sum(ep.rewards)) for ep in ds.iterate_episodes()])
    lengths = np.array([len(ep.rewards) for ep in ds.iterate_episodes()])
    q = np.percentile(returns, [0, 25, 50, 75, 100])
    out = {"name": name or str(path), "env_id": meta["env_id"], "episodes": int(len(returns)),
           "steps": int(lengths.sum()), "return_mean": float(returns.mean()), "return_std": sample_std(returns),  # ddof=1
           "return_min_q25_median_q75_max": [round(float(x), 2) for x in q],
           "episode_length_mean": float(lengths.mean()), "episode_length_max": int(lengths.max()),
           "observation_space": str(ds.observation_space), "action_space": str(ds.action_space)}
    ref = reference_scores(ds.storage.metadata)
    if ref is not None:
        out.update({"ref_min_score": ref[0], "ref_max_score": ref[1]})
    if "policies" in meta:  # made by 'dapo dataset collect'
        out.update({"policies": meta["policies"], "epsilon": meta.get("epsilon")})
    return out


def reference_scores(metadata: dict) -> Optional[tuple[float, float]]:
    """Minari's (and D4RL's) ``(ref_min_score, ref_max_score)``: the mean returns of a random and an expert policy;
    None when the dataset lacks either or they do not bracket a range (then no normalised score is reported)."""
    try:
        low, high = float(metadata["ref_min_score"]), float(metadata["ref_max_score"])
    except (KeyError, TypeError, ValueError):
        return None
    return (low, high) if math.isfinite(low) and math.isfinite(high) and high > low else None


def normalised_score(score: float, ref: Optional[tuple[float, float]]) -> float:
    """D4RL's normalised score ``100 (score - random) / (expert - random)``: 0 random, 100 expert; NaN without
    reference scores."""
    if ref is None:
        return math.nan
    return 100.0 * (score - ref[0]) / (ref[1] - ref[0])


class DTBatch(NamedTuple):
    """K-step windows for the Decision Transformer, left-padded; every field ``(B, K, ...)``."""

    rtg: Tensor        # (B, K) return-to-go the model is conditioned on (raw score units)
    frames: Tensor     # (B, K, 4, 84, 84) uint8 frame stacks, or (B, K, D) float32 raw states (flat datasets)
    actions: Tensor    # (B, K) long, or (B, K, A) float32 Box actions scaled to [-1, 1]
    timesteps: Tensor  # (B, K) long, step index within the episode
    mask: Tensor       # (B, K) bool, False for padding
    returns: Tensor    # (B, K) hindsight return G_t V regresses on: rewards-to-go discounted by value_gamma


@dataclass
class Trajectories:
    """All episodes of a dataset in memory: observations ``frames`` (``T_e + 1`` per episode): ``(F, 84, 84)`` uint8
    Atari frames or ``(F, D)`` float32 states; actions ``(S,)`` int64 or ``(S, A)`` float32 in [-1, 1] and rtg
    ``(S,)`` over the ``S`` steps, and per-step indices into the frames.  ``value_targets`` ``(S,)`` is the hindsight
    return a value head learns, ``sum_k gamma^k r_{t+k}`` (the return-to-go for gamma 1)."""

    frames: np.ndarray
    actions: np.ndarray
    rtg: np.ndarray
    timesteps: np.ndarray
    frame_index: np.ndarray   # (S,) index of step t's newest frame in ``frames``
    episode_start: np.ndarray  # (S,) index of the episode's first step (in step units)
    episode_first_frame: np.ndarray  # (S,) index of the episode's first frame
    episode_returns: np.ndarray
    n_actions: int  # Discrete actions: their number; Box actions: 0
    env_id: str
    value_targets: np.ndarray
    cond_rtg: Optional[np.ndarray] = None  # (S,) acting-time return-to-go inputs of online games
    action_low: Optional[np.ndarray] = None   # (A,) Box bounds the actions were scaled by (Box actions only)
    action_high: Optional[np.ndarray] = None
    episode_lengths: Optional[np.ndarray] = None  # (E,)
    ref_scores: Optional[tuple[float, float]] = None  # D4RL's (random, expert) mean returns, when the dataset has them

    @property
    def atari(self) -> bool:
        """Atari frame stacks (else flat states)."""
        return self.frames.ndim == 3

    @property
    def act_dim(self) -> int:
        """Box actions: their size; Discrete actions: 0."""
        return 0 if self.actions.ndim == 1 else int(self.actions.shape[1])

    @classmethod
    def from_dataset(cls, name: Optional[str] = None, max_steps: Optional[int] = None, value_gamma: float = 1.0,
                     path: Optional[str] = None, env_id: Optional[str] = None,
                     top_fraction: Optional[float] = None) -> "Trajectories":
        """Load dataset ``name`` (or the one at ``path``); ``max_steps`` keeps whole episodes, in a fixed shuffled
        order, up to that many steps (data-size studies; the shuffle keeps the mixture of policies and game lengths);
        ``top_fraction`` then keeps the best ``ceil(fraction * episodes)`` episodes by return (``pct-bc``).
        ``env_id`` names the env when the dataset records none."""
        ds, meta = load(name, path)
        label = dataset_label(name, path)
        frames = is_frames(ds.observation_space)
        box = isinstance(ds.action_space, gym.spaces.Box)
        episodes, n_steps = [], 0
        order = np.random.default_rng(0).permutation(ds.total_episodes) if max_steps else range(ds.total_episodes)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for ep in ds.storage.get_episodes([int(ds.episode_indices[i]) for i in order]):
                    T = len(ep["actions"])
                    if max_steps is not None and n_steps + T > max_steps and n_steps > 0:
                        break
                    episodes.append(_episode_arrays(ep, frames, box, ds.action_space, label))
                    n_steps += T
        except ConfigError:
            raise
        except Exception as e:
            raise ConfigError(f"dataset {label}: cannot read its episodes ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}); every episode needs observations, "
                              "actions, rewards, terminations and truncations") from e
        if top_fraction is not None:
            returns = np.array([float(r.sum()) for _, _, r in episodes])
            keep = max(1, math.ceil(top_fraction * len(episodes)))
            best = np.sort(np.argsort(-returns, kind="stable")[:keep])  # the best episodes, in dataset order
            episodes = [episodes[i] for i in best]
        n_actions = 0 if box else int(ds.action_space.n)
        out = cls.from_episodes(episodes, n_actions, env_id or meta["env_id"], value_gamma=value_gamma)
        out.ref_scores = reference_scores(ds.storage.metadata)
        if box:
            out.action_low = np.asarray(ds.action_space.low, np.float32)
            out.action_high = np.asarray(ds.action_space.high, np.float32)
        return out

    @classmethod
    def from_episodes(cls, episodes: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], n_actions: int,
                      env_id: str, cond_rtg: Optional[Sequence[np.ndarray]] = None,
                      value_gamma: float = 1.0) -> "Trajectories":
        """From ``(observations (T+1, ...), actions (T, ...), rewards (T,))`` per episode; ``cond_rtg`` gives
        per-episode return-to-go inputs that differ from the hindsight ones (online games)."""
        frames, actions, rtg, ts, fidx, start, ffirst, rets, vt = [], [], [], [], [], [], [], [], []
        n_frames = n_steps = 0
        for f, a, r in episodes:
            T = len(a)
            frames.append(f)
            actions.append(a)
            rtg.append(np.cumsum(r[::-1])[::-1].astype(np.float32))
            vt.append(rtg[-1] if value_gamma == 1.0 else discounted_returns(r, value_gamma))
            ts.append(np.arange(T))
            fidx.append(n_frames + np.arange(T))
            start.append(np.full(T, n_steps))
            ffirst.append(np.full(T, n_frames))
            rets.append(float(r.sum()))
            n_frames += len(f)
            n_steps += T
        cat = np.concatenate
        return cls(cat(frames), cat(actions), cat(rtg), cat(ts), cat(fidx), cat(start), cat(ffirst),
                   np.array(rets), n_actions, env_id, cat(vt),
                   None if cond_rtg is None else cat(cond_rtg).astype(np.float32),
                   episode_lengths=np.array([len(a) for _, a, _ in episodes]))

    @property
    def num_steps(self) -> int:
        return len(self.actions)

    def state_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std ``(D,)`` of every observation of the data (flat states), the std plus 1e-6 (DT paper)."""
        x = self.frames.astype(np.float64)
        return x.mean(0).astype(np.float32), (x.std(0) + 1e-6).astype(np.float32)

    def stacks(self, steps: np.ndarray) -> np.ndarray:
        """4-frame stacks ``(*steps.shape, 4, 84, 84)`` for step indices, padded with the episode's first frame."""
        newest = self.frame_index[steps][..., None]                       # (..., 1)
        idx = np.maximum(newest - np.arange(STACK - 1, -1, -1), self.episode_first_frame[steps][..., None])
        return self.frames[idx]

    def observations(self, steps: np.ndarray) -> np.ndarray:
        """What the model sees at step indices: frame stacks (:meth:`stacks`) or states ``(*steps.shape, D)``."""
        return self.stacks(steps) if self.atari else self.frames[self.frame_index[steps]]

    def sample(self, batch: int, K: int, rng: np.random.Generator, device: torch.device) -> DTBatch:
        """``batch`` windows ending at uniformly drawn steps, each holding up to ``K`` steps of its episode."""
        end = rng.integers(0, self.num_steps, batch)                      # (B,) last step of each window
        steps = end[:, None] - np.arange(K - 1, -1, -1)                    # (B, K)
        mask = steps >= self.episode_start[end][:, None]
        steps = np.where(mask, steps, end[:, None])                       # padding reuses a real index
        def t(x, dtype=None):
            return torch.as_tensor(x, device=device, dtype=dtype)
        rtg = t(np.where(mask, self.rtg[steps], 0.0), torch.float32)
        cond = rtg if self.cond_rtg is None else t(np.where(mask, self.cond_rtg[steps], 0.0), torch.float32)
        returns = t(np.where(mask, self.value_targets[steps], 0.0), torch.float32)
        am = mask if self.actions.ndim == 1 else mask[..., None]
        return DTBatch(cond, t(self.observations(steps)), t(np.where(am, self.actions[steps], 0)),
                       t(np.where(mask, self.timesteps[steps], 0)), t(mask), returns)


def _episode_arrays(ep: dict, frames: bool, box: bool, act_space: gym.Space, label: str):
    """``(observations (T+1, ...), actions (T, ...), rewards (T,))`` of one raw Minari episode, checked."""
    obs, actions = np.asarray(ep["observations"]), np.asarray(ep["actions"])
    rewards = ep.get("rewards")
    terms = ep.get("terminations")
    T = len(actions)
    if rewards is None or terms is None or len(rewards) != T or len(terms) != T:
        raise ConfigError(f"dataset {label}: episode {ep.get('id')} lacks rewards or terminations for its {T} steps; "
                          "the DT needs both")
    rewards = np.asarray(rewards, np.float32)
    if len(obs) != T + 1 or T < 1:
        raise ConfigError(f"dataset {label}: episode {ep.get('id')} has {len(obs)} observations for {T} actions "
                          "(Minari stores T+1)")
    if not np.all(np.isfinite(rewards)) or (not frames and not np.all(np.isfinite(obs))):
        raise ConfigError(f"dataset {label}: episode {ep.get('id')} has non-finite rewards or observations")
    if frames:
        return obs.astype(np.uint8), actions.astype(np.int64), rewards
    if box:
        a = scale_actions(actions.reshape(T, -1), act_space.low, act_space.high)
    else:
        a = actions.reshape(T).astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= act_space.n):  # an embedding lookup would fail mid-training
            raise ConfigError(f"dataset {label}: episode {ep.get('id')} has actions outside 0 .. {act_space.n - 1}")
    return obs.astype(np.float32), a, rewards


def discounted_returns(rewards: np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = sum_k gamma^k r_{t+k}`` within one episode ``(T,)`` -> ``(T,)`` float32."""
    out, g = np.empty(len(rewards), np.float32), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        g = rewards[t] + gamma * g
        out[t] = g
    return out


def return_scale(traj: Trajectories) -> float:
    """Scale for returns-to-go fed to the network: the largest absolute episode return (>= 1)."""
    return max(1.0, float(np.abs(traj.episode_returns).max()))
