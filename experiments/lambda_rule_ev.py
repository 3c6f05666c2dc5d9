"""Why GRPO's lambda rule sits at its floor on MuJoCo: the critic's explained variance against lambda-returns.

The rule (core/algo/advantages.py, AutoLambda) sets lambda from the EV of V_old against the returns A + V_old, which are
computed with the current lambda and bootstrap from V_old itself. This script trains DAPO (today's defaults) for
``--steps``, then collects ``--rollouts`` further rollouts and prints, for each, the EV of V_old against the
lambda-returns for several lambdas: if the EV falls as lambda rises, a low lambda props up its own EV.

    python -m experiments.lambda_rule_ev --env Walker2d-v5 --steps 200000 --seed 1
"""
from __future__ import annotations

import argparse
import tempfile

from core.algo.advantages import gae, next_state_values
from core.training.logging import MetricLogger
from core.algo.advantages import explained_variance
from core.run.runner import resolve_for_env
from core.training.trainer import Trainer


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="Walker2d-v5", help="Gymnasium env id (default: Walker2d-v5)")
    p.add_argument("--steps", type=int, default=200_000, help="env steps of training before measuring (default: 200000)")
    p.add_argument("--seed", type=int, default=1, help="training seed (default: 1)")
    p.add_argument("--rollouts", type=int, default=3, help="rollouts measured after training (default: 3)")
    p.add_argument("--lambdas", type=float, nargs="+", default=[0.9, 0.95, 0.99, 1.0],
                   help="lambdas of the returns the EV is measured against (default: 0.9 0.95 0.99 1.0)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = resolve_for_env(dict(env=args.env, algo="dapo", recipe=("dapo-mujoco",), total_steps=args.steps + args.rollouts * 4096,
                                   seed=args.seed, progress=False, tensorboard=False, eval_episodes=0, run_dir=run_dir))
        trainer = Trainer(cfg, run_dir)
        batch = cfg.num_envs * cfg.num_steps
        trainer.train(MetricLogger(run_dir, tensorboard=False), max_iterations=args.steps // batch)
        print(f"{args.env}, DAPO seed {args.seed}, after {trainer.global_step} steps; the rule's lambda "
              f"{trainer.gae_lambda.value:.3f}")
        print("| rollout | " + " | ".join(f"EV vs lambda={lam:g} returns" for lam in args.lambdas) + " |")
        print("|---" * (len(args.lambdas) + 1) + "|")
        for i in range(args.rollouts):
            ro, last_values, _ = trainer.rollouts.next(trainer.actor, trainer.critic, prefetch=False)
            next_values = next_state_values(ro.values, last_values, ro.dones, ro.final_values)
            evs = []
            for lam in args.lambdas:
                _, returns = gae(ro.rewards, ro.values, next_values, ro.terminated, ro.dones, cfg.gamma, lam)
                evs.append(float(explained_variance(ro.values.flatten(), returns.flatten())))
            print(f"| {i + 1} | " + " | ".join(f"{ev:.3f}" for ev in evs) + " |")


if __name__ == "__main__":
    main()
