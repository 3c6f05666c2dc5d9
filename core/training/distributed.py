"""Data-parallel training over processes (``torchrun --nproc_per_node N -m core run ...``).

Each rank runs its own envs with seed ``seed + rank``; after every backward pass the gradients are
averaged across ranks (one coalesced all-reduce), so with parameters broadcast from rank 0 at the
start and identical optimiser updates, every rank holds the same weights.  Episode statistics and
update metrics are shared before the health monitors read them, so remedies are taken in lockstep.
Rank 0 alone writes the run directory.  Backend: NCCL on CUDA, gloo on CPU.  Multi-node runs use
torchrun's rendezvous (``--nnodes``, ``--rdzv-endpoint``); nothing here depends on the node count.
"""
from __future__ import annotations

import os
from typing import Iterable, Sequence

import torch
import torch.distributed as dist
# Imported before any process group exists, on purpose: this module gives ten functions the default argument
# ``group=group.WORLD``, evaluated at import.  Imported later (torch.optim imports it through torch._dynamo when
# the Trainer builds its optimiser), those defaults hold the live group, destroy_process_group cannot free it,
# and its gloo threads and sockets survive into interpreter shutdown, where a rank exiting beside a peer that
# still holds the connections aborts ("terminate called without an active exception"; issue 46).
import torch.distributed.nn.functional  # noqa: F401
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


class Distributed:
    """Process-group helpers; every method is a no-op when running a single process."""

    def __init__(self, device: torch.device):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.enabled, self.device = self.world_size > 1, device
        if self.enabled and not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    @staticmethod
    def local_device(device: torch.device) -> torch.device:
        """One GPU per local rank under torchrun."""
        if device.type == "cuda" and "LOCAL_RANK" in os.environ:
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        return device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def broadcast_modules(self, modules: Iterable[torch.nn.Module]) -> None:
        """Copy rank 0's parameters and buffers to every rank."""
        if self.enabled:
            for m in modules:
                for t in list(m.parameters()) + list(m.buffers()):
                    dist.broadcast(t.data, src=0)

    def average_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        if not self.enabled:
            return
        grads = [p.grad for p in params if p.grad is not None]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat /= self.world_size
        for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(synced)

    def sum_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Sum the gradients across ranks (one coalesced all-reduce), for a loss each rank divides by a normaliser
        of the whole global batch (dapo_lm's token-level loss): the sum is then the one-process gradient.  A rank
        that back-propagated nothing in this step (no rows of the minibatch) contributes zeros."""
        if not self.enabled:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [p.grad for p in params]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(synced)

    def all_true(self, flag: bool) -> bool:
        """True only if ``flag`` is true on every rank (keeps control flow identical)."""
        if not self.enabled:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return bool(t.item() == 1.0)

    def any_true(self, flag: bool) -> bool:
        return not self.all_true(not flag)

    def gather(self, items: list) -> list:
        """Concatenation of every rank's list, in rank order (the same on all ranks)."""
        if not self.enabled:
            return items
        out: list = [None] * self.world_size
        dist.all_gather_object(out, items)
        return [x for part in out for x in part]

    def mean_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        """Average scalar metrics (same keys on every rank) across ranks."""
        if not self.enabled or not metrics:
            return metrics
        return {k: v / self.world_size for k, v in self.sum_metrics(metrics).items()}

    def sum_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        """Sum scalar metrics (same keys on every rank) across ranks."""
        if not self.enabled or not metrics:
            return metrics
        keys = sorted(metrics)
        t = torch.tensor([metrics[k] for k in keys], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return dict(zip(keys, t.tolist()))

    def close(self, finished: bool = True) -> None:
        """Leave the process group, which frees it and stops its gloo threads (see the import of
        ``torch.distributed.nn.functional`` above).  After a normal finish every rank first meets the others at
        a barrier, so none tears down its connections while a peer may still be completing the last
        collective.  After an error a peer may be stuck in a collective that will never complete, so the
        barrier is skipped."""
        if self.enabled and dist.is_initialized():
            if finished:
                dist.barrier()
            dist.destroy_process_group()
