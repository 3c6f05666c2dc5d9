"""The NumPy update backend: :func:`core.training.update.ppo_update` for small CPU MLP actor-critics.

At minibatch 64 a torch gradient step on two 64x64 MLPs is mostly per-op dispatch (forward, autograd,
clipping and Adam: ~1.1 ms on the 2-core build machine, 320 of them per 2048-step iteration), while the
arithmetic is a few microseconds.  Here the same step is written out in NumPy with hand-derived
gradients: a HalfCheetah update (320 steps) took 0.28 s instead of 1.13 s in
``experiments/results/throughput`` (4.0x; SPS x1.7-2.1 end to end).

The maths is :mod:`core.algo.losses` exactly, including the subgradient conventions of torch's ``min``/``max``
(a tie splits the gradient half and half) and ``clamp`` (gradient 1 on the closed interval), and Adam is
torch's (``fused=True``) update rule, run by torch's own fused CPU kernel on the flat vectors' memory (one pass in
C++: measured, MiniGrid's whole update 20% and HalfCheetah's 8% faster than with the rule written in NumPy, which
stays as the fallback).  During an update parameters and Adam moments live in flat NumPy vectors; they are
written back into the torch tensors when it ends (also after a non-finite loss), so checkpoints, health monitors
and the torch path always see the same weights.
``tests/test_update_backends.py`` runs one table of hand-worked cases against both backends and
``tests/test_numpy_update.py`` checks longer updates against the torch reference.

Supports a :class:`~core.algo.networks.GaussianActor` or :class:`~core.algo.networks.CategoricalActor` and a
:class:`~core.algo.networks.Critic` whose nets are tanh MLPs, on the CPU, on one process;
:meth:`NumpyUpdate.supports` says when.  The networks' forward and backward passes and the action heads (log-probs
and entropies forward, their gradients back) are :mod:`core.algo.numpy_policy`'s, which NumPy acting also runs.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np
import torch
from torch import nn

from core.algo.numpy_policy import Layers, head_class, linear_parameters, mlp_backward, mlp_forward, supported
from core.algo.proximal import Proximal
from core.algo.sampler import DynamicSampler
from core.training.update import UpdateSettings

Array = np.ndarray


def _pick(a: Array, b: Array, ga: Array, gb: Array, take_smaller: bool) -> Array:
    """Gradient of elementwise ``min(a, b)`` (or ``max``) given the operands' gradients: torch's rule,
    the chosen operand's gradient, half of each on a tie."""
    first = a < b if take_smaller else a > b
    return np.where(first, ga, np.where(a == b, 0.5 * (ga + gb), gb))


@functools.lru_cache(maxsize=None)
def fused_adam() -> bool:
    """Whether this torch has the fused CPU Adam kernel that ``torch.optim.Adam(fused=True)`` runs
    (``torch._fused_adam_``, torch >= 2.4): one pass over the vectors in C++, where the same rule in NumPy takes a
    dozen (4x the time at MiniGrid's 135k parameters, 2-4x at HalfCheetah's 10k)."""
    try:
        zeros = [torch.zeros(1) for _ in range(4)]
        torch._fused_adam_(*([z] for z in zeros), [], [torch.ones(())], lr=0.1, beta1=0.9, beta2=0.999,
                           weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
        return True
    except (AttributeError, RuntimeError, NotImplementedError, TypeError):
        return False


class NumpyUpdate:
    """``update(sampler, clip_ranges, settings, proximal) -> (train metrics, finite)``, as ``ppo_update`` (the
    :class:`core.training.update_backend.UpdateBackend` interface).

    During an update the parameters and Adam moments live in flat float32 vectors (actor, log-std, then
    critic: each optimiser group is one slice), so clipping and Adam are a few
    vector operations per step; they are copied back into the torch tensors when the update ends."""

    def __init__(self, actor: nn.Module, critic: nn.Module, optimizer: torch.optim.Optimizer, separate: bool):
        self.actor, self.critic, self.optimizer = actor, critic, optimizer
        self.params = [*actor.parameters(), *critic.parameters()]
        grouped = [p for g in optimizer.param_groups for p in g["params"]]
        if (len(optimizer.param_groups) != 2 or len(grouped) != len(self.params)
                or any(p is not q for p, q in zip(grouped, self.params))):
            raise ValueError("NumpyUpdate expects an optimiser with an actor group and a critic group")
        if any(g.get("weight_decay") or g.get("amsgrad") or g.get("maximize") for g in optimizer.param_groups):
            raise ValueError("NumpyUpdate implements plain Adam (no weight decay, amsgrad or maximize)")
        sizes = [p.numel() for p in self.params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        n_actor = int(self.offsets[len(list(actor.parameters()))])
        self.opt_slices = [slice(0, n_actor), slice(n_actor, int(self.offsets[-1]))]
        self.separate = separate  # clip the actor and critic gradients each on its own (else jointly)
        self.head_class = head_class(actor)
        self.head_params = self.head_class.parameters(actor)
        # the order _loss_and_grads produces gradients in (layer by layer), mapped to self.params' order
        produced = [*linear_parameters(actor.net), *self.head_params, *linear_parameters(critic.net)]
        self.grad_order = [next(i for i, q in enumerate(produced) if q is p) for p in self.params]
        self.step_count = torch.zeros(())  # the fused kernel reads Adam's step count from a tensor

    name = "numpy"

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device, distributed: bool) -> bool:
        """CPU tanh MLPs (:func:`core.algo.numpy_policy.supported`) on one process."""
        return not distributed and supported(actor, critic, device)

    def _views(self, flat: Array) -> list[Array]:
        return [flat[a:b].reshape(p.shape) for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:])]

    def update(self, sampler: DynamicSampler, clip_ranges: tuple[float, float, Optional[float]],
               s: UpdateSettings, proximal: Optional[Proximal] = None) -> tuple[dict[str, float], bool]:
        flat = np.concatenate([p.detach().numpy().ravel() for p in self.params])
        states = [self.optimizer.state[p] for p in self.params]
        m1, m2 = (np.concatenate([st[k].numpy().ravel() if st else np.zeros(p.numel(), np.float32)
                                  for st, p in zip(states, self.params)]) for k in ("exp_avg", "exp_avg_sq"))
        first = [g["params"][0] for g in self.optimizer.param_groups]
        steps = [float(self.optimizer.state[p]["step"]) if self.optimizer.state[p] else 0.0 for p in first]
        view = {id(p): v for p, v in zip(self.params, self._views(flat))}

        def layers(net: nn.Sequential) -> Layers:
            ps = linear_parameters(net)
            return [(view[id(w)].T, view[id(b)]) for w, b in zip(ps[0::2], ps[1::2])]  # W^T: views, stepped in place

        self.actor_net, self.critic_net = layers(self.actor.net), layers(self.critic.net)
        self.head = self.head_class(*(view[id(p)] for p in self.head_params))
        data = [x.numpy() for x in sampler.window()]
        lag_weights = None
        if proximal is not None:  # ratio against the proximal policy, surrogate weighted (core.algo.proximal)
            data[2], lag_weights = proximal.logp.numpy(), proximal.weight.numpy()
        totals, names, n = None, [], 0
        # the groups' settings are fixed during an update and both counts rise together: decided once
        one_pass = self._one_adam(steps)

        def means() -> dict[str, float]:
            return {} if totals is None else dict(zip(names, (totals / n).tolist()))

        try:
            for _ in range(s.num_epochs):
                for idx, weights in sampler.minibatches(s.num_minibatches, s.minibatch_size):
                    i = idx.numpy()
                    mb = [x[i] for x in data]
                    parts, grad = self._loss_and_grads(mb, None if weights is None else weights.numpy(),
                                                       clip_ranges, s, None if lag_weights is None else lag_weights[i],
                                                       sampler.weights_scope)
                    if not np.isfinite(parts["loss"]):  # never let NaN/Inf reach the weights
                        return means(), False
                    parts.update(self._clip(grad, s.max_grad_norm))
                    steps = [t + 1 for t in steps]
                    if one_pass:  # equal settings and counts: the two groups' steps are one pass
                        self._adam(self.optimizer.param_groups[0], steps[0], flat, grad, m1, m2)
                    else:
                        for k, sl in enumerate(self.opt_slices):
                            self._adam(self.optimizer.param_groups[k], steps[k], flat[sl], grad[sl], m1[sl], m2[sl])
                    names = [f"train/{k}" for k in parts]
                    values = np.array([float(v) for v in parts.values()])
                    totals = values if totals is None else totals + values
                    n += 1
            return means(), True
        finally:  # the torch tensors get every step taken, however the update ended
            self._write_back(flat, m1, m2, steps)

    def _write_back(self, flat: Array, m1: Array, m2: Array, steps: list[float]) -> None:
        # self.params is the optimiser's groups in order (checked in __init__): group k spans opt_slices[k]
        for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:]):
            with torch.no_grad():
                p.copy_(torch.from_numpy(flat[a:b].reshape(p.shape)))
            t = steps[0 if a < self.opt_slices[0].stop else 1]
            if t == 0:
                continue
            st = self.optimizer.state[p]
            if not st:  # created as torch's Adam creates it, so either path can continue the other
                st.update(step=torch.zeros((), dtype=torch.float32), exp_avg=torch.zeros_like(p),
                          exp_avg_sq=torch.zeros_like(p))
            st["step"].fill_(t)
            st["exp_avg"].copy_(torch.from_numpy(m1[a:b].reshape(p.shape)))
            st["exp_avg_sq"].copy_(torch.from_numpy(m2[a:b].reshape(p.shape)))

    def _clip(self, grad: Array, max_norm: float) -> dict[str, float]:
        """Per-group norm clipping, the rule of :func:`core.training.update.clip_grad_norms_`; returns its
        diagnostics (pre-clip norm of each network, the factor applied to the actor's gradient)."""
        norms = [float(np.sqrt(np.dot(grad[sl], grad[sl]))) for sl in self.opt_slices]  # actor, critic
        # joint: the whole vector's norm follows from the two parts (as in clip_grad_norms_), no third pass
        groups = zip(self.opt_slices, norms) if self.separate else [(slice(None), math.hypot(*norms))]
        scales = []
        for sl, norm in groups:
            scales.append(min(1.0, max_norm / (norm + 1e-6)))
            grad[sl] *= np.float32(scales[-1])
        return {"grad_norm_actor": norms[0], "grad_norm_critic": norms[1], "grad_scale_actor": scales[0]}

    def _one_adam(self, steps: list[float]) -> bool:
        """Whether both optimiser groups take the same Adam step (lr, betas, eps and step count), so that one pass
        over the whole flat vector is the same arithmetic as one per group."""
        a, c = self.optimizer.param_groups
        return steps[0] == steps[1] and all(a[k] == c[k] for k in ("lr", "betas", "eps"))

    def _adam(self, group: dict, t: float, p: Array, g: Array, m1: Array, m2: Array) -> None:
        """torch's Adam step (``fused=True``'s rule; no weight decay, no amsgrad) on one optimiser group's slices, in
        place: torch's own fused CPU kernel run on the arrays' memory where this torch has one (:func:`fused_adam`),
        else the same rule in NumPy."""
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        if fused_adam():
            as_tensor = torch.from_numpy  # no copies: the kernel steps the flat vectors in place
            torch._fused_adam_([as_tensor(p)], [as_tensor(g)], [as_tensor(m1)], [as_tensor(m2)], [],
                               [self.step_count.fill_(t)], lr=lr, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=eps,
                               amsgrad=False, maximize=False)
            return
        m1 += (1 - beta1) * (g - m1)
        m2 *= beta2
        m2 += (1 - beta2) * g * g
        denom = np.sqrt(m2)
        denom /= np.sqrt(1 - beta2 ** t)
        denom += eps
        p -= (lr / (1 - beta1 ** t)) * m1 / denom

    def _loss_and_grads(self, mb: list[Array], w: Optional[Array], clip_ranges, s: UpdateSettings,
                        lag_w: Optional[Array] = None, scope: str = "all"):
        """The losses of :mod:`core.algo.losses` on one minibatch and the gradient of
        ``L = L_pi + vf_coef * L_V - ent_coef * H`` as one flat vector (parameter order).  The sampler's weights
        ``w`` ``(M,)`` act on every term (``scope`` "all") or on the surrogate only ("surrogate"); ``lag_w``
        ``(M,)`` weights the surrogate only (:class:`core.algo.proximal.Proximal`)."""
        obs, actions, logp_old, v_old, adv, returns = mb
        eps_low, eps_high, eps_v = clip_ranges
        m = obs.shape[0]
        all_w = w if scope == "all" else None
        if s.norm_adv:  # core.algo.losses.normalised_advantages: statistics under the loss-wide sample weights
            if all_w is None:
                centred = adv - adv.sum() / m
                adv = centred / (np.sqrt((centred * centred).sum() / (m - 1)) + 1e-8)
            else:
                v1 = all_w.sum()
                centred = adv - (all_w * adv).sum() / v1
                adv = centred / (np.sqrt((all_w * centred * centred).sum() / (v1 - (all_w * all_w).sum() / v1)) + 1e-8)
        one = np.ones(m, dtype=np.float32)
        actor_inputs, critic_inputs = [], []
        out = mlp_forward(self.actor_net, obs, actor_inputs)                      # (M, A) mean or (M, n) logits
        logp, entropies = self.head.log_prob(out, actions)                        # (M,), (M,)
        log_ratio = logp - logp_old
        ratio = np.exp(log_ratio)
        clipped = np.clip(ratio, 1 - eps_low, 1 + eps_high)
        inside = ((ratio >= 1 - eps_low) & (ratio <= 1 + eps_high)).astype(np.float32)
        unclipped_term, clipped_term = ratio * adv, clipped * adv
        surrogate = np.minimum(unclipped_term, clipped_term)
        pw = one if w is None else w
        sw = pw if lag_w is None else pw * lag_w                                  # surrogate weights (M,)
        aw = one if all_w is None else all_w                                      # entropy and value weights (M,)
        pi_loss = -(surrogate * sw).sum() / m
        g_ratio = _pick(unclipped_term, clipped_term, adv, adv * inside, take_smaller=True)
        g_logp = -(sw / m) * g_ratio * ratio                                      # dL/dlogp (M,)
        entropy = float((entropies * aw).sum() / m)
        g_out, g_head = self.head.backward(g_logp, -(s.ent_coef / m) * aw)        # dL/dH_i = -c_H w_i / M
        # value: E[(V-R)^2] or E[max((V-R)^2, (V_clip-R)^2)], V_clip = V_old + clip(V - V_old, -eps, eps)
        v = mlp_forward(self.critic_net, obs, critic_inputs)[:, 0]
        err = (v - returns) ** 2
        if eps_v is None:
            per_sample, g_v, clip_frac = err, 2 * (v - returns), 0.0
        else:
            v_clip = v_old + np.clip(v - v_old, -eps_v, eps_v)
            in_v = (np.abs(v - v_old) <= eps_v).astype(np.float32)
            err_clip = (v_clip - returns) ** 2
            per_sample = np.maximum(err, err_clip)
            g_v = _pick(err, err_clip, 2 * (v - returns), 2 * (v_clip - returns) * in_v, take_smaller=False)
            clip_frac = 1.0 - float(in_v.sum()) / m
        v_loss = (per_sample * aw).sum() / m
        g_v = (s.vf_coef * aw / m) * g_v
        # explained variance 1 - Var(R - V) / Var(R) (population variances, as np.var; dot products: cheaper calls)
        dr = returns - returns.sum() / m
        de = returns - v
        de -= de.sum() / m
        var_r = float(np.dot(dr, dr))
        ev = 1 - float(np.dot(de, de)) / max(var_r, 1e-30) if var_r > 0 else float("nan")
        loss = pi_loss + s.vf_coef * v_loss - s.ent_coef * entropy
        grads = [*mlp_backward(self.actor_net, actor_inputs, g_out), *g_head,
                 *mlp_backward(self.critic_net, critic_inputs, g_v[:, None])]
        parts = {"policy_loss": pi_loss, "value_loss": v_loss, "entropy": entropy, "loss": loss,
                 "clip_fraction": 1.0 - inside.sum() / m, "approx_kl": ((ratio - 1) - log_ratio).sum() / m,
                 "ratio_mean": ratio.sum() / m, "ratio_min": ratio.min(), "ratio_max": ratio.max(),
                 "value_clip_fraction": clip_frac, "explained_variance": ev}
        return parts, np.concatenate([grads[i].ravel() for i in self.grad_order]).astype(np.float32, copy=False)
