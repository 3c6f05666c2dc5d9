"""``dapo dataset collect``: the toolkit's own Atari datasets (docs/algorithms.md section 6).  Whole games played
with a mixture of behaviour policies (PPO/DAPO checkpoints or snapshots of several qualities) plus epsilon noise,
written with Minari's own API; each step stores only the newest 84x84 grey frame (:mod:`dapo_dt.data` rebuilds the
stacks on loading)."""
from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np
import torch

from core.algo.networks import build_networks
from core.config.errors import ConfigError
from core.envs.backends import EnvPoolBackend, make_backend
from core.envs.make import check_env_id, is_atari
from core.training.checkpoint import load_checkpoint
from core.training.logging import Progress
from dapo_dt.data import FRAME_SPACE, METADATA_KEY, STACK, _local_datasets


def load_policy(path: Path, env_id: str, obs_space: gym.Space, act_space: gym.Space) -> tuple[torch.nn.Module, str]:
    """The actor saved in a run directory (its checkpoint.pt) or in one of its snapshots/step_<N>.pt
    files; returns the actor in eval mode and a label for the dataset metadata."""
    from core.run.rundir import load_run_config

    path = Path(path)
    if path.is_dir():
        run_dir, ckpt = path, path / "checkpoint.pt"
    else:  # RUN_DIR/checkpoint.pt or RUN_DIR/snapshots/step_<N>.pt
        run_dir, ckpt = (path.parent if path.name == "checkpoint.pt" else path.parent.parent), path
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"--policy {path}: expected a run directory written by 'dapo run' "
                          "(or a snapshots/step_<N>.pt file inside one)")
    cfg = load_run_config(run_dir, trust_env=True)  # its env is only compared with --env; nothing makes it
    if cfg.env != env_id:
        raise ConfigError(f"--policy {path} was trained on {cfg.env}, not {env_id}; use a policy of the same game")
    if cfg.norm_obs:
        raise ConfigError(f"--policy {path} normalises observations (--norm-obs), which Atari policies do not use")
    state = load_checkpoint(ckpt)
    if not isinstance(state, dict) or not isinstance(state.get("actor"), dict):
        found = (f"its 'actor' is a {type(state['actor']).__name__}" if isinstance(state, dict) and "actor" in state
                 else "it has no 'actor' entry" if isinstance(state, dict) else f"it holds a {type(state).__name__}")
        raise ConfigError(f"--policy {path}: {ckpt} is not a policy checkpoint of 'dapo run' ({found}); pass a run "
                          "directory or one of its snapshots/step_<N>.pt")
    actor, _ = build_networks(obs_space, act_space, cfg.hidden_sizes, cfg.precision == "bf16")
    try:
        actor.load_state_dict(state["actor"])
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"--policy {path} was trained on {cfg.env}, whose policy does not fit "
                          f"this env's {act_space} actions; use a policy of the same game") from e
    return actor.eval(), f"{run_dir.name}@{state.get('global_step', '?')}"


def episode_buffer(idx: int, frames: np.ndarray, actions: Sequence[int], rewards: Sequence[float],
                   truncated: bool = False):
    """A Minari episode: frames ``(T+1, 84, 84)`` uint8, ``T`` actions and raw rewards."""
    from minari.data_collector import EpisodeBuffer

    n = len(actions)
    return EpisodeBuffer(id=idx, observations=np.asarray(frames, np.uint8), actions=np.asarray(actions, np.int64),
                         rewards=[float(r) for r in rewards], terminations=[False] * (n - 1) + [not truncated],
                         truncations=[False] * (n - 1) + [truncated])


class _Episode:
    def __init__(self, first_frame: np.ndarray, policy: int):
        self.frames, self.actions, self.rewards, self.policy = [first_frame], [], [], policy


@torch.no_grad()
def collect(env_id: str, policies: Sequence[Path], epsilon: float, steps: int, name: str, seed: int = 0,
            num_envs: int = 8, greedy: bool = True, progress: bool = True):
    """Play whole games until ``steps`` steps are recorded; returns the dataset.

    Env ``i`` plays with policy ``i mod P``; each action is uniform-random with probability ``epsilon``,
    else the policy's argmax (``greedy``) or a sample.  Rewards are the raw game rewards.  Once the
    budget is reached no new game starts but the running ones finish (dropping them would favour short
    games, i.e. weak policies).
    """
    _check_collect_args(env_id, policies, epsilon, steps, name, num_envs)
    envs = make_backend(env_id, num_envs, "auto", seed, training=False)  # EnvPool if installed, else ale-py
    same_step = not isinstance(envs, EnvPoolBackend)  # Gymnasium: a game's last step shows the next game
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    actors, labels = zip(*(load_policy(p, env_id, obs_space, act_space) for p in policies))
    owner = np.arange(num_envs) % len(actors)
    rng = np.random.default_rng(seed)
    obs = envs.reset(seed)
    live: list[Optional[_Episode]] = [_Episode(obs[i, -1].copy(), int(owner[i])) for i in range(num_envs)]
    done_eps: list[tuple[_Episode, bool]] = []
    recorded = 0
    torch.set_num_threads(1)  # batches of a few frames: one thread is fastest (and leaves cores to EnvPool)
    bar = Progress(steps, 0, f"collect {name}", progress)
    t0, stepped = time.perf_counter(), 0  # every env step, also those of games finished after the budget
    while any(ep is not None for ep in live):
        frames = torch.as_tensor(obs)
        actions = np.empty(num_envs, np.int64)
        for p, actor in enumerate(actors):
            idx = np.flatnonzero(owner == p)
            a = actor.mode(frames[idx]) if greedy else actor.sample(frames[idx])[0]
            actions[idx] = a.numpy()
        noisy = rng.random(num_envs) < epsilon
        actions[noisy] = rng.integers(0, act_space.n, int(noisy.sum()))
        step = envs.step(actions)
        stepped += num_envs
        for i in range(num_envs):
            if not step.valid[i]:  # EnvPool's reset step: its observation starts the next episode
                live[i] = _Episode(step.obs[i, -1].copy(), int(owner[i])) if recorded < steps else None
                continue
            ep = live[i]
            if ep is None:  # this env is done collecting
                continue
            ep.actions.append(int(actions[i]))
            ep.rewards.append(float(step.score[i]))
            ep.frames.append((step.final_obs if step.game_over[i] else step.obs)[i, -1].copy())
            if step.game_over[i]:
                done_eps.append((ep, bool(step.truncated[i] and not step.terminated[i])))
                recorded += len(ep.actions)
                # whole games only: once the budget is recorded, the games in progress still play to their end
                going = sum(e is not None for e in live) - 1
                note = f"budget recorded; finishing {going} games in progress" if recorded >= steps and going else ""
                bar.update(recorded, stepped / max(time.perf_counter() - t0, 1e-9), float(sum(ep.rewards)), note)
                if same_step:  # this step's observation is the next game's first
                    live[i] = _Episode(step.obs[i, -1].copy(), int(owner[i])) if recorded < steps else None
        obs = step.obs
    bar.close()
    envs.close()
    meta = {"env_id": env_id, "frame_stack": STACK, "epsilon": epsilon, "greedy": greedy, "seed": seed,
            "policies": list(labels), "episode_policy": [ep.policy for ep, _ in done_eps]}
    buffers = [episode_buffer(i, np.stack(ep.frames), ep.actions, ep.rewards, trunc)
               for i, (ep, trunc) in enumerate(done_eps)]
    return write_dataset(name, buffers, act_space, meta,
                         f"{env_id}: whole games by {len(actors)} policies, epsilon {epsilon}, greedy {greedy}")


def write_dataset(name: str, buffers: list, act_space: gym.Space, meta: dict, description: str):
    """Write episode buffers (frames ``(T+1, 84, 84)`` uint8) as Minari dataset ``name`` with our metadata."""
    import minari

    try:
        with warnings.catch_warnings():  # Minari warns about every metadata field left unset
            warnings.simplefilter("ignore", UserWarning)
            ds = minari.create_dataset_from_buffers(
                dataset_id=name, buffer=buffers, observation_space=FRAME_SPACE, action_space=act_space,
                algorithm_name="dapo-toolkit behaviour mixture", author="dapo-toolkit", data_format="hdf5",
                jpeg_encoding=False,  # lossless frames: JPEG artefacts would change what the policies saw
                description=description)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"cannot create dataset '{name}': {e}") from e
    ds.storage.update_metadata({METADATA_KEY: json.dumps(meta)})
    return ds


def check_dataset_name(name: str) -> None:
    """Minari ids need a version suffix; a bad id fails only after collection and leaves a folder that
    breaks Minari's listing, so it is checked first."""
    from minari.dataset.minari_dataset import DATASET_ID_RE

    m = DATASET_ID_RE.match(name)
    if m is None or not name.rsplit("-v", 1)[-1].isdigit():
        raise ConfigError(f"--name '{name}' is not a Minari dataset id; use [namespace/]name-v<N>, e.g. pong/mixed-v0")


def _check_collect_args(env_id: str, policies: Sequence[Path], epsilon: float, steps: int, name: str,
                        num_envs: int) -> None:
    check_dataset_name(name)
    if num_envs < len(policies):
        raise ConfigError(f"--num-envs {num_envs} is smaller than the {len(policies)} policies: some would never "
                          f"play; use --num-envs >= {len(policies)}")
    if not is_atari(env_id):
        raise ConfigError(f"--env {env_id}: datasets are made for Atari ids such as ALE/Pong-v5")
    check_env_id(env_id)
    if not policies:
        raise ConfigError("give at least one --policy RUN_DIR (a run trained with 'dapo run' on this env)")
    if not 0 <= epsilon <= 1:
        raise ConfigError(f"--epsilon must be in [0, 1], got {epsilon}")
    if steps < 1:
        raise ConfigError(f"--steps must be >= 1, got {steps}")
    if name in _local_datasets():
        raise ConfigError(f"dataset '{name}' already exists; choose another --name or delete it with "
                          f"minari.delete_dataset('{name}')")
