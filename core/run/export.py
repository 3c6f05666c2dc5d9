"""``dapo export RUN_DIR --onnx FILE``: a Gymnasium run's acting policy as one ONNX graph.

Raw observations in, env actions out: the saved observation normaliser is folded in (``clip((obs - mean) / std,
-10, 10)`` with the run's statistics, as :class:`core.envs.rollout.ObsNormalizer`), Box actions are clipped to the
action space's bounds (as :func:`core.envs.rollout.to_env_actions`).  Inputs and outputs:

- ``obs`` ``(B, *obs_shape)`` in the observation space's dtype (float32, float64 or uint8);
- ``noise`` (``--stochastic`` only): Discrete actions: uniform ``(B,)`` in [0, 1), the action is the first whose
  cumulative probability exceeds it; Box actions: standard normal ``(B, A)``, the action is ``mean + std * noise``
  (:meth:`~core.algo.networks.CategoricalActor.sample_with_noise`).  Given noise keeps the graph deterministic;
  draw it afresh at every step;
- ``action``: int64 ``(B,)`` (Discrete) or float32 ``(B, A)`` (Box).

Deterministic graphs take the argmax / the mean.  MLP actors and the Atari actor (Nature CNN, uint8 frames
``(B, 4, 84, 84)``) are written out layer by layer with ``onnx.helper`` (no torch exporter: no onnxscript, no
tracing).  Needs the ``onnx`` package (``pip install -e '.[export]'``; onnxruntime runs the file).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from core.config.errors import ConfigError

OPSET = 17


def check_output(path: Path, flag: str = "--onnx") -> Path:
    """``path`` if a file can be written there: its folder exists and it is not a folder itself (one line else)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory; give a file name, e.g. {path / 'policy.onnx'}")
    if not path.parent.is_dir():
        raise ConfigError(f"{flag} {path}: directory {path.parent} does not exist; create it first")
    return path


def onnx_module():
    try:
        import onnx
    except ImportError as e:
        raise ConfigError("ONNX export needs the onnx package: pip install onnx onnxruntime "
                          "(or the toolkit's extra: pip install -e '.[export]')") from e
    return onnx


class _Graph:
    """Nodes and initialisers of one graph, with fresh tensor names."""

    def __init__(self, onnx):
        self.onnx, self.h = onnx, onnx.helper
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, value, dtype=np.float32) -> str:
        self.n += 1
        name = f"c{self.n}"
        self.inits.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(np.asarray(value, dtype)), name))
        return name

    def op(self, kind: str, *inputs: str, out: Optional[str] = None, **attrs) -> str:
        self.n += 1
        out = out or f"t{self.n}"
        self.nodes.append(self.h.make_node(kind, list(inputs), [out], **attrs))
        return out

    def layers(self, x: str, modules) -> str:
        """``x`` through Linear / Conv2d / Tanh / ReLU / Flatten modules."""
        for m in modules:
            if isinstance(m, nn.Linear):
                x = self.op("Gemm", x, self.const(_np(m.weight)), self.const(_np(m.bias)), transB=1)
            elif isinstance(m, nn.Conv2d):
                if m.padding != (0, 0) or m.dilation != (1, 1) or m.groups != 1:
                    raise ConfigError(f"cannot export {m}: only unpadded, undilated convolutions")
                x = self.op("Conv", x, self.const(_np(m.weight)), self.const(_np(m.bias)),
                            kernel_shape=list(m.kernel_size), strides=list(m.stride))
            elif isinstance(m, nn.Tanh):
                x = self.op("Tanh", x)
            elif isinstance(m, nn.ReLU):
                x = self.op("Relu", x)
            elif isinstance(m, nn.Flatten):
                x = self.op("Flatten", x, axis=1)
            elif isinstance(m, nn.Sequential):
                x = self.layers(x, m)
            else:
                raise ConfigError(f"cannot export a {type(m).__name__} layer (MLP and Nature-CNN actors only)")
        return x


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _actor_body(g: _Graph, actor: nn.Module, x: str) -> str:
    """The actor's logits (Discrete) or mean (Box) of the normalised input ``x``."""
    from core.algo.networks import NatureCNN

    modules = []
    for m in actor.net:  # an MLP (Sequential of Linear/Tanh) or Sequential(NatureCNN, Linear)
        if isinstance(m, NatureCNN):
            modules += [nn.Sequential(*m.convs), nn.Flatten(), m.fc, nn.ReLU()]
        else:
            modules.append(m)
    return g.layers(x, modules)


def policy_graph(actor: nn.Module, obs_norm, obs_space: gym.Space, act_space: gym.Space, deterministic: bool = True,
                 metadata: Optional[dict] = None):
    """The ``onnx.ModelProto`` of ``actor`` with ``obs_norm`` folded in (see the module docstring)."""
    from core.algo.networks import CategoricalActor, GaussianActor

    onnx = onnx_module()
    g, tp = _Graph(onnx), onnx.TensorProto
    obs_dtype = np.dtype(obs_space.dtype)
    if obs_dtype not in (np.float32, np.float64, np.uint8):
        raise ConfigError(f"cannot export a policy of {obs_dtype} observations (float32, float64 or uint8)")
    image = len(obs_space.shape) == 3
    inputs = [onnx.helper.make_tensor_value_info("obs", onnx.helper.np_dtype_to_tensor_dtype(obs_dtype),
                                                 ["batch", *obs_space.shape])]
    x = g.op("Cast", "obs", to=tp.FLOAT)
    if image:  # the Nature CNN scales uint8 frames itself; image runs normalise nothing
        x = g.op("Div", x, g.const(255.0))
    elif obs_norm.enabled:
        mean, inv_std = obs_norm.affine()
        x = g.op("Mul", g.op("Sub", x, g.const(mean)), g.const(inv_std))
        x = g.op("Clip", x, g.const(-obs_norm.clip), g.const(obs_norm.clip))
    head = _actor_body(g, actor, x)
    if isinstance(actor, CategoricalActor):
        n = int(act_space.n)
        outputs = [onnx.helper.make_tensor_value_info("action", tp.INT64, ["batch"])]
        if deterministic:
            g.op("ArgMax", head, axis=-1, keepdims=0, out="action")
        else:
            inputs.append(onnx.helper.make_tensor_value_info("noise", tp.FLOAT, ["batch"]))
            cdf = g.op("CumSum", g.op("Softmax", head, axis=-1), g.const(-1, np.int64))
            below = g.op("LessOrEqual", cdf, g.op("Unsqueeze", "noise", g.const([-1], np.int64)))
            count = g.op("ReduceSum", g.op("Cast", below, to=tp.INT64), g.const([-1], np.int64), keepdims=0)
            g.op("Min", count, g.const(n - 1, np.int64), out="action")
    elif isinstance(actor, GaussianActor):
        a = int(np.prod(act_space.shape))
        outputs = [onnx.helper.make_tensor_value_info("action", tp.FLOAT, ["batch", a])]
        if not deterministic:
            inputs.append(onnx.helper.make_tensor_value_info("noise", tp.FLOAT, ["batch", a]))
            head = g.op("Add", head, g.op("Mul", g.const(np.exp(_np(actor.log_std))), "noise"))
        low, high = (np.asarray(b, np.float32).reshape(-1) for b in (act_space.low, act_space.high))
        g.op("Min", g.op("Max", head, g.const(low)), g.const(high), out="action")
    else:
        raise ConfigError(f"cannot export a {type(actor).__name__}")
    graph = onnx.helper.make_graph(g.nodes, "dapo_policy", inputs, outputs, g.inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)],
                                   producer_name="dapo")
    model.ir_version = min(model.ir_version, 8)  # readable by older onnxruntime releases too
    for key, value in (metadata or {}).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = str(key), value if isinstance(value, str) else json.dumps(value)
    onnx.checker.check_model(model)
    return model


def write_model(model, path: Path) -> Path:
    """Write ``model`` to ``path`` atomically (a temporary file in its folder, then renamed): no half file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def export_agent(agent, path, deterministic: bool = True) -> Path:
    """Write ``agent``'s (:class:`core.run.api.Agent`) policy to the ONNX file ``path`` (see the module docstring)."""
    path = check_output(Path(path))
    if not (isinstance(agent.observation_space, gym.spaces.Box)
            and isinstance(agent.action_space, (gym.spaces.Discrete, gym.spaces.Box))):
        raise ConfigError(f"cannot export a policy of {type(agent.observation_space).__name__} observations and "
                          f"{type(agent.action_space).__name__} actions; ONNX export covers Box observations with "
                          "Discrete or Box actions")
    if isinstance(agent.action_space, gym.spaces.Discrete) and int(agent.action_space.start) != 0:
        raise ConfigError(f"cannot export actions of {agent.action_space}: the graph's actions count from 0")
    cfg = agent.config
    noise = None if deterministic else ("uniform (B,) in [0, 1)" if isinstance(agent.action_space, gym.spaces.Discrete)
                                        else "standard normal (B, A)")
    meta = {"env": str(cfg.env), "algo": cfg.algo, "deterministic": str(deterministic).lower(),
            "action_space": str(agent.action_space), "observation_space": str(agent.observation_space)}
    if noise:
        meta["noise"] = noise
    model = policy_graph(agent.actor, agent.obs_norm, agent.observation_space, agent.action_space, deterministic, meta)
    return write_model(model, path)
