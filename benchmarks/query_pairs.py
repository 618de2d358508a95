"""The read questions of two checkouts side by side, sample by sample.

    .venv/bin/python -m benchmarks.query_pairs --baseline DIR [--jobs 30000] [--db sqlite|postgres|both]
                                               [--graph chains|hubs|both] [--samples 60]

Two runs of `benchmarks.query` one after the other differ by more than the changes worth measuring: on
this 2-core machine two runs of the same code differed by up to 1.7x on every question. Here each
checkout (this one and the one at DIR, e.g. a `git worktree` of an earlier release) builds its own
store with its own `benchmarks.query.build` / `build_hubs` in a process of its own, both stores the
same graph. Then every sample of every question is asked of both processes in turn, with the same
random arguments, the order swapped every sample, one process waiting while the other answers: what
the machine does meanwhile falls on both alike. Each process times its own call (the
`benchmarks.query` questions: the functions the API serves), so the pipe between them is not timed.

Printed per question: each side's p50 and p95 in ms, the ratio of the p50s (this / baseline), in how
many samples this checkout answered faster, and the two-sided sign test's p-value of that count (the
chance of a split at least that uneven if neither side were faster). Questions one checkout lacks
are left out. `--baseline .` (this checkout against itself) shows what the pairing leaves of the
machine's noise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

# In a worker, the checkout's own module (the worker runs with that checkout first on its path).
from benchmarks.query import percentiles

THIS_CHECKOUT = Path(__file__).resolve().parent.parent
WARM_UP = 3


class Side:
    """A worker process (this file with `--worker`) importing the benchmark and the store of one checkout."""

    def __init__(self, label: str, checkout: Path, url: str, graph: str, jobs: int) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        command = [sys.executable, __file__, "--worker", url, "--graph", graph, "--jobs", str(jobs)]
        self.process = subprocess.Popen(command, env=env, cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.checkout = checkout

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def ready(self) -> list[str]:
        """Wait for the store to be built; the worker's question names."""
        _, out = self._pipes()
        line = out.readline()
        if not line:
            raise SystemExit(f"{self.label}: the worker ended before its store was built")
        hello = json.loads(line)
        for module_file in hello["modules"]:
            if not Path(module_file).resolve().is_relative_to(self.checkout.resolve()):
                raise SystemExit(f"{self.label}: imported {module_file}, not its checkout's module")
        print(f"{self.label}: built in {hello['built_s']:.0f} s", flush=True)
        return list(hello["questions"])

    def ask(self, question: str, seed: int) -> float:
        into, out = self._pipes()
        into.write(json.dumps({"question": question, "seed": seed}) + "\n")
        into.flush()
        return float(json.loads(out.readline())["ms"])

    def close(self) -> None:
        into, _ = self._pipes()
        into.close()
        self.process.wait(timeout=120)


def worker(url: str, graph: str, jobs: int) -> None:
    """Build the graph with this checkout's code, then answer questions from stdin with the time each took."""
    import benchmarks.query as bench
    import consumer.store
    from consumer.query import marquez as mq

    store = consumer.store.open_store(url)
    started = time.perf_counter()
    calls: dict[str, Callable[[random.Random], Any]]
    if graph == "chains":
        counts = bench.build(store, jobs)
        calls = dict(bench.questions(store, counts["chains"]))
    else:
        counts = bench.build_hubs(store, jobs)
        groups = counts["groups"]

        def hub_lineage(rng: random.Random) -> Any:
            answer = mq.lineage_graph(store, bench.hub_node(rng, groups), 20)
            bench.check_hub_answer(answer)
            return answer

        calls = {"Marquez /lineage depth 20 (hub-heavy)": hub_lineage}
    built = time.perf_counter() - started
    modules = [bench.__file__, consumer.store.__file__]
    print(json.dumps({"built_s": built, "questions": list(calls), "modules": modules}), flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        call = calls[asked["question"]]
        rng = random.Random(asked["seed"])
        began = time.perf_counter()
        call(rng)
        print(json.dumps({"ms": (time.perf_counter() - began) * 1000}), flush=True)
    store.dispose()


def paired(this: Side, baseline: Side, question: str, samples: int) -> tuple[list[float], list[float]]:
    """(this side's timings, the baseline's) of one question, sample i asked with seed i of both, the
    order swapped every sample."""
    for seed in range(-WARM_UP, 0):
        this.ask(question, seed)
        baseline.ask(question, seed)
    ours: list[float] = []
    theirs: list[float] = []
    for seed in range(samples):
        if seed % 2:
            theirs.append(baseline.ask(question, seed))
            ours.append(this.ask(question, seed))
        else:
            ours.append(this.ask(question, seed))
            theirs.append(baseline.ask(question, seed))
    return ours, theirs


def sign_test(successes: int, trials: int) -> float:
    """Two-sided p-value of `successes` in `trials` fair coin tosses."""
    extreme = min(successes, trials - successes)
    tail = sum(math.comb(trials, k) for k in range(extreme + 1)) / 2**trials
    return min(1.0, 2 * tail)


def report(this: Side, baseline: Side, samples: int) -> None:
    ours_names = this.ready()
    theirs_names = set(baseline.ready())
    header = f"{'question':40} {'p50 base':>9} {'p50 this':>9} {'p95 base':>9} {'p95 this':>9} {'ratio':>6} {'faster':>7}"
    print(f"{header} {'sign p':>7}")
    for question in (name for name in ours_names if name in theirs_names):
        ours, theirs = paired(this, baseline, question, samples)
        faster = sum(o < t for o, t in zip(ours, theirs, strict=True))
        (base50, base95), (this50, this95) = percentiles(theirs), percentiles(ours)
        print(
            f"{question:40} {base50:9.1f} {this50:9.1f} {base95:9.1f} {this95:9.1f} {this50 / base50:6.2f}"
            f" {faster:3}/{samples:<3} {sign_test(faster, samples):7.3f}",
            flush=True,
        )


@contextmanager
def database(db: str) -> Iterator[str]:
    """An empty store URL (`benchmarks.query.empty_store`), dropped afterwards."""
    from benchmarks.query import empty_store  # this checkout's: a baseline's benchmark may not have it

    with tempfile.TemporaryDirectory() as tmp:
        url, drop = empty_store(db, tmp)
        try:
            yield url
        finally:
            drop()


def compare(baseline: Path, db: str, graph: str, jobs: int, samples: int) -> None:
    print(f"\n{db}, {graph}, {jobs:,} jobs: baseline {baseline}", flush=True)
    with ExitStack() as stack:
        this_url = stack.enter_context(database(db))
        base_url = stack.enter_context(database(db))
        this = Side("this", THIS_CHECKOUT, this_url, graph, jobs)
        base = Side("baseline", baseline, base_url, graph, jobs)
        try:
            report(this, base, samples)
        finally:
            this.close()
            base.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--graph", choices=("chains", "hubs", "both"), default="both")
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.graph, args.jobs)
        return
    if args.baseline is None:
        parser.error("--baseline is required")
    for graph in ("chains", "hubs") if args.graph == "both" else (args.graph,):
        for db in ("sqlite", "postgres") if args.db == "both" else (args.db,):
            compare(args.baseline.resolve(), db, graph, args.jobs, args.samples)


if __name__ == "__main__":
    main()
