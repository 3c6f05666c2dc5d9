"""``dapo dataset d4rl``: D4RL-style datasets (Fu et al. 2020) from one of the toolkit's own runs on a MuJoCo (or any
flat-Box) env, written with Minari's own API and scored as D4RL scores them.

From a finished ``dapo run --snapshot-every N`` directory (its final ``checkpoint.pt`` and its ``snapshots/``, which
hold the policy at step 0 and every ``N`` env steps after):

- ``expert``: whole episodes of the final policy until ``steps`` are recorded;
- ``medium``: the same from the snapshot whose return is closest to a third of the way from the random policy's
  return to the expert's (D4RL's "about 1/3 of the expert"; in normalised units, so that negative returns such as
  Pendulum's work), each snapshot scored over ``select_episodes`` episodes; or the snapshot ``medium_step`` names;
- ``medium-replay``: what the run played until the medium snapshot, re-played: every snapshot from step 0 acts for
  the env steps the run gave it (``[s_j, s_{j+1})``), in one stream of the run's ``num_envs`` envs, switching policy
  mid-episode as training did; the finished episodes are kept.  The run's own episodes are not on disk (its
  collector stores normalised observations and scaled rewards, in another process with ``--overlap``), so this is a
  re-creation: the same sequence of policies for the same number of steps, with fresh env draws, and the policy held
  fixed within each snapshot interval where training updated it every rollout (``--snapshot-every`` equal to the
  rollout size makes the two the same);
- ``medium-expert``: the medium and expert episodes together.

Actions are sampled from the policies' Gaussians (D4RL sampled its SAC policies) and clipped to the bounds, as the env
executed them.  Each dataset records Minari's ``ref_min_score`` (the mean return of uniformly random actions over
``ref_episodes`` episodes) and ``ref_max_score`` (the mean return of the expert dataset's episodes), so that
``dapo run --algo dt`` reports ``normalised_score = 100 (R - ref_min) / (ref_max - ref_min)`` (0 random, 100 expert).
All four datasets are written at the end, after every check and every episode: a refused or failed command writes
nothing.
"""
from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import gymnasium as gym
import numpy as np
import torch

from core.config.errors import ConfigError
from dapo_dt.data import METADATA_KEY, _local_datasets

KINDS = ("expert", "medium", "medium-replay", "medium-expert")
SNAPSHOT = re.compile(r"step_(\d+)\.pt")


@dataclass
class D4RLOptions:
    """What ``dapo dataset d4rl`` makes (flags of the same names)."""

    env: str
    """Env the run was trained on (a flat Box observation, Box action env such as Hopper-v5)."""
    run: Path
    """The finished run directory ('dapo run --snapshot-every N')."""
    namespace: str
    """Minari namespace: the datasets are NAMESPACE/expert-v0, NAMESPACE/medium-v0, ... ."""
    steps: int = 200_000
    """Env steps of the expert and the medium dataset each (whole episodes; medium-expert holds both)."""
    medium_step: Optional[int] = None
    """The snapshot step of the medium policy (default: chosen by return, see the module docstring)."""
    select_episodes: int = 5
    """Episodes each snapshot is scored over when the medium policy is chosen."""
    ref_episodes: int = 20
    """Episodes of uniformly random actions for ref_min_score."""
    num_envs: int = 8
    """Parallel envs of the expert and medium collection (medium-replay uses the run's num_envs)."""
    seed: int = 0
    """Env and action-noise seed."""


class Policy(NamedTuple):
    step: int
    actor: torch.nn.Module
    obs_norm: object  # core.envs.rollout.ObsNormalizer, frozen

    def act(self, obs: np.ndarray, act_space: gym.spaces.Box) -> np.ndarray:
        """Raw observations ``(N, D)`` -> sampled actions ``(N, A)`` clipped to the bounds."""
        o = torch.as_tensor(self.obs_norm(obs))
        a = self.actor.sample(o)[0].float().numpy()
        return np.clip(a, act_space.low, act_space.high).astype(np.float32)


class Episode(NamedTuple):
    observations: np.ndarray  # (T + 1, D) float32
    actions: np.ndarray       # (T, A) float32, as executed
    rewards: np.ndarray       # (T,) float32
    terminated: bool          # the last step ended the episode (else it was truncated)

    @property
    def score(self) -> float:
        return float(self.rewards.sum())


# --- inputs ------------------------------------------------------------------------------------------------------

def snapshots(run: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of the run's snapshots, by step."""
    folder = Path(run) / "snapshots"
    found = [(int(m.group(1)), p) for p in folder.glob("step_*.pt") if (m := SNAPSHOT.fullmatch(p.name))]
    return sorted(found)


def check(o: D4RLOptions):
    """Every input, before anything is played or written: one line each.  Returns the run's config and snapshots."""
    from core.config.options import MAX_SEED
    from core.envs.make import check_env_id, is_atari
    from core.run.rundir import load_run_config
    from dapo_dt.collect import check_dataset_name

    for name, value, low in (("--steps", o.steps, 1), ("--select-episodes", o.select_episodes, 1),
                             ("--ref-episodes", o.ref_episodes, 1), ("--num-envs", o.num_envs, 1)):
        if not low <= value <= 10**9:
            raise ConfigError(f"{name} must be in {low} .. 10**9, got {value}")
    if not 0 <= o.seed <= MAX_SEED:
        raise ConfigError(f"--seed must be in 0 .. {MAX_SEED}, got {o.seed}")
    if is_atari(o.env):
        raise ConfigError(f"--env {o.env}: d4rl datasets are for flat-state envs such as Hopper-v5; Atari datasets: "
                          "'dapo dataset collect'")
    check_env_id(o.env)
    for kind in KINDS:
        check_dataset_name(f"{o.namespace}/{kind}-v0")
    taken = [f"{o.namespace}/{k}-v0" for k in KINDS if f"{o.namespace}/{k}-v0" in _local_datasets()]
    if taken:
        raise ConfigError(f"dataset '{taken[0]}' already exists; choose another --namespace or delete it with "
                          f"minari.delete_dataset('{taken[0]}')")
    run = Path(o.run)
    if not (run / "config.yaml").is_file():
        raise ConfigError(f"--run {run}: expected a run directory written by 'dapo run' (no config.yaml)")
    cfg = load_run_config(run, trust_env=True)  # its env is only compared with --env; nothing makes it
    if cfg.env != o.env:
        raise ConfigError(f"--run {run} was trained on {cfg.env}, not {o.env}; use a run of the same env")
    if cfg.env_kwargs:
        raise ConfigError(f"--run {run} was trained with --env-kwargs {cfg.env_kwargs}; the datasets record the plain "
                          f"env {o.env}")
    if not (run / "checkpoint.pt").is_file():
        raise ConfigError(f"--run {run} has no checkpoint.pt (the expert policy); let the run finish or resume it")
    snaps = snapshots(run)
    if not snaps or snaps[0][0] != 0:
        raise ConfigError(f"--run {run} has no snapshots/step_000000000.pt (the initial policy): train it with "
                          "'dapo run --snapshot-every N' (snapshots are the medium candidates and the replay's policies)")
    final = _final_step(run / "checkpoint.pt")
    snaps = [(s, p) for s, p in snaps if s < final]  # the medium policy and the replay come before the expert's step
    candidates = [s for s, _ in snaps[1:]]
    if not candidates:
        raise ConfigError(f"--run {run} has no snapshot between step 0 and its final step {final}: train it with a "
                          "smaller --snapshot-every")
    if o.medium_step is not None and o.medium_step not in candidates:
        raise ConfigError(f"--medium-step {o.medium_step} is not a snapshot step of {run} between 0 and {final} (have "
                          f"{', '.join(map(str, candidates))})")
    envs = _make(o.env)
    obs_space, act_space = envs.observation_space, envs.action_space
    envs.close()
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1 and isinstance(act_space, gym.spaces.Box)
            and len(act_space.shape) == 1):
        raise ConfigError(f"--env {o.env} has {obs_space} observations and {act_space} actions; d4rl datasets need "
                          "flat Box observations and Box actions")
    return cfg, snaps, obs_space, act_space


def _final_step(path: Path) -> int:
    from core.training.checkpoint import load_checkpoint, require

    state = load_checkpoint(path)
    require(state, ("global_step", "actor", "obs_norm"), path)
    return int(state["global_step"])


def load_policy(path: Path, cfg, obs_space: gym.Space, act_space: gym.Space) -> Policy:
    """The actor and the frozen observation normaliser of a checkpoint or snapshot."""
    from core.algo.networks import build_networks
    from core.envs.rollout import ObsNormalizer
    from core.training.checkpoint import load_checkpoint, load_state, require

    state = load_checkpoint(path)
    require(state, ("actor", "obs_norm"), path)
    actor, _ = build_networks(obs_space, act_space, cfg.hidden_sizes, cfg.precision == "bf16")
    obs_norm = ObsNormalizer(obs_space.shape, cfg.norm_obs)
    load_state(actor, state["actor"], path)
    load_state(obs_norm, state["obs_norm"], path)
    return Policy(int(state.get("global_step", 0)), actor.eval(), obs_norm)


# --- playing -----------------------------------------------------------------------------------------------------

@torch.no_grad()
def play(env_id: str, num_envs: int, seed: int, act: Callable[[np.ndarray, int], np.ndarray], *,
         steps: Optional[int] = None, episodes: Optional[int] = None, stream: Optional[int] = None,
         record: bool = True) -> list[Episode]:
    """Finished episodes of ``num_envs`` sync Gymnasium envs; ``act(obs (N, D), env_steps_so_far) -> (N, A)``.

    Exactly one budget: ``steps`` (new episodes start while fewer steps are recorded; those running finish, so
    long episodes are not cut away), ``episodes`` (``ceil(episodes / num_envs)`` per env: short episodes are not
    favoured) or ``stream`` (stop after this many env steps in all; unfinished episodes are dropped)."""
    from core.envs.backends import make_backend

    envs = make_backend(env_id, num_envs, "sync", seed, training=False)
    quota = [math.ceil(episodes / num_envs) if episodes else 0] * num_envs
    obs = envs.reset(seed)
    live = [_Open(obs[i]) for i in range(num_envs)]
    done: list[tuple[int, int, Episode]] = []  # (episode number within its env, env, episode)
    count = [0] * num_envs
    stepped = recorded = 0
    try:
        while any(e is not None for e in live) and (stream is None or stepped < stream):
            actions = act(obs, stepped)
            step = envs.step(actions)
            stepped += num_envs
            for i, ep in enumerate(live):
                if ep is None:
                    continue
                ep.add(actions[i], float(step.score[i]), record)
                if step.game_over[i]:
                    done.append((count[i], i, ep.close(step.final_obs[i], bool(step.terminated[i]), record)))
                    count[i] += 1
                    recorded += len(ep.rewards)
                    quota[i] -= 1
                    more = (recorded < steps if steps is not None else quota[i] > 0 if episodes else True)
                    live[i] = _Open(step.obs[i]) if more else None  # same-step autoreset: the next one's start
                elif record:
                    ep.obs.append(np.asarray(step.obs[i], np.float32).copy())
            obs = step.obs
    finally:
        envs.close()
    if episodes:  # by order of start, not of end: the first to end would favour short episodes
        done.sort(key=lambda d: d[:2])
    return [e for _, _, e in done][:episodes] if episodes else [e for _, _, e in done]


class _Open:
    def __init__(self, first: np.ndarray):
        self.obs, self.actions, self.rewards = [np.asarray(first, np.float32).copy()], [], []

    def add(self, action: np.ndarray, reward: float, record: bool) -> None:
        if record:
            self.actions.append(np.asarray(action, np.float32).copy())
        self.rewards.append(reward)

    def close(self, final_obs: np.ndarray, terminated: bool, record: bool) -> Episode:
        if record:
            self.obs.append(np.asarray(final_obs, np.float32).copy())
        return Episode(np.stack(self.obs) if record else np.empty(0), np.stack(self.actions) if record else np.empty(0),
                       np.asarray(self.rewards, np.float32), terminated)


def _make(env_id: str) -> gym.Env:
    """``gym.make`` with MuJoCo's warnings shown once (core.envs.mujoco_log), as every env the toolkit makes."""
    from core.envs import mujoco_log

    mujoco_log.show_once(gym.registry.get(env_id))
    return gym.make(env_id)


def random_return(env_id: str, episodes: int, seed: int) -> float:
    """Mean return of uniformly random actions (D4RL's and Minari's ``ref_min_score``)."""
    space = _make(env_id).action_space
    space.seed(seed)
    rng = np.random.default_rng(seed)
    act = lambda obs, _: rng.uniform(space.low, space.high, (len(obs), *space.shape)).astype(np.float32)  # noqa: E731
    return float(np.mean([e.score for e in play(env_id, min(episodes, 8), seed, act, episodes=episodes,
                                                   record=False)]))


def choose_medium(env_id: str, policies: list[Policy], act_space, target: float, episodes: int, seed: int,
                  log: Callable[[str], None]) -> Policy:
    """The snapshot whose mean return over ``episodes`` is closest to ``target`` (the earliest of ties)."""
    best, best_gap = None, math.inf
    for p in policies:
        score = float(np.mean([e.score for e in play(env_id, min(episodes, 8), seed,
                                                      lambda o, _, p=p: p.act(o, act_space),
                                                      episodes=episodes, record=False)]))
        log(f"  snapshot step {p.step}: return {score:.1f} (target {target:.1f})")
        if abs(score - target) < best_gap:
            best, best_gap = p, abs(score - target)
    return best


def replay(env_id: str, policies: list[Policy], until: int, num_envs: int, seed: int, act_space) -> list[Episode]:
    """The run's first ``until`` env steps re-played: policy ``j`` (snapshot step ``s_j``) acts while
    ``s_j <= steps so far < s_{j+1}``."""
    starts = np.array([p.step for p in policies])

    def act(obs, stepped):
        return policies[int(np.searchsorted(starts, stepped, side="right")) - 1].act(obs, act_space)

    return play(env_id, num_envs, seed, act, stream=until)


# --- writing -----------------------------------------------------------------------------------------------------

def buffers(episodes: list[Episode]) -> list:
    from minari.data_collector import EpisodeBuffer

    out = []
    for i, e in enumerate(episodes):
        T = len(e.rewards)
        last = [False] * (T - 1)
        out.append(EpisodeBuffer(id=i, observations=e.observations, actions=e.actions, rewards=e.rewards.tolist(),
                                 terminations=last + [e.terminated], truncations=last + [not e.terminated]))
    return out


def write(name: str, env_id: str, episodes: list[Episode], ref: tuple[float, float], ref_episodes: int,
          meta: dict, description: str):
    import minari

    with warnings.catch_warnings():  # Minari warns about every metadata field left unset
        warnings.simplefilter("ignore")
        ds = minari.create_dataset_from_buffers(
            dataset_id=name, buffer=buffers(episodes), env=env_id, algorithm_name="dapo-toolkit d4rl-style",
            author="dapo-toolkit", ref_min_score=ref[0], ref_max_score=ref[1],
            num_episodes_average_score=ref_episodes, description=description, data_format="hdf5")
    ds.storage.update_metadata({METADATA_KEY: json.dumps(meta)})
    return ds


def make(o: D4RLOptions, log: Callable[[str], None] = print) -> dict[str, dict]:
    """Make the four datasets; returns ``{kind: {"name", "episodes", "steps", "return_mean"}}``."""
    cfg, snaps, obs_space, act_space = check(o)
    torch.manual_seed(o.seed)
    ckpt = Path(o.run) / "checkpoint.pt"
    expert = load_policy(ckpt, cfg, obs_space, act_space)
    policies = [load_policy(p, cfg, obs_space, act_space) for _, p in snaps]
    log(f"random reference: {o.ref_episodes} episodes of uniform actions")
    ref_min = random_return(o.env, o.ref_episodes, o.seed)
    log(f"expert: step {expert.step}, {o.steps} steps")
    expert_eps = play(o.env, o.num_envs, o.seed, lambda obs, _: expert.act(obs, act_space), steps=o.steps)
    ref_max = float(np.mean([e.score for e in expert_eps]))
    if not ref_max > ref_min:
        raise ConfigError(f"--run {o.run}: its final policy (mean return {ref_max:.1f}) is no better than random "
                          f"({ref_min:.1f}); train it longer before making datasets")
    target = ref_min + (ref_max - ref_min) / 3
    if o.medium_step is not None:
        medium = next(p for p in policies if p.step == o.medium_step)
    else:
        log(f"choosing the medium snapshot ({o.select_episodes} episodes each)")
        medium = choose_medium(o.env, policies[1:], act_space, target, o.select_episodes, o.seed + 1, log)
    log(f"medium: step {medium.step}, {o.steps} steps")
    medium_eps = play(o.env, o.num_envs, o.seed + 2, lambda obs, _: medium.act(obs, act_space), steps=o.steps)
    log(f"medium-replay: the run's first {medium.step} env steps re-played by {sum(p.step < medium.step for p in policies)} "
        "snapshots")
    replay_eps = replay(o.env, [p for p in policies if p.step < medium.step], medium.step, cfg.num_envs, o.seed + 3,
                        act_space)
    if not replay_eps:
        raise ConfigError(f"the run's first {medium.step} steps finish no episode; pass a later --medium-step")
    data = {"expert": expert_eps, "medium": medium_eps, "medium-replay": replay_eps,
            "medium-expert": medium_eps + expert_eps}
    base = {"env_id": o.env, "source_run": str(Path(o.run).resolve()), "expert_step": expert.step,
            "medium_step": medium.step, "medium_target_return": target, "ref_min_score": ref_min,
            "ref_max_score": ref_max, "seed": o.seed, "actions": "sampled from the policy, clipped to the bounds"}
    out = {}
    for kind, eps in data.items():
        name = f"{o.namespace}/{kind}-v0"
        write(name, o.env, eps, (ref_min, ref_max), o.ref_episodes, {**base, "kind": kind},
              f"{o.env} {kind} (D4RL-style) from the dapo run {Path(o.run).name}")
        out[kind] = {"name": name, "episodes": len(eps), "steps": int(sum(len(e.rewards) for e in eps)),
                     "return_mean": float(np.mean([e.score for e in eps]))}
    return out
