"""Decision Transformer (Chen et al. 2021) with DAPO's advantage conditioning (docs/algorithms.md section 6).

Per step ``t`` the sequence holds three tokens ``(R_t, s_t, a_t)``: the return-to-go, the state (stacked
Atari frames through a Nature CNN, or a flat state, normalised by the dataset's mean and std, through a
linear layer) and the action (an embedding row for Discrete actions, a linear layer of the [-1, 1]-scaled
vector for Box actions).  Without return tokens (``returns=False``, the ``bc`` baseline) it holds two,
``(s_t, a_t)``.  A GPT-2 backbone (``transformers.GPT2Model`` fed through ``inputs_embeds``)
reads the ``3K`` tokens causally and the action ``a_t`` is predicted from the output at the *state*
token ``s_t``, which sees ``R_<=t, s_<=t, a_<t`` but not ``a_t`` itself.

Two optional additions (both off gives the plain DT baseline):

- ``value_head``: ``V(s_t)`` from the CNN features of ``s_t`` alone, for advantages ``A_t = G_t - V(s_t)``;
  with ``value_encoder`` V has its own CNN instead of reading the imitation encoder's features.
- ``advantage_modulation``: a FiLM on the output of every block's attention sub-layer,
  ``h <- h * (1 + gamma_l(A)) + beta_l(A)``, zero-initialised so that at initialisation the model
  computes exactly the plain DT.  At evaluation time there is no true advantage: the caller passes a
  constant target advantage (in the same normalised units as in training), just as it passes a
  target return-to-go.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Optional

import torch
from einops import rearrange, repeat
from torch import Tensor, nn
from transformers import GPT2Config, GPT2Model

from core.algo.networks import NatureCNN, orthogonal_init


@dataclass
class DTModelConfig:
    """Hyper-parameters of :class:`DecisionTransformer`."""

    n_actions: int
    """Size of the discrete action space (0 with Box actions, ``act_dim``)."""
    state_dim: int = 0
    """Size of a flat state (linear state embedding); 0: 4 stacked 84x84 Atari frames (Nature CNN)."""
    act_dim: int = 0
    """Size of a Box action (scaled to [-1, 1]; linear embedding, tanh head, MSE loss); 0: Discrete actions."""
    returns: bool = True
    """Return-to-go tokens (off: the return-blind ``bc`` baseline, ``(s_t, a_t)`` tokens only)."""
    action_low: Optional[list] = None
    """Box actions: the bounds they are scaled by (acting maps the tanh output back)."""
    action_high: Optional[list] = None
    context_len: int = 30
    """K: steps per sequence (the GPT-2 sees ``3K`` tokens)."""
    n_layer: int = 3
    """Number of GPT-2 blocks."""
    n_head: int = 1
    """Attention heads per block (must divide ``n_embd``)."""
    n_embd: int = 128
    """Token width d, also the CNN's output size."""
    max_timestep: int = 10000
    """Rows of the timestep embedding table; larger timesteps are clamped to the last row."""
    dropout: float = 0.1
    """Dropout on the embeddings, attention weights and residual branches of GPT-2."""
    advantage_modulation: bool = False
    """Add the zero-initialised advantage FiLM after every block's attention sub-layer."""
    value_head: bool = False
    """Add the state-value head ``V(s_t)`` on the CNN features."""
    value_encoder: bool = False
    """Give V its own Nature CNN (trained by the value loss alone) instead of the imitation CNN's features."""
    activation: str = "gelu_pytorch_tanh"
    """GPT-2 MLP activation (transformers' name): GPT-2's tanh GELU, or "relu" (the DT paper's MuJoCo model)."""
    attn_implementation: str = "sdpa"
    """GPT-2 attention kernel, "sdpa" or "eager" (both deterministic on CPU)."""
    bf16: bool = False
    """Run the CNN state encoder and the GPT-2 blocks under bf16 autocast (embeddings, heads and losses
    stay fp32; see core.algo.networks.NatureCNN)."""


class DTOutput(NamedTuple):
    """``logits`` ``(B, K, n_actions)`` for ``a_t`` (Box actions: the predicted actions ``(B, K, act_dim)`` in
    [-1, 1]); ``values`` ``(B, K)`` ``V(s_t)`` or ``None``."""

    logits: Tensor
    values: Tensor | None


class DecisionTransformer(nn.Module):
    """GPT-2 over interleaved ``(R_t, s_t, a_t)`` tokens; see the module docstring."""

    def __init__(self, cfg: DTModelConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.n_embd
        gpt_cfg = GPT2Config(
            vocab_size=1,  # inputs_embeds only: don't allocate GPT-2's 50257-row token table
            bos_token_id=0, eos_token_id=0,
            n_positions=self.n_tokens * cfg.context_len, n_embd=d, n_layer=cfg.n_layer, n_head=cfg.n_head,
            n_inner=4 * d, resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout,
            attn_implementation=cfg.attn_implementation,
            # GPT-2's tanh-approximated GELU, as one native kernel (transformers' "gelu_new" is the same
            # formula written as several Python-level ops: a third of the CPU time of acting)
            activation_function=cfg.activation,
        )
        self.gpt = GPT2Model(gpt_cfg)
        # The timestep embedding is the only positional signal (as in the original DT): GPT-2's learned
        # token positions would make a step's meaning depend on where the context window starts.
        nn.init.zeros_(self.gpt.wpe.weight)
        self.gpt.wpe.weight.requires_grad_(False)

        self.embed_return = nn.Linear(1, d) if cfg.returns else None
        self.embed_state = self._state_encoder()
        if cfg.state_dim:  # the dataset's observation mean and std (set by the trainer, saved with the model)
            self.register_buffer("state_mean", torch.zeros(cfg.state_dim))
            self.register_buffer("state_std", torch.ones(cfg.state_dim))
        if cfg.act_dim:  # Box actions in [-1, 1]: linear embedding, tanh head (DT paper, MuJoCo)
            self.embed_action = nn.Linear(cfg.act_dim, d)
            self.action_head = nn.Sequential(nn.Linear(d, cfg.act_dim), nn.Tanh())
        else:
            self.embed_action = nn.Embedding(cfg.n_actions, d)
            self.action_head = nn.Linear(d, cfg.n_actions)
        self.embed_timestep = nn.Embedding(cfg.max_timestep, d)
        self.embed_ln = nn.LayerNorm(d)

        self.value_head = self.value_cnn = None
        if cfg.value_head:
            if cfg.value_encoder:
                self.value_cnn = self._state_encoder()
            # V sees the CNN features of s_t only, never the transformer output: the state token attends
            # to R_t, and R_t (= G_t in the data) is exactly V's regression target, so a V read from the
            # transformer would learn to copy it and the advantage A = G - V would collapse to ~0.
            self.value_head = nn.Sequential(
                orthogonal_init(nn.Linear(d, d), math.sqrt(2)), nn.ReLU(), orthogonal_init(nn.Linear(d, 1), 1.0))

        self.adv_embed = None
        self.film = None
        self._film: list[tuple[Tensor, Tensor]] | None = None  # per-layer (gamma, beta), set during forward
        if cfg.advantage_modulation:
            # A shared embedding of the scalar advantage gives the FiLM a nonlinear dependence on A; the
            # per-layer projections start at zero (like adaLN-Zero), so gamma = beta = 0 exactly at init.
            self.adv_embed = nn.Sequential(nn.Linear(1, d), nn.SiLU())
            self.film = nn.ModuleList(nn.Linear(d, 2 * d) for _ in range(cfg.n_layer))
            for lin in self.film:
                nn.init.zeros_(lin.weight)
                nn.init.zeros_(lin.bias)
            # Hooks (not wrapper modules) keep the GPT-2 parameter names identical to the plain model's,
            # so a plain checkpoint loads into a modulated model with strict=False.
            for i, block in enumerate(self.gpt.h):
                block.attn.register_forward_hook(partial(self._modulate_attention, i))

    @property
    def n_tokens(self) -> int:
        """Tokens per step: 3 ``(R, s, a)``, or 2 ``(s, a)`` without return tokens."""
        return 3 if self.cfg.returns else 2

    @property
    def continuous(self) -> bool:
        return self.cfg.act_dim > 0

    def _state_encoder(self) -> nn.Module:
        cfg = self.cfg
        return nn.Linear(cfg.state_dim, cfg.n_embd) if cfg.state_dim else NatureCNN(out_dim=cfg.n_embd, bf16=cfg.bf16)

    def _modulate_attention(self, layer: int, module: nn.Module, args: tuple, output):
        """Forward hook on ``gpt.h[layer].attn``: FiLM its output ``(B, 3K, d)``.

        In transformers 5.x ``GPT2Attention`` returns ``(attn_output, attn_weights)`` and ``GPT2Block``
        adds ``attn_output`` to the residual stream; older versions returned longer tuples and some
        attention wrappers return a bare tensor, so both forms are handled.
        """
        if self._film is None:
            return None  # advantages=None: leave the output untouched
        gamma, beta = self._film[layer]  # (B, 3K, d) each
        if isinstance(output, Tensor):
            return output * (1 + gamma) + beta
        return (output[0] * (1 + gamma) + beta, *output[1:])

    def value(self, state_feat: Tensor) -> Tensor:
        """``V(s_t)`` ``(B, K)`` from CNN features ``(B, K, d)``.  The features are layer-normalised first
        (no parameters): their scale drifts while imitation trains the encoder, and on raw features a
        stop-gradient value head diverged on Pong (value loss 0.5 -> 4.5 in 400 steps)."""
        return self.value_head(nn.functional.layer_norm(state_feat, state_feat.shape[-1:])).squeeze(-1)

    def state_values(self, frames: Tensor | None, state_feat: Tensor) -> Tensor:
        """``V(s_t)`` ``(B, K)``: from V's own CNN over ``frames`` ``(B, K, 4, 84, 84)`` with ``value_encoder``,
        else from the imitation CNN's features ``state_feat`` ``(B, K, d)`` (which the caller may detach)."""
        if self.value_cnn is not None:
            return self.value(self.encode_states(frames, self.value_cnn))
        return self.value(state_feat)

    def encode_states(self, frames: Tensor, cnn: nn.Module | None = None) -> Tensor:
        """CNN features ``(B, K, d)`` of frames ``(B, K, 4, 84, 84)`` by the state encoder (or ``cnn``);
        acting caches them step by step."""
        cnn = self.embed_state if cnn is None else cnn
        if self.cfg.state_dim:  # flat states (B, K, D), normalised by the dataset's statistics
            return cnn((frames.float() - self.state_mean) / self.state_std)
        B = frames.shape[0]
        return rearrange(cnn(rearrange(frames, "b k c h w -> (b k) c h w")), "(b k) d -> b k d", b=B)

    def forward(self, rtg: Tensor, frames: Tensor | None, actions: Tensor, timesteps: Tensor, mask: Tensor,
                advantages: Tensor | None = None, state_feat: Tensor | None = None) -> DTOutput:
        """Action logits for every step of the context.

        Args:
            rtg: ``(B, K)`` float returns-to-go (scaled by the caller).
            frames: ``(B, K, 4, 84, 84)`` uint8 or float in [0, 255]; flat states: ``(B, K, D)`` raw.
            actions: ``(B, K)`` long, or ``(B, K, act_dim)`` float in [-1, 1]; ``actions[:, t]`` never influences ``logits[:, t]``, so the last
                action may be a dummy (e.g. 0) when acting.
            timesteps: ``(B, K)`` long episode step indices (clamped to ``max_timestep - 1``).
            mask: ``(B, K)`` bool/float, 1 for real steps and 0 for left padding.
            advantages: ``(B, K)`` normalised advantages for the FiLM, or ``None`` to skip it.  Ignored by
                a model built without ``advantage_modulation``.
            state_feat: ``(B, K, d)`` precomputed :meth:`encode_states` of the frames (then ``frames``
                may be ``None``).
        Returns:
            :class:`DTOutput` with ``logits`` ``(B, K, n_actions)`` (Box: actions ``(B, K, act_dim)``) and ``values`` ``(B, K)``, or ``None``
            without a value head (or with V's own CNN when ``frames`` is ``None``).
        """
        if state_feat is None:
            state_feat = self.encode_states(frames)  # (B, K, d)
        time_emb = self.embed_timestep(timesteps.clamp(0, self.cfg.max_timestep - 1))  # (B, K, d)
        s_tok = state_feat + time_emb  # (B, K, d)
        a_in = actions.to(state_feat.dtype) if self.continuous else actions
        a_tok = self.embed_action(a_in) + time_emb  # (B, K, d)
        toks = [s_tok, a_tok]
        if self.embed_return is not None:
            toks.insert(0, self.embed_return(rtg.unsqueeze(-1).to(state_feat.dtype)) + time_emb)  # (B, K, d)
        n = self.n_tokens
        tokens = self.embed_ln(rearrange(toks, "n b k d -> b (k n) d"))  # (B, nK, d)
        attn_mask = repeat(mask.bool(), "b k -> b (k n)", n=n).long()  # (B, nK)

        if self.film is not None and advantages is not None:
            if self.gpt.gradient_checkpointing and self.training:
                # Checkpointing re-runs the blocks during backward, after the conditioning is cleared.
                raise RuntimeError("advantage modulation does not support GPT-2 gradient checkpointing")
            cond = self.adv_embed(advantages.unsqueeze(-1).to(tokens.dtype))  # (B, K, d)
            cond = repeat(cond, "b k d -> b (k n) d", n=n)  # one advantage per step: causal per position
            self._film = [tuple(lin(cond).chunk(2, dim=-1)) for lin in self.film]  # L x 2 x (B, 3K, d)
        try:
            with torch.autocast(tokens.device.type, dtype=torch.bfloat16, enabled=self.cfg.bf16):
                hidden = self.gpt(inputs_embeds=tokens, attention_mask=attn_mask).last_hidden_state  # (B, 3K, d)
            hidden = hidden.float()
        finally:
            self._film = None  # never let a stale conditioning leak into a later call

        state_out = rearrange(hidden, "b (k n) d -> n b k d", n=n)[n - 2]  # (B, K, d): outputs at s_t tokens
        logits = self.action_head(state_out)  # (B, K, n_actions) or (B, K, act_dim) in [-1, 1]
        has_v = self.value_head is not None and (self.value_cnn is None or frames is not None)
        values = self.state_values(frames, state_feat) if has_v else None  # (B, K)
        return DTOutput(logits, values)
