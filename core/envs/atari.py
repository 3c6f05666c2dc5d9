"""Atari without EnvPool: ale-py games with EnvPool's DQN preprocessing, in Gymnasium vector envs.

:class:`AtariGame` follows EnvPool's Atari defaults (``envpool.make_spec('Pong-v5').config``):

- 84x84 grey frames, area-averaged from the 210x160 screen; the last 4 stacked, oldest first, ``(4, 84, 84)``
  uint8; a new game fills the whole stack with its first frame;
- frame skip 4: each action is repeated for 4 emulator frames, the observation is the pixel-wise max of the
  last two (Atari sprites flicker), rewards are summed;
- no sticky actions (``repeat_action_probability`` 0, unlike Gymnasium's ALE v5);
- at reset, 1-30 no-op frames (one fewer plus a FIRE frame in games with FIRE);
- a game is cut after 27,000 agent steps (108,000 frames; a truncation);
- for learning (``training=True``) the reward is ``sign(raw)`` and losing a life ends the learning episode,
  while the game goes on: the reset that follows a life loss only plays the no-ops and FIRE (EnvPool's
  "episodic life").  ``info['score']`` is the raw reward and ``info['game_over']`` the end of the whole game,
  which is what results report.  Evaluation envs (``training=False``) play whole games with raw rewards.

The emulators are the same (ALE), but EnvPool and ale-py draw their no-op counts from different RNGs and
round the resize differently, so the two backends give statistically, not bit-for-bit, equal games.
"""
from __future__ import annotations

import functools
from typing import Optional

import gymnasium as gym
import numpy as np

from core.envs.step import StepResult
from core.config.errors import ConfigError
from core.envs.make import check_env_id

SIZE, STACK, FRAME_SKIP, NOOP_MAX, MAX_STEPS = 84, 4, 4, 30, 27_000  # EnvPool's Atari defaults


def area_weights(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` float32: row i averages the input cells under output cell i, each weighted by the
    share of it that falls inside (area interpolation, as OpenCV's INTER_AREA when shrinking)."""
    edges = np.arange(n_out + 1) * (n_in / n_out)
    lo, hi = edges[:-1, None], edges[1:, None]
    cells = np.arange(n_in)[None, :]
    overlap = np.clip(np.minimum(hi, cells + 1) - np.maximum(lo, cells), 0, None)
    return (overlap / (n_in / n_out)).astype(np.float32)


def area_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`area_weights` as ``K`` taps per output cell (K = 3 for 210 or 160 -> 84): indices ``(K, n_out)``
    and weights ``(K, n_out, 1)``, zero-padded.  Gathers instead of a matrix product: no BLAS threads,
    whose start-up costs more than the arithmetic on a busy machine."""
    w = area_weights(n_in, n_out)
    k = int((w > 0).sum(1).max())
    idx, wt = np.zeros((k, n_out), np.intp), np.zeros((k, n_out, 1), np.float32)
    for i in range(n_out):
        nz = np.flatnonzero(w[i])
        idx[:len(nz), i], wt[:len(nz), i, 0] = nz, w[i, nz]
    return idx, wt


def resize(screen: np.ndarray, rows: tuple, cols: tuple) -> np.ndarray:
    """``(H, W)`` uint8 -> ``(84, 84)`` uint8 by area averaging (``rows``/``cols`` from :func:`area_taps`)."""
    r = (rows[1] * screen[rows[0]]).sum(0, dtype=np.float32)        # (84, W)
    return np.rint((cols[1] * r.T[cols[0]]).sum(0).T).astype(np.uint8)  # (84, 84)


class AtariGame(gym.Env):
    """One ale-py game with EnvPool's preprocessing (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 60 // FRAME_SKIP}

    def __init__(self, game: str, training: bool = True, full_action_space: bool = False,
                 render_mode: Optional[str] = None):
        import ale_py
        from ale_py import roms

        self.training, self.render_mode = training, render_mode
        self.ale = ale_py.ALEInterface()
        self.ale.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale.setFloat("repeat_action_probability", 0.0)
        self._rom = roms.get_rom_path(game)
        self._load(0)
        self.actions = self.ale.getLegalActionSet() if full_action_space else self.ale.getMinimalActionSet()
        self.fire = int(ale_py.Action.FIRE in self.actions)
        self._noop, self._fire = ale_py.Action.NOOP, ale_py.Action.FIRE
        self.observation_space = gym.spaces.Box(0, 255, (STACK, SIZE, SIZE), np.uint8)
        self.action_space = gym.spaces.Discrete(len(self.actions))
        h, w = self.ale.getScreenDims()
        self._rows, self._cols = area_taps(h, SIZE), area_taps(w, SIZE)
        self._screens = np.zeros((2, h, w), np.uint8)
        self._stack = np.zeros((STACK, SIZE, SIZE), np.uint8)
        self._elapsed, self._lives, self._started = 0, 0, False

    def _load(self, seed: int) -> None:
        self.ale.setInt("random_seed", int(seed) % 2**31)
        self.ale.loadROM(self._rom)

    def _push(self, screen: np.ndarray, fill: bool) -> None:
        frame = resize(screen, self._rows, self._cols)
        if fill:
            self._stack[:] = frame
        else:
            self._stack[:-1] = self._stack[1:]
            self._stack[-1] = frame

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        hard = (seed is not None or not self._started or not self.training or self.ale.game_over()
                or self._elapsed >= MAX_STEPS)
        if seed is not None:
            self._load(seed)
        if hard:
            self.ale.reset_game()
            self._elapsed, self._started = 0, True
        for _ in range(int(self.np_random.integers(1, NOOP_MAX + 1)) - self.fire):
            self.ale.act(self._noop)
            if self.ale.game_over():
                self.ale.reset_game()
                hard = True
        if self.fire:
            self.ale.act(self._fire)
        self.ale.getScreenGrayscale(self._screens[0])
        self._push(self._screens[0], fill=hard)
        self._lives = self.ale.lives()
        return self._stack.copy(), {"score": 0.0, "game_over": False}

    def render(self) -> Optional[np.ndarray]:
        """The emulator's colour screen ``(210, 160, 3)`` uint8 (``render_mode="rgb_array"``; videos), else None."""
        return self.ale.getScreenRGB() if self.render_mode == "rgb_array" else None

    def step(self, action):
        raw, a = 0.0, self.actions[int(action)]
        for k in range(FRAME_SKIP):
            raw += self.ale.act(a)
            over = self.ale.game_over()
            if k >= FRAME_SKIP - 2 or over:  # the last two frames (or the final one) are kept
                self.ale.getScreenGrayscale(self._screens[max(k - (FRAME_SKIP - 2), 0)])
            if over:
                break
        pooled = np.maximum(self._screens[0], self._screens[1]) if k == FRAME_SKIP - 1 and not over \
            else self._screens[max(k - (FRAME_SKIP - 2), 0)]
        self._push(pooled, fill=False)
        self._elapsed += 1
        lives = self.ale.lives()
        life_lost = self.training and 0 < lives < self._lives
        self._lives = lives
        truncated = self._elapsed >= MAX_STEPS and not over
        reward = float(np.sign(raw)) if self.training else raw
        return (self._stack.copy(), reward, over or life_lost, truncated,
                {"score": raw, "game_over": over or truncated})


def game_name(env_id: str) -> tuple[str, bool]:
    """ale-py's ROM name and action-set flag of a Gymnasium ``ALE/<Game>-v5`` id."""
    check_env_id(env_id)  # registers ale-py's ids; a one-line error for a missing ale-py or an unknown id
    kwargs = gym.spec(env_id).kwargs
    if "game" not in kwargs:
        raise ConfigError(f"--env {env_id}: not an ale-py game id (expected e.g. ALE/Pong-v5)")
    return kwargs["game"], bool(kwargs.get("full_action_space", False))


class AtariBackend:
    """``AtariGame`` envs in a Gymnasium Sync/AsyncVectorEnv (same-step autoreset), with
    :class:`~core.envs.step.StepResult` semantics: ``reward`` and ``terminated`` for learning, ``score`` and
    ``game_over`` for the whole game.  Episodes restart on resume (``state`` is None), as with EnvPool."""

    def __init__(self, env_id: str, num_envs: int, asynchronous: bool = False, training: bool = True):
        game, full = game_name(env_id)
        make = functools.partial(AtariGame, game, training, full)
        autoreset = gym.vector.AutoresetMode.SAME_STEP
        if asynchronous:
            self.envs = gym.vector.AsyncVectorEnv([make] * num_envs, shared_memory=True, autoreset_mode=autoreset)
        else:
            self.envs = gym.vector.SyncVectorEnv([make] * num_envs, copy=False, autoreset_mode=autoreset)
        self.num_envs, self.asynchronous = num_envs, asynchronous
        self.single_observation_space = self.envs.single_observation_space
        self.single_action_space = self.envs.single_action_space
        self._valid = np.ones(num_envs, dtype=bool)

    def reset(self, seed: int) -> np.ndarray:
        return self.envs.reset(seed=seed)[0]

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, term, trunc, info = self.envs.step(np.asarray(actions))
        score, game_over = info["score"].astype(np.float64), info["game_over"].astype(bool)
        final = np.zeros_like(obs)
        done = np.flatnonzero(term | trunc)
        if done.size:  # the info of an ended env is its reset's: the ended step's is in final_info
            final[done] = np.stack(info["final_obs"][done])
            score[done] = info["final_info"]["score"][done]
            game_over[done] = info["final_info"]["game_over"][done]
        return StepResult(obs, reward, term, trunc, final, self._valid, score, game_over)

    def state(self) -> None:
        return None

    def load_state(self, blob) -> None:
        pass

    def close(self) -> None:
        self.envs.close()
