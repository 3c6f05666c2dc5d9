"""``core.envs.minigrid_view`` against MiniGrid's own pipeline (``gen_obs`` + ``OneHotPartialObsWrapper`` +
flattening): equal observations on every step of random episodes, on tasks with doors, keys, boxes, lava, several
rooms and an agent that carries things; the rotation table worked by hand for one direction."""
import numpy as np
import pytest

pytest.importorskip("minigrid")

import gymnasium as gym  # noqa: E402

from core.envs.minigrid_view import OneHotView, view_offsets, visible  # noqa: E402

TASKS = ["MiniGrid-DoorKey-5x5-v0", "MiniGrid-DoorKey-8x8-v0", "MiniGrid-KeyCorridorS3R1-v0",
         "MiniGrid-MultiRoom-N2-S4-v0", "MiniGrid-LavaGapS5-v0", "MiniGrid-Unlock-v0", "MiniGrid-BlockedUnlockPickup-v0",
         "MiniGrid-Empty-Random-6x6-v0"]


def reference(env_id: str) -> gym.Env:
    from minigrid.wrappers import ImgObsWrapper, OneHotPartialObsWrapper

    return gym.wrappers.FlattenObservation(ImgObsWrapper(OneHotPartialObsWrapper(gym.make(env_id))))


@pytest.mark.parametrize("env_id", TASKS)
def test_the_view_equals_minigrids_on_random_episodes(env_id):
    ours, theirs = OneHotView(gym.make(env_id)), reference(env_id)
    rng = np.random.default_rng(0)
    carried = 0
    for episode in range(6):
        a, _ = ours.reset(seed=episode)
        b, _ = theirs.reset(seed=episode)
        np.testing.assert_array_equal(a, b)
        for _ in range(150):
            # bias towards forward / pickup / toggle so that doors open and keys get carried
            action = int(rng.choice(7, p=[0.15, 0.15, 0.3, 0.15, 0.05, 0.15, 0.05]))
            a, ra, ta, ua, _ = ours.step(action)
            b, rb, tb, ub, _ = theirs.step(action)
            np.testing.assert_array_equal(a, b)
            assert (ra, ta, ua) == (rb, tb, ub)
            carried += ours.unwrapped.carrying is not None
            if ta or ua:
                break
    assert a.shape == ours.observation_space.shape == theirs.observation_space.shape
    if "Key" in env_id or "Unlock" in env_id:
        assert carried > 0  # the carried-object cell was exercised


def test_the_rotation_table_for_an_agent_facing_right():
    # facing right (direction 0), MiniGrid rotates the slice left once: view cell (i, j) shows slice cell (size-1-j, i)
    dx, dy = view_offsets(3, 0)
    for i in range(3):
        for j in range(3):
            assert (dx[i, j], dy[i, j]) == (2 - j, i)


def test_a_wall_across_the_view_hides_the_row_behind_it():
    # 3x3 view, agent at (1, 2), an opaque row j = 1 (see[i][j] is False there): the wall row is seen, row 0 is not
    def flat(table):  # visible() takes and returns [i * size + j]
        return [v for row in table for v in row]

    mask = visible(flat([[True, False, True], [True, False, True], [True, False, True]]), 3)
    assert [mask[i * 3 + 2] for i in range(3)] == [True] * 3 and [mask[i * 3 + 1] for i in range(3)] == [True] * 3
    assert [mask[i * 3 + 0] for i in range(3)] == [False] * 3
    # a single opaque cell ahead is seen around: MiniGrid's light also spreads diagonally from the open neighbours
    assert visible(flat([[True] * 3, [False, False, True], [True] * 3]), 3)[1 * 3 + 0]
