"""A benchmark against another revision, in one run: the one way bench/ compares a change with
what it changes (each benchmark used to carry its own --baseline-tree or --against; only
bench_dashboard keeps its --against, two dashboards in one browser session).

    .venv/bin/python -m bench.ab [--base main] [--rounds 3] -- bench.bench_queries --runs 5000

The base revision is checked out with `git worktree add --detach` into a temporary folder
(removed afterwards), and this checkout's bench/ is copied over its own, so both sides run the
very same benchmark code and only the product differs. Then `python -m MODULE ARGS...` runs
--rounds times in each tree, the sides alternating (base, this, this, base, ...) so that both
see the same neighbours on a shared machine. Each run's working directory is its tree, which
Python puts first on sys.path: `budgetscope`, `ingest`, `store`... are that tree's, not the
editable install's; both use this environment's packages. The budget SDK is not at a tree's
root but in its sdk/, which the editable install maps to this checkout's whatever the working
directory: each run gets its tree's sdk/ first on PYTHONPATH, so `budgetscope_sdk` is that
tree's too.

For a change that moves code between packages, this bench/ cannot run on the base (it imports
what the base does not have): with --own-bench the base keeps its own bench/ and runs its own
copy of the benchmark, `python -m MODULE` where MODULE's folder is a package there, else
MODULE's file as a script (`python bench/bench_queries.py ARGS...`, as bench/ ran before it
became a package); --base-command "bench/NAME.py --old-option 1" gives the base side's
command outright (what follows `python`; implies --own-bench).

Any module runs so, not only bench's: `-- sample_traces.generate --runs 3000 --format pb-stream
--out /tmp/ab.pb` compares the sample generator.

Printed: each side's wall and CPU time (median and range; the CPU time, user + system of the
run and its subprocesses, moves less with the neighbours' load) with this/base, then every
figure of the benchmark's output side by side: a line of this tree's output is paired with the
base's line of the same words (numbers aside, the n-th such line with the n-th; a line not
printed alike by every run of both sides is left out, and counted), and each number on it is
given as [base median -> this median (this/base)], or once when both are the same; with
--ranges, as [base median (min-max) -> this median (min-max) this/base]. Figures, never
assertions: which ratio is better depends on the figure.

A benchmark's files (--workdir and the like) are shared by both sides: let the first round
build them for both, or give each side its own, as `{side}` in the commands is replaced by
`base` or `this` (`--workdir /tmp/ab-{side}`).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
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


def checkout(revision: str, into: Path, own_bench: bool) -> Path:
    """`revision` as a worktree at `into`, with this checkout's bench/ in place of its own
    unless `own_bench`."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(into),
                    revision], check=True)
    if own_bench:
        return into
    shutil.rmtree(into / "bench", ignore_errors=True)
    shutil.copytree(ROOT / "bench", into / "bench",
                    ignore=shutil.ignore_patterns("__pycache__", "out"))
    return into


def own_command(tree: Path, command: list[str]) -> list[str]:
    """What follows `python` to run MODULE ARGS... with `tree`'s own copy of MODULE: `-m MODULE`
    if its folder is a package there, else its file as a script."""
    module, *arguments = command
    script = Path(*module.split(".")).with_suffix(".py")
    if (tree / script).is_file() and not (tree / script.parent / "__init__.py").is_file():
        return [str(script), *arguments]
    return ["-m", *command]


def side_commands(base: Path, command: list[str], own_bench: bool,
                  base_command: list[str] | None) -> dict[str, list[str]]:
    """What follows `python` on each side, with `{side}` replaced by the side's name."""
    this = ["-m", *command]
    commands = {"base": base_command or (own_command(base, command) if own_bench else this),
                "this": this}
    return {side: [part.replace("{side}", side) for part in argv]
            for side, argv in commands.items()}


def remove(tree: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                   check=False, capture_output=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_environment(tree: Path) -> dict[str, str]:
    """This environment, with `tree`'s budget SDK (sdk/) first on PYTHONPATH: ahead of the
    editable install's import hook, which would give every tree this checkout's SDK."""
    path = os.pathsep.join(part for part in (str(tree / "sdk"), os.environ.get("PYTHONPATH"))
                           if part)
    return {**os.environ, "PYTHONPATH": path}


def run(tree: Path, command: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, its own subprocesses included) and standard
    output of `python command...` in `tree`."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, *command], cwd=tree, capture_output=True, text=True,
                          env=tree_environment(tree))
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed in {tree} ({done.returncode}):\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return seconds, cpu, done.stdout


def figures(output: str) -> dict[tuple[str, int], list[float]]:
    """Each line's numbers, keyed by its words (numbers replaced, spaces collapsed: a number's
    padding may differ) and its rank among the lines of the same words."""
    seen: dict[str, int] = defaultdict(int)
    found = {}
    for line in output.splitlines():
        numbers = NUMBER.findall(line)
        if not numbers:
            continue
        words = " ".join(NUMBER.sub("#", line).split())
        found[(words, seen[words])] = [float(n.replace(",", "")) for n in numbers]
        seen[words] += 1
    return found


def spread(values: list[float]) -> str:
    """Median and range, in seconds."""
    return f"{statistics.median(values):.2f} s [{min(values):.2f}-{max(values):.2f}]"


def ratio(this: float, base: float) -> str:
    return f"{this / base:.2f}x" if base else "-"


def compare(outputs: dict[str, list[str]], ranges: bool = False) -> tuple[list[str], int]:
    """The lines of this tree's last output, each number as base -> this (this/base), and how
    many of its lines with numbers were left out (not in every round of both sides alike)."""
    rounds = {side: [figures(text) for text in texts] for side, texts in outputs.items()}
    lines, left_out = [], 0
    for key in rounds["this"][-1]:
        widths = {len(found[key]) if key in found else -1
                  for side in rounds for found in rounds[side]}
        if len(widths) != 1 or -1 in widths:
            left_out += 1
            continue
        words, parts = key[0].split("#"), []
        for index in range(widths.pop()):
            base, this = ([found[key][index] for found in rounds[side]]
                          for side in ("base", "this"))
            middle = {"base": statistics.median(base), "this": statistics.median(this)}
            if base == this or (middle["base"] == middle["this"] and not ranges):
                parts.append(f"{middle['this']:g}")
            elif ranges:
                parts.append(f"[{middle['base']:g} ({min(base):g}-{max(base):g}) -> "
                             f"{middle['this']:g} ({min(this):g}-{max(this):g}) "
                             f"{ratio(middle['this'], middle['base'])}]")
            else:
                parts.append(f"[{middle['base']:g} -> {middle['this']:g} "
                             f"({ratio(middle['this'], middle['base'])})]")
        lines.append("".join(w + (parts[i] if i < len(parts) else "")
                             for i, w in enumerate(words)))
    return lines, left_out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side")
    parser.add_argument("--own-bench", action="store_true",
                        help="the base runs its own copy of the benchmark, not this bench/")
    parser.add_argument("--base-command", type=shlex.split, default=None,
                        help="what follows `python` on the base side, e.g. \"bench/NAME.py "
                             "--runs 5000\" (implies --own-bench)")
    parser.add_argument("--ranges", action="store_true",
                        help="each figure as median (min-max) on both sides")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- MODULE [ARGS...], e.g. -- bench.bench_queries --runs 5000")
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("name the benchmark: -- bench.NAME [ARGS...]")
    own_bench = options.own_bench or options.base_command is not None
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as folder:
        base = checkout(options.base, Path(folder) / "base", own_bench)
        try:
            trees = {"base": base, "this": ROOT}
            commands = side_commands(base, command, own_bench, options.base_command)
            for side in trees:
                print(f"{side}: python {shlex.join(commands[side])}", flush=True)
            # A side's own files, named in its output, are named alike on both for the pairing.
            templates = {part for argv in (command, options.base_command or [])
                         for part in argv if "{side}" in part}
            seconds: dict[str, list[float]] = {side: [] for side in trees}
            cpu: dict[str, list[float]] = {side: [] for side in trees}
            outputs: dict[str, list[str]] = {side: [] for side in trees}
            for round_ in range(options.rounds):
                for side in (trees if round_ % 2 == 0 else list(trees)[::-1]):
                    took, used, out = run(trees[side], commands[side])
                    for template in templates:
                        out = out.replace(template.replace("{side}", side), template)
                    seconds[side].append(took)
                    cpu[side].append(used)
                    outputs[side].append(out)
                    print(f"round {round_ + 1} {side}: {took:.1f} s", flush=True)
        finally:
            remove(base)
    print(f"\n{' '.join(command)}: {options.base} (base"
          f"{', its own bench' if own_bench else ''}) against {ROOT} (this), "
          f"{options.rounds} alternating rounds each")
    for label, figures_ in (("wall time", seconds), ("CPU time", cpu)):
        medians = {side: statistics.median(times) for side, times in figures_.items()}
        print(f"  {label}: base {spread(figures_['base'])}, this {spread(figures_['this'])}, "
              f"this/base {ratio(medians['this'], medians['base'])}")
    shown = "[base (min-max) -> this (min-max) this/base]" if options.ranges else \
        "[base -> this (this/base)]"
    print(f"figures, median of the rounds, {shown}:")
    lines, left_out = compare(outputs, options.ranges)
    for line in lines:
        print(f"  {line}")
    if left_out:
        print(f"  ({left_out} line(s) of this side's figures not printed alike by every run "
              "of both sides: left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
