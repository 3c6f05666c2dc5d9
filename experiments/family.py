"""``dapo bench NAME ...``: the benchmark scripts of experiments/, registered with the CLI (see core.run.registry)."""
from core.run.registry import Command

BENCHMARKS = {  # dapo bench NAME -> the script it runs (the same flags, the same outputs)
    "mujoco": "experiments.mujoco_benchmark",
    "throughput": "experiments.bench_throughput",
    "dt": "experiments.dt_benchmark",
    "ma": "experiments.ma_benchmark",
    "dt-predictability": "experiments.dt_return_predictability",
    "sparse": "experiments.sparse_benchmark",
    "lm": "experiments.lm_benchmark",
}
COMMANDS = [Command("bench", "reproduce a benchmark table: " + " | ".join(BENCHMARKS) + " (dapo bench NAME --help)",
                    handler="experiments.family:bench", raw=True)]


def bench(argv: list[str]) -> int:
    """Hand ``argv[1:]`` to the script's own parser (so ``--help`` shows its flags)."""
    import importlib
    import sys

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: dapo bench {" + ",".join(BENCHMARKS) + "} [its own options]\n\nRun a benchmark script of "
              "experiments/ (resumable; tables, CSV and plots under experiments/results/). Its options: "
              "dapo bench NAME --help", file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if argv[0] not in BENCHMARKS:
        print(f"dapo bench: error: unknown benchmark '{argv[0]}'; choose one of: {', '.join(BENCHMARKS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return module.main(list(argv[1:]), prog=f"dapo bench {argv[0]}") or 0
