"""Where each TF Lite model's time goes, op by op, on tflite-runtime and ai-edge-litert: why INT8 is slower than float32 on one of them.

    python benchmarks/op_profile.py [--quick] [--build-dir build] [--out-dir benchmarks/results]

Neither runtime's Python API has an op profiler, so each model of the ``host`` build is cut
after every op (ops 0..k kept and op k's first output made the model's output, rewritten
with TF Lite's own flatbuffer schema) and every prefix is timed at batch 1, one thread, on
one row of real token ids, with the runtime's default delegates and without them
(``op_profile_runner.py``, in the build's runtime environment for the ``host`` profile).
An op's time is its prefix's median minus the previous prefix's; the first op's row also
holds the interpreter's cost per call. Differences under ~0.3 us are noise, and a few come
out negative. Whether an op ran in XNNPACK is read from the DELEGATE nodes of its prefix.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from common import REPO, argument_parser, markdown_table, missing_outputs, runtime_environment, write_results

from edge_build.isolated import run_isolated
from edge_build.layout import Layout
from edge_build.runtime_envs import launcher, unavailable

MODELS = ("tflite_int8", "tflite_fp32")
RUNTIMES = ("tflite-runtime", "ai-edge-litert")
FULL = (2000, 5)  # timed invokes per round, rounds
QUICK = (20, 1)
TIMEOUT_S = 1800


def prefixes(model: Path, folder: Path) -> list[dict]:
    """Each prefix of ``model`` written to ``folder``: its last op, that op's tensors, and the file."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    content = model.read_bytes()
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    whole = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    graph = whole.subgraphs[0]

    def described(indices) -> str:
        tensors = [graph.tensors[i] for i in indices if i >= 0]
        return ", ".join(("x".join(map(str, t.shape)) or "scalar") + " " + type_names[t.type].lower() for t in tensors)

    found = []
    for k, op in enumerate(graph.operators):
        cut = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
        cut.subgraphs[0].operators = cut.subgraphs[0].operators[: k + 1]
        cut.subgraphs[0].outputs = [op.outputs[0]]
        cut.signatureDefs = []  # they name the whole model's outputs
        builder = flatbuffers.Builder(1024)
        builder.Finish(cut.Pack(builder), file_identifier=b"TFL3")
        path = folder / f"{model.stem}-{k:03d}.tflite"
        path.write_bytes(builder.Output())
        code = whole.operatorCodes[op.opcodeIndex]
        found.append(
            {
                "op": op_names[max(code.builtinCode, code.deprecatedBuiltinCode)],
                "tensors": f"{described(op.inputs)} -> {described(op.outputs)}",
                "path": path,
            }
        )
    return found


def time_prefixes(environment: dict, runtime: str, paths: list[Path], ids: Path, counts: tuple[int, int], scratch: Path) -> dict | str:
    """The runner's result for ``paths`` on ``runtime``, or why there is none."""
    reason = unavailable(environment, runtime)
    if reason:
        return f"not run: {reason}"
    python, variables = launcher(environment)
    out = scratch / f"{runtime}.json"
    command = [*python, str(REPO / "benchmarks" / "op_profile_runner.py"), runtime, str(out), str(ids), *map(str, counts), *map(str, paths)]
    done, abnormal = run_isolated(command, TIMEOUT_S, variables)
    if abnormal or done.returncode != 0:
        return abnormal or "failed: " + (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return json.loads(out.read_text(encoding="utf-8"))


def configurations(timed: dict) -> list[tuple[str, str, bool]]:
    """(column name, runtime, default delegates) for every runtime that ran."""
    return [
        (f"{runtime}{'' if default else ' (no delegates)'}", runtime, default)
        for runtime in RUNTIMES
        if isinstance(timed[runtime], dict)
        for default in (True, False)
    ]


def profile_rows(ops: list[dict], timed: dict) -> list[dict]:
    """Per op: its time on each runtime and delegate setting (this prefix minus the previous), and whether XNNPACK ran it."""
    medians = {
        (runtime, row["model"], row["default_delegates"]): row
        for runtime in RUNTIMES
        if isinstance(timed[runtime], dict)
        for row in timed[runtime]["rows"]
    }
    rows = []
    for k, op in enumerate(ops):
        row = {"op": op["op"], "tensors": op["tensors"], "us": {}, "xnnpack": {}}
        for column, runtime, default in configurations(timed):
            now = medians[(runtime, str(op["path"]), default)]
            before = medians[(runtime, str(ops[k - 1]["path"]), default)]["median_us"] if k else 0.0
            row["us"][column] = now["median_us"] - before
            if default:
                row["xnnpack"][runtime] = now["last_op_delegated"]
        rows.append(row)
    return rows


def table(rows: list[dict], timed: dict) -> str:
    columns = configurations(timed)
    headers = ["#", "op", "in -> out", *(f"{c} us" for c, _, _ in columns), *(f"XNNPACK on {r}" for r in RUNTIMES if isinstance(timed[r], dict))]
    body = [
        [k, r["op"], r["tensors"], *(r["us"][c] for c, _, _ in columns), *("yes" if r["xnnpack"][x] else "no" for x in r["xnnpack"])]
        for k, r in enumerate(rows)
    ]
    body.append(["", "**total**", "", *(sum(r["us"][c] for r in rows) for c, _, _ in columns), *([""] * len(rows[0]["xnnpack"]))])
    return markdown_table(headers, body)


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__.splitlines()[0], build_dir="a finished host build", runtimes=True).parse_args(argv)
    build = args.build_dir.resolve()
    layout = Layout(build)
    host = layout.target("host")
    if missing_outputs([*(host.artifact(m) for m in MODELS), layout.token_ids("val")], "build the host target first: scons"):
        return 2
    environment = runtime_environment(build, args.runtime_envs)
    if environment is None:
        return 2
    counts = QUICK if args.quick else FULL
    results: dict = {"build_dir": str(build), "invokes_per_round": counts[0], "rounds": counts[1], "models": {}}
    markdown = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        ops = {name: prefixes(host.artifact(name), scratch) for name in MODELS}
        paths = [op["path"] for name in MODELS for op in ops[name]]
        timed = {runtime: time_prefixes(environment, runtime, paths, layout.token_ids("val"), counts, scratch) for runtime in RUNTIMES}
        for runtime, outcome in timed.items():
            print(f"{runtime}: {outcome if isinstance(outcome, str) else 'timed ' + str(len(paths)) + ' prefixes'}", flush=True)
        for name in MODELS:
            rows = profile_rows(ops[name], timed)
            results["models"][name] = {"file": str(host.artifact(name)), "ops": rows}
            markdown += [f"### {host.artifact(name).name}", "", table(rows, timed)]
    results["runtimes"] = {r: (t if isinstance(t, str) else {"version": t["version"]}) for r, t in timed.items()}
    write_results(args.out_dir, "op_profile", results, "\n".join(markdown), args.quick, environment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
