"""A benchmark against another revision, in one run: the one way bench/ compares a change with
what it changes (each benchmark used to carry its own --baseline-tree or --against).

    .venv/bin/python -m bench.ab [--base main] [--rounds 3] -- bench.bench_queries --runs 5000

The base revision is checked out with `git worktree add --detach` into a temporary folder
(removed afterwards), and this checkout's bench/ is copied over its own, so both sides run the
very same benchmark code and only the product differs. Then `python -m MODULE ARGS...` runs
--rounds times in each tree, the sides alternating (base, this, this, base, ...) so that both
see the same neighbours on a shared machine. Each run's working directory is its tree, which
Python puts first on sys.path: `budgetscope`, `ingest`, `store`... are that tree's, not the
editable install's; both use this environment's packages.

Any module runs so, not only bench's: `-- sample_traces.generate --runs 3000 --format pb-stream
--out /tmp/ab.pb` compares the sample generator (what bench_generate.py did).

Printed: each side's wall and CPU time (median and range; the CPU time, user + system of the
run and its subprocesses, moves less with the neighbours' load) with this/base, then every
figure of the benchmark's output side by side: a line of this tree's output is paired with the
base's line of the same words (numbers aside, the n-th such line with the n-th), and each
number on it is given as [base median -> this median (this/base)], or once when both are the
same. A benchmark's files (--workdir and the like) are shared by both sides: give each side's
database its own name, or let the first round build it for both. Figures, never assertions:
which ratio is better depends on the figure.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A number as benchmarks print them: 1,234.5 or 0.25 or 12 (a sign, thousands separators).
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def checkout(revision: str, into: Path) -> Path:
    """`revision` as a worktree at `into`, with this checkout's bench/ in place of its own."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(into),
                    revision], check=True)
    shutil.rmtree(into / "bench", ignore_errors=True)
    shutil.copytree(ROOT / "bench", into / "bench",
                    ignore=shutil.ignore_patterns("__pycache__", "out"))
    return into


def remove(tree: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                   check=False, capture_output=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(tree: Path, command: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, its own subprocesses included) and standard
    output of `python -m command...` in `tree`."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", *command], cwd=tree, capture_output=True,
                          text=True)
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed in {tree} ({done.returncode}):\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return seconds, cpu, done.stdout


def figures(output: str) -> dict[tuple[str, int], list[float]]:
    """Each line's numbers, keyed by its words (numbers replaced) and its rank among the lines
    of the same words."""
    seen: dict[str, int] = defaultdict(int)
    found = {}
    for line in output.splitlines():
        numbers = NUMBER.findall(line)
        if not numbers:
            continue
        words = NUMBER.sub("#", line).strip()
        found[(words, seen[words])] = [float(n.replace(",", "")) for n in numbers]
        seen[words] += 1
    return found


def spread(values: list[float]) -> str:
    """Median and range, in seconds."""
    return f"{statistics.median(values):.2f} s [{min(values):.2f}-{max(values):.2f}]"


def ratio(this: float, base: float) -> str:
    return f"{this / base:.2f}x" if base else "-"


def compare(outputs: dict[str, list[str]]) -> list[str]:
    """The lines of this tree's last output, each number as base -> this (this/base)."""
    rounds = {side: [figures(text) for text in texts] for side, texts in outputs.items()}
    lines = []
    for key in rounds["this"][-1]:
        if not all(key in found for side in rounds for found in rounds[side]):
            continue
        widths = {len(found[key]) for side in rounds for found in rounds[side]}
        if len(widths) != 1:
            continue
        words, parts = key[0].split("#"), []
        for index in range(widths.pop()):
            base = statistics.median(found[key][index] for found in rounds["base"])
            this = statistics.median(found[key][index] for found in rounds["this"])
            parts.append(f"{this:g}" if this == base else
                         f"[{base:g} -> {this:g} ({ratio(this, base)})]")
        lines.append("".join(w + (parts[i] if i < len(parts) else "")
                             for i, w in enumerate(words)))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- MODULE [ARGS...], e.g. -- bench.bench_queries --runs 5000")
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("name the benchmark: -- bench.NAME [ARGS...]")
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as folder:
        base = checkout(options.base, Path(folder) / "base")
        try:
            trees = {"base": base, "this": ROOT}
            seconds: dict[str, list[float]] = {side: [] for side in trees}
            cpu: dict[str, list[float]] = {side: [] for side in trees}
            outputs: dict[str, list[str]] = {side: [] for side in trees}
            for round_ in range(options.rounds):
                for side in (trees if round_ % 2 == 0 else list(trees)[::-1]):
                    took, used, out = run(trees[side], command)
                    seconds[side].append(took)
                    cpu[side].append(used)
                    outputs[side].append(out)
                    print(f"round {round_ + 1} {side}: {took:.1f} s", flush=True)
        finally:
            remove(base)
    print(f"\n{' '.join(command)}: {options.base} (base) against {ROOT} (this), "
          f"{options.rounds} alternating rounds each")
    for label, figures_ in (("wall time", seconds), ("CPU time", cpu)):
        medians = {side: statistics.median(times) for side, times in figures_.items()}
        print(f"  {label}: base {spread(figures_['base'])}, this {spread(figures_['this'])}, "
              f"this/base {ratio(medians['this'], medians['base'])}")
    print("figures, median of the rounds, [base -> this (this/base)]:")
    for line in compare(outputs):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
