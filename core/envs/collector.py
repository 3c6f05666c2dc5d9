"""The rollout collector in its own process, for ``--overlap`` on CPU.

A worker *thread* cannot overlap collection with a NumPy/torch update of small MLPs: both are mostly
Python-level work under the GIL (measured: overlap by thread was 15% *slower* than no overlap on
HalfCheetah x8 envs, ``experiments/results/throughput``).  A worker *process* runs on the other core:
while the learner updates on rollout k, it steps the envs and acts (NumPy acting) for rollout k+1.

Protocol over one pipe, one request at a time:

- ``("collect", (actor weights, critic weights, obs-norm stats, reward-scaler stats))`` -> rollout as
  NumPy arrays, last values, finished episodes and the updated normaliser statistics.  The learner's
  process owns the statistics between rollouts (checkpoints, evaluation) and sends them with every
  request, so a resumed run continues from the checkpoint's statistics.
- ``("state", None)`` / ``("load", state)``: :meth:`core.envs.rollout.Collector.state_dict` and its inverse
  (envs, current observations, episode counters, the acting RNG), for exact resume.

The worker builds its envs, networks and :class:`~core.envs.rollout.Collector` from a :class:`WorkerSpec`
with the same seed as an in-process collector would, so both produce the same rollouts (tested).
"""
from __future__ import annotations

import multiprocessing as mp
import sys
import traceback
import weakref
from typing import NamedTuple, Optional

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import nn

from core.envs.rollout import NumpyActing
from core.envs.rollout import ObsNormalizer, RewardScaler
from core.envs.rollout import Collector, Rollout


class WorkerSpec(NamedTuple):
    """What the worker needs to rebuild the collector (all picklable)."""

    env_id: str
    num_envs: int
    backend: str
    seed: int
    num_steps: int
    norm_obs: bool
    norm_reward: bool
    gamma: float
    hidden_sizes: tuple[int, ...]
    env_kwargs: Optional[dict] = None


def _numpy_state(module: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def _serve(conn, spec: WorkerSpec) -> None:
    """The worker's loop (runs in the child process)."""
    from core.envs.backends import make_backend
    from core.algo.networks import build_networks

    torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")
    try:
        envs = make_backend(spec.env_id, spec.num_envs, spec.backend, spec.seed, env_kwargs=spec.env_kwargs)
        actor, critic = build_networks(envs.single_observation_space, envs.single_action_space, spec.hidden_sizes)
        obs_norm = ObsNormalizer(envs.single_observation_space.shape, spec.norm_obs)
        reward_scaler = RewardScaler(spec.num_envs, spec.gamma, spec.norm_reward)
        collector = Collector(envs, spec.num_steps, obs_norm, reward_scaler, torch.device("cpu"), spec.seed,
                              numpy_acting=True)
        conn.send(("ok", obs_norm.state_dict()))  # the first observations are already in the statistics
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            command, arg = conn.recv()
        except EOFError:  # the learner is gone
            return
        try:
            if command == "close":
                envs.close()
                return
            if command == "collect":
                actor_state, critic_state, norm_state, scaler_state = arg
                actor.load_state_dict({k: torch.from_numpy(v) for k, v in actor_state.items()})
                critic.load_state_dict({k: torch.from_numpy(v) for k, v in critic_state.items()})
                obs_norm.load_state_dict(norm_state)
                reward_scaler.load_state_dict(scaler_state)
                rollout, last_values, episodes = collector.collect(actor, critic)
                reply = ([x.numpy() for x in rollout], last_values.numpy(), episodes,
                         obs_norm.state_dict(), reward_scaler.state_dict())
            elif command == "state":
                reply = collector.state_dict()
            elif command == "load":
                collector.load_state_dict(arg)
                reply = None
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send(("ok", reply))
        except Exception:
            conn.send(("error", traceback.format_exc()))


def _shutdown(process, conn) -> None:
    try:
        conn.send(("close", None))
    except (OSError, ValueError):
        pass
    process.join(timeout=5)
    if process.is_alive():
        process.terminate()
    conn.close()


class _Pending:
    """A submitted collection; ``result()`` blocks until the worker returns it (as :class:`Collector.collect`)."""

    def __init__(self, owner: "CollectorProcess"):
        self.owner = owner

    def result(self) -> tuple[Rollout, torch.Tensor, list[tuple[float, int]]]:
        arrays, last_values, episodes, norm_state, scaler_state = self.owner._receive()
        self.owner.obs_norm.load_state_dict(norm_state)
        self.owner.reward_scaler.load_state_dict(scaler_state)
        return Rollout(*(torch.from_numpy(x) for x in arrays)), torch.from_numpy(last_values), episodes


class CollectorProcess:
    """:class:`~core.envs.rollout.Collector`'s interface (``collect``, ``state_dict``, ``load_state_dict``), run
    in a child process; ``submit(actor, critic)`` starts a collection and returns at once.

    ``obs_norm`` and ``reward_scaler`` are the learner's objects: every result writes the worker's
    updated statistics into them, every request sends theirs to the worker."""

    def __init__(self, spec: WorkerSpec, obs_norm: ObsNormalizer, reward_scaler: RewardScaler):
        self.obs_norm, self.reward_scaler = obs_norm, reward_scaler
        # fork where the platform has it (as torch's DataLoader workers): starts at once and needs no
        # ``if __name__ == "__main__"`` guard in the user's script; the child only calls single-threaded
        # torch/NumPy (set below) and MuJoCo.  spawn elsewhere (macOS, Windows).
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() and sys.platform != "darwin" else "spawn")
        self.conn, child = ctx.Pipe()
        # daemon: the worker never outlives the learner, even after a crash (no env subprocesses inside:
        # :meth:`supports` excludes the async backend)
        self.process = ctx.Process(target=_serve, args=(child, spec), daemon=True, name="dapo-collector")
        self.process.start()
        child.close()
        self._finalizer = weakref.finalize(self, _shutdown, self.process, self.conn)
        self.obs_norm.load_state_dict(self._receive())

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device, backend: str, distributed: bool) -> bool:
        """CPU MLP policies that act in NumPy, on one process, with in-process envs (sync or EnvPool)."""
        return (NumpyActing.supports(actor, critic, device) and backend != "async" and not distributed
                and all(p.dtype == torch.float32 for p in [*actor.parameters(), *critic.parameters()]))

    def _died(self) -> RuntimeError:
        self.process.join(timeout=5)
        return RuntimeError(f"the rollout worker process died (exit code {self.process.exitcode}); "
                            "rerun without --overlap to see the error in this process")

    def _send(self, command: str, arg) -> None:
        try:
            self.conn.send((command, arg))
        except (BrokenPipeError, ConnectionResetError):
            raise self._died() from None

    def _receive(self):
        try:
            status, payload = self.conn.recv()
        except EOFError:
            raise self._died() from None
        if status == "error":
            raise RuntimeError(f"the rollout worker failed:\n{payload}")
        return payload

    def submit(self, actor: nn.Module, critic: nn.Module) -> _Pending:
        self._send("collect", (_numpy_state(actor), _numpy_state(critic), self.obs_norm.state_dict(),
                               self.reward_scaler.state_dict()))
        return _Pending(self)

    def collect(self, actor: nn.Module, critic: nn.Module):
        return self.submit(actor, critic).result()

    def state_dict(self) -> dict:
        self._send("state", None)
        return self._receive()

    def load_state_dict(self, s: dict) -> None:
        self._send("load", s)
        self._receive()

    def close(self) -> None:
        self._finalizer()
