"""Time prefix models on one TF Lite runtime, in the runtime environment: ``python op_profile_runner.py RUNTIME OUT.json IDS.npy RUNS ROUNDS MODEL...``.

Runs beside the runtimes only (standard library, numpy, the runtime): ``op_profile.py`` starts
it. Each model is loaded with the runtime's default delegates and without them (``_nd``), one
thread, and invoked on one row of real token ids; per round, every (model, delegates) pair in
a shuffled order gets ``RUNS`` timed invokes and keeps their median, so that load drifts hit
all pairs alike. Which op of a prefix runs inside XNNPACK is read from the DELEGATE nodes.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time

import numpy as np

from edge_build.board.runtime import interpreter_module, runtime_version

WARMUP = 200


def interpreter(runtime: str, path: str, default_delegates: bool):
    module = interpreter_module(runtime)
    options = {} if default_delegates else {"experimental_op_resolver_type": module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    loaded = module.Interpreter(model_path=path, num_threads=1, **options)
    loaded.allocate_tensors()
    return loaded


def last_op_delegated(loaded) -> bool:
    """Whether the prefix's last op ran inside a DELEGATE node: its output is one of theirs."""
    ops = loaded._get_ops_details()
    delegated = {t for op in ops if op["op_name"] == "DELEGATE" for t in op["outputs"]}
    last = [op for op in ops if op["op_name"] != "DELEGATE"][-1]
    return bool(set(last["outputs"]) & delegated)


def main(runtime: str, out: str, ids_path: str, runs: str, rounds: str, *models: str) -> int:
    ids = np.load(ids_path)[:1].astype(np.int32)
    loaded = {}
    for path in models:
        for default_delegates in (True, False):
            model = interpreter(runtime, path, default_delegates)
            model.set_tensor(model.get_input_details()[0]["index"], ids)
            for _ in range(WARMUP):
                model.invoke()
            loaded[(path, default_delegates)] = model
    medians: dict = {key: [] for key in loaded}
    keys = list(loaded)
    for _ in range(int(rounds)):
        random.shuffle(keys)
        for key in keys:
            invoke, timings = loaded[key].invoke, []
            for _ in range(int(runs)):
                started = time.perf_counter_ns()
                invoke()
                timings.append(time.perf_counter_ns() - started)
            medians[key].append(statistics.median(timings) / 1e3)
    rows = [
        {
            "model": path,
            "default_delegates": default_delegates,
            "median_us": statistics.median(medians[(path, default_delegates)]),
            "last_op_delegated": last_op_delegated(loaded[(path, default_delegates)]),
        }
        for path, default_delegates in loaded
    ]
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"runtime": runtime, "version": runtime_version(runtime), "rows": rows}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
