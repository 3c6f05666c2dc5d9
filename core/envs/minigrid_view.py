"""MiniGrid's egocentric one-hot view, computed straight from the grid: the same array, about 5x less time.

MiniGrid builds each observation from Python objects: it slices a 7x7 ``Grid`` out of the world (a new ``Wall``
object for every cell outside it), rotates it one to four times (49 ``get``/``set`` calls each), propagates
visibility, encodes it, and ``OneHotPartialObsWrapper`` one-hot encodes it in a double loop.  On DoorKey-5x5 that
was about 80% of a PPO iteration's env-stepping time.  ``OneHotView`` reads the same state (``agent_pos``,
``agent_dir``, ``grid``, ``carrying``) once per step: the view's world coordinates come from a table per direction,
the visibility pass runs on a flat list of 49 booleans, and the one-hot is one fancy-indexed assignment.
``tests/test_minigrid_view.py`` checks that it equals MiniGrid's own pipeline on every step of random episodes of
several tasks; the env's dynamics are untouched (only ``gen_obs`` and the ``actions`` table are replaced, on this env
instance).
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

import gymnasium as gym
import numpy as np

EMPTY, WALL_OUTSIDE = (1, 0, 0), (2, 5, 0)  # MiniGrid's codes: "empty" cell; a grey wall beyond the border
N_TYPES, N_COLORS, N_STATES = 11, 6, 3  # len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX)


@lru_cache(maxsize=None)
def view_offsets(size: int, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dy), each ``(size, size)``: view cell (i, j) shows world cell (top_x + dx[i, j], top_y + dy[i, j]).

    MiniGrid slices the square at (top_x, top_y) and then rotates it left ``direction + 1`` times
    (``Grid.rotate_left``: new[j, w - 1 - i] = old[i, j]); the same moves on an array of slice coordinates give the
    table.
    """
    dx, dy = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")  # [x, y] as MiniGrid indexes grids
    for _ in range(direction + 1):
        w = dx.shape[0]
        new_dx, new_dy = np.empty_like(dx), np.empty_like(dy)
        for i in range(w):
            for j in range(dx.shape[1]):
                new_dx[j, w - 1 - i], new_dy[j, w - 1 - i] = dx[i, j], dy[i, j]
        dx, dy = new_dx, new_dy
    return dx, dy


@lru_cache(maxsize=None)
def view_cells(size: int, direction: int) -> tuple[tuple[int, int, int], ...]:
    """``(k, dx, dy)`` for every view cell, ``k = i * size + j`` (row-major over [i][j]), as plain ints: the
    per-step loop then reads no NumPy scalars."""
    dx, dy = view_offsets(size, direction)
    return tuple((i * size + j, int(dx[i, j]), int(dy[i, j])) for i in range(size) for j in range(size))


def visible(see_behind: list[bool], size: int) -> list[bool]:
    """MiniGrid's ``Grid.process_vis`` on a flat ``[i * size + j]`` list of "can see past this cell"; the agent at the
    bottom middle (size // 2, size - 1).  Row by row from the agent outwards, light spreads right, then left, and one
    row up."""
    mask = [False] * (size * size)
    mask[(size // 2) * size + size - 1] = True
    for j in reversed(range(size)):
        for i in range(size - 1):
            k = i * size + j
            if mask[k] and see_behind[k]:
                mask[k + size] = True  # (i + 1, j)
                if j > 0:
                    mask[k + size - 1] = mask[k - 1] = True  # (i + 1, j - 1), (i, j - 1)
        for i in reversed(range(1, size)):
            k = i * size + j
            if mask[k] and see_behind[k]:
                mask[k - size] = True  # (i - 1, j)
                if j > 0:
                    mask[k - size - 1] = mask[k - 1] = True  # (i - 1, j - 1), (i, j - 1)
    return mask


def encoded_view(env) -> np.ndarray:
    """``(size, size, 3)`` uint8, equal to ``env.gen_obs()["image"]`` of MiniGrid's ``MiniGridEnv`` ``env``."""
    size = env.agent_view_size
    top_x, top_y, _, _ = env.get_view_exts()
    grid = env.grid
    width, height, cells = grid.width, grid.height, grid.grid
    codes = [WALL_OUTSIDE] * (size * size)
    see = [False] * (size * size)
    for k, dx, dy in view_cells(size, env.agent_dir):
        x, y = top_x + dx, top_y + dy
        if 0 <= x < width and 0 <= y < height:
            cell = cells[y * width + x]
            if cell is None:
                codes[k], see[k] = EMPTY, True
            else:
                codes[k], see[k] = cell.encode(), cell.see_behind()
    codes[(size // 2) * size + size - 1] = env.carrying.encode() if env.carrying else EMPTY  # what the agent holds
    image = np.array(codes, dtype=np.uint8)                                       # (size * size, 3)
    if not env.see_through_walls:
        image[~np.array(visible(see, size))] = 0  # unseen
    return image.reshape(size, size, 3)


@lru_cache(maxsize=None)
def _slots(cells: int) -> np.ndarray:
    """First one-hot slot of every cell, ``(cells,)``: cell k's slots are ``[20 k, 20 k + 20)``."""
    return np.arange(cells) * (N_TYPES + N_COLORS + N_STATES)


def one_hot(image: np.ndarray) -> np.ndarray:
    """``(w, h, 3)`` codes -> ``(w, h, 20)`` uint8: type, colour and state slots, as ``OneHotPartialObsWrapper``."""
    codes = image.reshape(-1, 3).astype(np.intp)
    base = _slots(len(codes))
    out = np.zeros(len(codes) * (N_TYPES + N_COLORS + N_STATES), dtype=np.uint8)
    out[base + codes[:, 0]] = 1
    out[base + N_TYPES + codes[:, 1]] = 1
    out[base + N_TYPES + N_COLORS + codes[:, 2]] = 1
    return out.reshape(image.shape[:2] + (N_TYPES + N_COLORS + N_STATES,))


class OneHotView(gym.ObservationWrapper):
    """Flat ``(size * size * 20,)`` uint8 one-hot egocentric view of a MiniGrid env, computed by ``encoded_view``.

    The base env's ``gen_obs`` (called inside its ``step`` and ``reset``) is replaced on this instance by one that
    returns ``{"image", "direction", "mission"}`` as MiniGrid's does, so MiniGrid's slow view is never built.  Its
    ``actions`` (the ``Actions`` IntEnum, which ``step`` compares the action with member by member) becomes the same
    names as plain ints: on Python 3.11 every ``Actions.left`` is a Python-level ``EnumType.__getattr__`` call (~4% of
    a DoorKey step, measured); the comparisons give the same results (an IntEnum member equals its int).
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        base = env.unwrapped
        base.gen_obs = lambda: {"image": encoded_view(base), "direction": base.agent_dir, "mission": base.mission}
        base.actions = SimpleNamespace(**{a.name: int(a) for a in base.actions})
        size = base.agent_view_size
        self.observation_space = gym.spaces.Box(0, 255, (size * size * (N_TYPES + N_COLORS + N_STATES),), np.uint8)  # as before

    def observation(self, obs):
        return one_hot(obs["image"]).reshape(-1)
