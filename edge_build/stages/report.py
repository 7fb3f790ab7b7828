"""Stage *report*: render a target's records as ``report.md`` and the console headline; it computes nothing.

Reads the evaluate stage's ``eval.json``, the target's conversion records and
runtime checks (``runtime_checks.json``, and ``recommended.json``: what to
deploy on each runtime, as the runtime checks decided it), the data
``summary.json`` and ``report.json``, the quality gate's ``quality.json``,
``train_log.json``, for the XLA SavedModel ``xla_checks.json`` and, for INT8,
the calibration summary. One renderer per section; a raw-text model's section
lists its custom and Flex ops, its conversion path, calibration route and
tokenizer check, and the runtimes' footprint. Loads neither TensorFlow nor numpy
(``tests/test_report_golden.py`` renders a real build's records).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

from edge_build import cli, recommend, saved_model, xla
from edge_build.artifacts import ARTIFACTS, logit_error
from edge_build.atomic import atomic_output
from edge_build.board.decision import golden_size_words
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.errors import StageError
from edge_build.layout import Target
from edge_build.markdown import table
from edge_build.records import read_json
from edge_build.runtime_envs import describe
from edge_build.stage_files import add_files, stage_inputs
from edge_build.typed_records import Evaluation, Recommended, RuntimeCheckRecord


@dataclasses.dataclass(frozen=True)
class ReportInputs:
    """The shared records a target's report reads (the target's own come from ``layout.Target``)."""

    evaluation: Path
    data_summary: Path
    data_report: Path
    quality: Path
    train_log: Path
    calibration_summary: Path | None = None
    xla_checks: Path | None = None


def render_runtime_checks(summary: RuntimeCheckRecord, profile: TargetProfile) -> list[str]:
    settings = summary.settings
    lines = [
        "",
        "## Runtime checks",
        "",
        f"Golden set: {summary.golden_examples} test examples (`golden.npz`); each runtime ran in its own process "
        f"({settings['threads']} thread(s), batch {settings['batch']}, {settings['warmup']} warm-up and {settings['runs']} timed invokes). "
        + golden_size_words(summary.golden_examples, summary.golden_examples_to_decide, summary.test_examples),
        "",
    ]
    environment = summary.environment
    lines[-1:-1] = ["", f"Board software stack: {describe(environment)} (`{environment['python'][-1]}`)."]
    if environment["emulated"]:
        lines[-1:-1] = [
            "",
            f"The runtimes ran as their {environment['arch']} builds under qemu {environment['emulator']['version']} user-mode emulation "
            "(`build/runtime-envs/`): parity is checked as on a board; timings are not representative, so latency budgets are reported, not enforced.",
        ]
    rows = []
    for outcome in summary.outcomes():
        r = outcome.record
        if not outcome.ran:
            rows.append([outcome.artifact, outcome.runtime, "", "", "", "", "", "", f"{r['status']} (optional runtime: reported, not gated)"])
            continue
        p, host = r["parity"], r["runtime_vs_tf_lite"]
        rows.append(
            [
                outcome.artifact,
                f"{outcome.runtime} {r['runtime_version']}",
                r["machine"] + (" (emulated)" if r["emulated"] else ""),
                f"{p['top1_agreement']:.4f}",
                logit_error(outcome.artifact, p["max_abs_logit_error"]),
                logit_error(outcome.artifact, p["mean_abs_logit_error"]),
                f"{p['accuracy']:.4f}",
                f"{host['max_abs_logit_error']:.3g}",
                "pass" + "".join(f"; *undecided*: {note}" for note in r["undecided"]["parity"]),
            ]
        )
    lines += table(
        [
            "artifact",
            "runtime",
            "machine",
            "top-1 agreement",
            "max abs Δlogit",
            "mean abs Δlogit",
            "accuracy",
            "max abs Δ vs tf.lite.Interpreter",
            "gate",
        ],
        rows,
    )
    limits = profile.tolerances.limits()
    gates = "; ".join(
        f"{name}: "
        + ", ".join(f"{what} {op} {bound_words(limits[key])} ({keys_words(key, limits[key])})" for what, _, op, key in ARTIFACTS[name].parity)
        for name in summary.artifacts
    )
    lines += [
        "",
        f"Tolerances ({profile.source}), the same checks `bench.py --parity` applies on the board: {gates}. "
        "A proportion's point estimate passes or fails its gate; a pass whose one-sided exact 95% bound does not clear "
        "the limit is *undecided*, here and on the board alike. "
        "The tf.lite.Interpreter column compares the runtime with TensorFlow's own interpreter on the same file: "
        "a difference there is the runtime's version, not quantization.",
        "",
        "Latency per invoke:",
        "",
    ]
    rows = []
    for outcome in summary.ran():
        r, t = outcome.record, outcome.record["latency"]
        gate = "not enforced (emulated)" if r["emulated"] else f"pass (p50 <= {r['latency_budget_ms']:g} ms)"
        rows.append(
            [
                outcome.artifact,
                outcome.runtime,
                f"{t['load_ms']:.1f}",
                f"{t['first_invoke_ms']:.2f}",
                *(f"{t[k]:.1f}" for k in ("p50_us", "p90_us", "p99_us", "mean_us", "std_us", "min_us", "max_us")),
                f"{t['examples_per_second']:.0f}",
                f"{r['peak_rss_mb']:.0f}",
                gate,
            ]
        )
    lines += table(
        [
            "artifact",
            "runtime",
            "load ms",
            "first ms",
            "p50 µs",
            "p90 µs",
            "p99 µs",
            "mean µs",
            "std µs",
            "min µs",
            "max µs",
            "examples/s",
            "peak RSS MB",
            "budget",
        ],
        rows,
    )
    lines += ["", "![latency per invoke](latency.png)"]
    lines += render_narrowed_runtimes(profile)
    if any(ARTIFACTS[name].interface_row.tokenizer_inside for name in summary.artifacts):
        lines += render_footprint(summary)
    return lines


def render_narrowed_runtimes(profile: TargetProfile) -> list[str]:
    """Which artifacts were checked on only some of the profile's runtimes, and why (nothing when every artifact ran on all)."""
    everywhere = {r.name for r in profile.runtimes}
    lines = []
    for name in profile.runtime_artifacts:
        checked = [r.name for r in profile.runtimes_for(name)]
        if set(checked) != everywhere:
            skipped = ", ".join(sorted(everywhere - set(checked)))
            lines += ["", f"{name} is checked only on {', '.join(checked)}: it {ARTIFACTS[name].interface_row.words}, which {skipped} cannot run."]
    return lines


def render_footprint(summary: RuntimeCheckRecord) -> list[str]:
    """Each runtime's installed size and peak memory side by side: what running Flex costs against a plain TF Lite runtime."""
    installed = summary.environment["runtimes"]
    peaks: dict[str, dict[str, float]] = {}
    for outcome in summary.ran():
        peaks.setdefault(outcome.runtime, {})[outcome.artifact] = outcome.record["peak_rss_mb"]
    rows = [
        [
            f"{runtime} {installed[runtime]['version'] or '(not provisioned)'}",
            "not measured" if installed[runtime].get("disk_mb") is None else f"{installed[runtime]['disk_mb']:.0f}",
            ", ".join(f"{artifact} {mb:.0f}" for artifact, mb in peaks.get(runtime, {}).items()) or "not run",
        ]
        for runtime in installed
    ]
    return [
        "",
        "Footprint of each runtime (disk: the runtime's installed packages in the runtime environment; peak RSS: the checking process's, per artifact):",
        "",
        *table(["runtime", "disk MB", "peak RSS MB"], rows),
    ]


def op_list(names) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"


def render_raw_text_model(name: str, record: dict, profile: TargetProfile) -> list[str]:
    """Which ops a raw-text model holds, which conversion path each took and why, how it was calibrated and its tokenizer checked."""
    runtimes = ", ".join(r.name for r in profile.runtimes_for(name))
    lines = [
        "",
        f"### {name}: raw text in, tokenizer inside",
        "",
        f"`{ARTIFACTS[name].path}` takes UTF-8 strings and returns logits; tensorflow-text's tokenizer runs inside it. "
        f"It holds the tensorflow-text custom ops {op_list(record['custom_ops'])} and the Flex ops {op_list(record['flex_ops'])}, "
        f"so it runs only where both have kernels: {runtimes}.",
        "",
        "Conversion path, each attempt in order:",
        "",
    ]
    lines += table(
        ["step", "result", "reason", "custom ops", "Flex ops"],
        [
            [a["step"], "converted" if a["ok"] else "refused", a["reason"], op_list(a["custom_ops"]), op_list(a["flex_ops"])]
            for a in record["conversion_path"]
        ],
    )
    paths = record["op_paths"]
    lines += ["", "Which op took which path:", ""]
    lines += table(
        ["op", "path", "why"],
        [[f"`{op}`", "tensorflow-text custom op", why] for op, why in paths["custom"].items()]
        + [[f"`{op}`", "SELECT_TF_OPS (Flex)", why] for op, why in paths["flex"].items()]
        + [[op_list(paths["builtin"]), "TF Lite builtins", "a builtin kernel exists"]],
    )
    calibration, check = record["calibration"], record["token_ids_check"]
    lines += [
        "",
        f"Calibration route: {calibration['route']} ({calibration['samples']} samples; "
        f"ranges set for {calibration['float_activations']} float activations): {calibration['why']}.",
        "",
        f"Tokenizer: the token ids the converted model itself produced on {check['runtime']} for {check['examples']} examples "
        f"({' and '.join(check.get('splits', ['test']))} splits) were compared with the training tokenizer's: {check['mismatches']} mismatches. "
        f"Its test-split logits (the figures above, and the runtime checks' tf.lite.Interpreter column) come from {record['test_logits_runtime']} "
        "on the raw texts: TF 2.21's tf.lite.Interpreter has no Flex delegate.",
    ]
    return lines


@dataclasses.dataclass(frozen=True)
class Context:
    """What the other stages recorded, read once for the page."""

    data_summary: dict
    data_report: dict
    quality: dict
    train_log: dict
    conversion_records: dict
    runtime_checks: RuntimeCheckRecord | None
    xla_checks: dict | None
    calibration: dict | None
    recommended: Recommended | None

    @classmethod
    def read(cls, profile: TargetProfile, inputs: ReportInputs, target: Target) -> Context:
        return cls(
            data_summary=read_json(inputs.data_summary),
            data_report=read_json(inputs.data_report),
            quality=read_json(inputs.quality),
            train_log=read_json(inputs.train_log),
            conversion_records={name: read_json(target.conversion_record(name)) for name in profile.runtime_artifacts},
            runtime_checks=RuntimeCheckRecord.read(target.runtime_checks) if profile.runtime_artifacts else None,
            xla_checks=read_json(inputs.xla_checks) if inputs.xla_checks else None,
            calibration=read_json(inputs.calibration_summary) if inputs.calibration_summary else None,
            recommended=Recommended.read(target.recommended) if profile.runtime_artifacts else None,
        )


def interval(figures: dict) -> str:
    low, high = figures["ci95"]
    return f"{low:.3f}–{high:.3f}"


def keys_words(key: str, bound) -> str:
    """The profile keys behind a tolerance: a scaled logit bound's factors and the key that would override them, or the key itself."""
    if isinstance(bound, dict):
        return f"`{key.removesuffix('_max_abs_logit')}_logit_rtol`, `logit_atol`; `{key}` overrides"
    return f"`{key}`"


def bound_words(bound) -> str:
    """A tolerance as ``board.decision.limit_of`` applies it: a number, or a logit-error bound scaled by the reference's logits."""
    if isinstance(bound, dict):
        return f"{bound['rtol']:.3g} × the reference's largest |logit| + {bound['atol']:g}"
    return f"{bound:g}"


def render_xla_checks(checks: dict) -> list[str]:
    tolerance = checks["parity"]["tolerance"]
    lines = [
        "",
        "## XLA SavedModel: both signatures, compiled and warmed up",
        "",
        f"Every figure below was taken on {xla.describe(checks['device'])} (`xla_checks.json`). "
        f"Parity: both signatures of `saved_model_xla` on all {checks['parity']['examples']} test examples against the reference CPU SavedModel "
        f"(`classify_ids` on the reference's token ids, `serving_default` on the raw texts), max abs Δlogit held to {bound_words(tolerance['bound'])} "
        f"({keys_words(tolerance['key'], tolerance['bound'])}).",
        "",
    ]
    rows = [
        [
            f"`{signature}`",
            f"{f['max_abs_logit_error']:.3g}",
            f"{f['limit']:.3g}",
            f"{f['mean_abs_logit_error']:.3g}",
            f"{f['top1_agreement']:.4f}",
            str(f.get("labels_differing", "— (no label output)")),
            "pass",
        ]
        for signature, f in checks["parity"]["signatures"].items()
    ]
    lines += table(["signature", "max abs Δlogit", "allowed", "mean abs Δlogit", "top-1 agreement", "labels differing", "gate"], rows)
    lines += [
        "",
        "Compilation, each signature in a fresh process of its own (XLA's dump directory counts the modules it compiles; "
        "the first call at a batch size compiles, the steady-state calls after it must not):",
        "",
    ]
    rows = [
        [
            f"`{signature}`",
            c["batch"],
            c["modules_compiled"],
            f"{c['first_call_ms']:.1f}",
            f"{c['steady_p50_ms']:.3f}",
            f"{c['steady_min_ms']:.3f}",
            c["steady_runs"],
            c["recompiled_in_steady_calls"],
        ]
        for signature, calls in checks["compilation"].items()
        for c in calls
    ]
    lines += table(
        ["signature", "batch", "XLA modules compiled", "first call ms (compiles)", "steady p50 ms", "steady min ms", "steady calls", "recompiled"],
        rows,
    )
    warmup, control = checks["warmup"], checks["control"]
    compiled = sum(r["modules_compiled"] for r in warmup["requests"])
    lines += [
        "",
        f"Warm-up: replaying `{saved_model.WARMUP_FILE}` as TF Serving does ({len(warmup['requests'])} requests, "
        f"{compiled} XLA modules compiled, {sum(r['replay_ms'] for r in warmup['requests']):.0f} ms) left nothing to compile: "
        f"the first real call at each of its {len(warmup['real_calls_after'])} signature and batch-size pairs compiled "
        f"{sum(r['modules_compiled'] for r in warmup['real_calls_after'])} modules. "
        f"Control: the CPU flavour's `{control['signature']}`, called in that process after the replay, compiled {control['modules_compiled']} XLA modules.",
    ]
    return lines


def render_quality(quality: dict) -> list[str]:
    rows = [
        [name, f"{quality[key]['accuracy']:.4f}", interval(quality[key]), f"{quality[key]['macro_f1']:.4f}"]
        for name, key in (
            ("reference model (CPU SavedModel)", "reference"),
            (f"classical baseline: {quality['classical']['name']}", "classical"),
            (f"majority class ('{quality['majority']['label']}')", "majority"),
        )
    ]
    test = quality["mcnemar_vs_classical"]
    return (
        [
            "",
            "## Quality floor",
            "",
            "The same test split, scored by two baselines computed from the training split alone "
            "(`build/quality/quality.json`). Accuracy intervals are 95% Wilson score intervals.",
            "",
        ]
        + table(["model", "accuracy", "95% interval", "macro F1"], rows)
        + [
            "",
            f"Classical baseline: `{quality['classical']['model']}`, fixed, never tuned.",
            "",
            f"The model {'trails' if quality['gap_points'] > 0 else 'is level with or ahead of'} the classical baseline by {abs(quality['gap_points']):.1f} points "
            f"(the gate allows it to trail by {quality['margin_points']:g}); "
            f"exact McNemar test against it: {test['a_only']} examples only the model gets right, {test['b_only']} only the baseline, p = {test['p_value']:.3g}. "
            "The gate also requires the lower end of the model's interval to lie above the majority class's share.",
        ]
    )


def render_mcnemar(test: dict | None) -> list[str]:
    if test is None:
        return []
    verdict = "no evidence of a real difference" if test["p_value"] >= 0.05 else "a real difference at the 5% level"
    return [
        "",
        f"INT8 against {test['b']} (exact McNemar test on the test split): {test['a_only']} examples only {test['a']} gets right, "
        f"{test['b_only']} only {test['b']}, p = {test['p_value']:.3g}: {verdict}.",
    ]


def render_title(evaluation: Evaluation, data_headline: str) -> list[str]:
    return [f"# edge-build report: target `{evaluation.target}`", "", f"Data: {data_headline} (`data/report.md`).", ""]


def render_deploy(checks: RuntimeCheckRecord, recommended: Recommended, evaluation: Evaluation, profile: TargetProfile) -> list[str]:
    """What to deploy on each runtime, and why: the page's first table, as ``recommended.json`` says (``recommend.explained``)."""
    chosen = recommend.explained(recommended, checks, recommend.sizes_of(evaluation), profile)
    versions = {r.name: r.version for r in profile.runtimes}
    rows = [
        [
            f"{runtime} {versions[runtime]}",
            ARTIFACTS[c["artifact"]].path,
            f"{c['size_bytes'] / 1e6:.2f} MB",
            "measured" if c["measured"] else "runtime table",
            c["why"],
        ]
        for runtime, c in chosen.items()
    ]
    budget = f" within `[deploy] max_model_mb = {profile.deploy.max_model_mb:g}`" if profile.deploy.max_model_mb is not None else ""
    lines = ["## What to deploy on each runtime", ""]
    lines += [
        f"The token-id model that passed every check on the runtime and runs fastest there at batch 1{budget}; a p50 within "
        f"{recommend.TIE:g}x or {recommend.TIE_US:g} µs of the fastest is a tie, which the smaller file wins. The bundle's "
        "`classify.py` and `bench.py` run it on that runtime unless given `--model`.",
        "",
    ]
    lines += table(["runtime", "model", "size", "decided by", "why"], rows)
    notes = recommend.xnnpack_notes(profile, chosen) + tasks_notes(checks)
    return lines + ([""] + notes if notes else []) + [""]


def tasks_notes(checks: RuntimeCheckRecord) -> list[str]:
    """For an app: each Tasks-ready model that passed in its Tasks library, with its latency per text."""
    notes = []
    for outcome in checks.ran():
        row, r = ARTIFACTS[outcome.artifact], outcome.record
        if row.interface_row.report_note and not r["problems"]:
            notes.append(
                row.interface_row.report_note.format(
                    path=row.path, runtime=outcome.runtime, version=r["runtime_version"], p50_us=r["latency"]["p50_us"]
                )
            )
    return notes


def render_artifacts(evaluation: Evaluation) -> list[str]:
    """Every artifact's figures on the test split, with the INT8 model's McNemar test."""
    reference = evaluation.reference
    lines = [
        "## Artifacts on the test split",
        "",
        f"Reference: the CPU SavedModel at `{reference['path']}`, accuracy {reference['accuracy']:.4f} "
        f"(95% Wilson interval {interval(reference)}), macro F1 {reference['macro_f1']:.4f}.",
        "",
    ]
    rows = []
    for name, r in evaluation.artifacts.items():
        p = r["parity"]
        rows.append(
            [
                name,
                f"{r['size_bytes'] / 1e6:.2f} MB",
                f"{r['accuracy']:.4f}",
                interval(r),
                f"{r['macro_f1']:.4f}",
                f"{p['top1_agreement']:.4f}",
                logit_error(name, p["max_abs_logit_error"]),
                logit_error(name, p["mean_abs_logit_error"]),
            ]
        )
    lines += table(["artifact", "size", "accuracy", "95% interval", "macro F1", "top-1 agreement", "max abs Δlogit", "mean abs Δlogit"], rows)
    return lines + render_mcnemar(evaluation.int8_vs_float)


def render_conversion(conversion_records: dict, profile: TargetProfile) -> list[str]:
    """Each TF Lite artifact's conversion: settings, ops, where it loads, what stayed float, and its quantization error."""
    lines = ["", "## TF Lite conversion", ""]
    rows = []
    for name, record in conversion_records.items():
        runtimes = ", ".join(f"{n} {r['version']}: {'ok' if r['ok'] else r['error']}" for n, r in record["runtimes"].items())
        rows.append(
            [
                name,
                record["converter"]["inference_output_type"],
                ", ".join(record["converter"]["supported_ops"]),
                ", ".join(record["flex_ops"]) or "none",
                ", ".join(record["custom_ops"]) or "none",
                len(record["float_activations"]),
                runtimes,
            ]
        )
    lines += table(["artifact", "output type", "supported ops", "Flex ops", "custom ops", "float activations", "loads and runs on"], rows)
    names = list(conversion_records)
    counts: dict[tuple, dict] = {}
    for name, record in conversion_records.items():
        for op in record["operators"]:
            counts.setdefault((op["op"], op["kind"]), {})[name] = f"{op['count']} (v{op['version']})"
    lines += ["", "Operators (count, version):", ""]
    lines += table(["operator", "kind", *names], [[op, kind, *(per.get(n, "") for n in names)] for (op, kind), per in sorted(counts.items())])
    for name, record in conversion_records.items():
        if record["float_activations"]:
            lines += ["", f"{name} tensors that stayed float: " + ", ".join(f"`{t}`" for t in record["float_activations"])]
        if "quantization_ladder" in record:
            lines += render_quantization_ladder(name, record["quantization_ladder"])
        if "quantization_errors" in record:
            lines += render_quantization_errors(name, record["quantization_errors"])
    for name, record in conversion_records.items():
        if ARTIFACTS[name].interface_row.tokenizer_inside:
            lines += render_raw_text_model(name, record, profile)
    return lines


def tensor_metadata(tensors: list[dict]) -> str:
    """Tensors as the metadata names them, each with the files it carries: ``ids (vocab.txt VOCABULARY)``."""
    return ", ".join(f"`{t['name']}`" + "".join(f" ({f['name']} {f['type']})" for f in t.get("associated_files", [])) for t in tensors)


def render_metadata(conversion_records: dict) -> list[str]:
    """Each TF Lite model's metadata (MediaPipe's metadata displayer), summed up in a table, then whole as JSON."""
    lines = ["", "## Model metadata", "", "What each `.tflite` says of itself, as MediaPipe's metadata displayer reads it:", ""]
    rows = []
    for name, record in conversion_records.items():
        shown = record["metadata"]
        (subgraph,) = shown["subgraph_metadata"]
        units = ", ".join(
            f"{unit['options_type']} ({', '.join(f['name'] for f in unit['options'].get('vocab_file', []))})"
            for unit in subgraph.get("input_process_units", [])
        )
        inputs, outputs = tensor_metadata(subgraph["input_tensor_metadata"]), tensor_metadata(subgraph["output_tensor_metadata"])
        rows.append([name, shown["name"], shown["version"], inputs, outputs, units or "none", shown["min_parser_version"]])
    lines += table(["artifact", "name", "version", "inputs", "outputs", "tokenizer", "min parser"], rows)
    for name, record in conversion_records.items():
        lines += [
            "",
            f"<details><summary>{name}: metadata JSON</summary>",
            "",
            "```json",
            json.dumps(record["metadata"], indent=2),
            "```",
            "",
            "</details>",
        ]
    return lines


def render_quantization_ladder(name: str, ladder: dict) -> list[str]:
    """Every recipe of the ladder: what it gave on each place checked, and why it was kept, passed over or skipped."""
    lines = ["", f"### {name}: quantization ladder (recipe `{ladder['recipe']}` kept)", ""]
    rows = []
    for attempt in ladder["attempts"]:
        figures = "; ".join(f"{place} {f['top1_agreement']:.4f} / {100 * f['accuracy_drop']:+.2f} pt" for place, f in attempt["figures"].items())
        rows.append(
            [
                f"`{attempt['recipe']}`",
                attempt["outcome"],
                f"{attempt['size_bytes'] / 1e6:.2f} MB" if attempt["size_bytes"] else "",
                figures,
                ", ".join(f"{op} {count}" for op, count in attempt["float_ops"].items()),
                attempt["reason"],
            ]
        )
    header = ["recipe", "outcome", "size", "validation: top-1 agreement / accuracy drop", "ops with float outputs", "why"]
    return lines + table(header, rows)


def render_quantization_errors(name: str, errors: list[dict]) -> list[str]:
    """The ten layers whose INT8 output strays furthest from float."""
    lines = [
        "",
        f"### {name}: per-layer quantization error (worst first)",
        "",
        "RMSE of each layer's output under full INT8 (the `int8` recipe, whichever recipe was kept) against float, also in quantization steps (0.29 is the rounding floor).",
        "",
    ]
    return lines + table(
        ["op", "tensor", "scale", "RMSE", "RMSE / step", "max abs error"],
        [
            [e["op"], f"`{e['tensor']}`", f"{e['scale']:.4g}", f"{e['rmse']:.4g}", f"{e['rmse_in_steps']:.3f}", f"{e['max_abs_error']:.4g}"]
            for e in errors[:10]
        ],
    )


def render_calibration(calibration: dict) -> list[str]:
    drawn = ", ".join(f"{k} {v}" for k, v in calibration["drawn"]["per_class"].items()) or "none"
    return [
        "",
        "## Calibration",
        "",
        f"{calibration['samples']} samples from `{calibration['config']}`: drawn from the {calibration['drawn']['split']} split ({drawn}); "
        f"{calibration['field_samples']['count']} field samples; ids sha256 `{calibration['ids_sha256'][:16]}…`.",
    ]


def render_data(data_summary: dict, labels: list[str]) -> list[str]:
    lines = [
        "",
        "## Data",
        "",
        f"Dataset `{data_summary['dataset']}` (sha256 `{data_summary['sha256'][:16]}…`), {data_summary['examples']} examples read, "
        f"{data_summary['used']} used; duplicates, conflicts, lengths and tokens in `data/report.md`.",
        "",
    ]
    lines += table(
        ["split", *labels, "total"],
        [[split, *(counts[label] for label in labels), sum(counts.values())] for split, counts in data_summary["counts"].items()],
    )
    return lines + [f"\n- warning: {w}" for w in data_summary.get("warnings", [])]


def render_training(train_log: dict) -> list[str]:
    epochs = train_log["epochs"]
    stopped = (
        f", stopped early after {train_log['hyperparameters']['training']['patience']} epochs without a better one"
        if train_log["stopped_early"]
        else ""
    )
    return [
        "",
        "## Training",
        "",
        f"{len(epochs)} epochs{stopped}, best validation epoch {train_log['best_epoch']} (val accuracy {train_log['best_val_accuracy']:.4f}, "
        f"val loss {train_log['best_val_loss']:.4f}); median {statistics.median([e['examples_per_second'] for e in epochs]):.0f} examples/s.",
    ]


def render_per_class(evaluation: Evaluation) -> list[str]:
    """Each artifact's precision, recall and F1 per class, and its confusion matrix."""
    labels, lines = evaluation.labels, []
    for name, r in evaluation.artifacts.items():
        lines += ["", f"## {name}: per class", ""]
        lines += table(
            ["class", "precision", "recall", "F1", "support"],
            [[label, f"{f['precision']:.3f}", f"{f['recall']:.3f}", f"{f['f1']:.3f}", f["support"]] for label, f in r["per_class"].items()],
        )
        lines += ["", "Confusion matrix (rows: true, columns: predicted):", ""]
        lines += table(["", *labels], [[f"**{label}**", *row] for label, row in zip(labels, r["confusion_matrix"])])
    return lines


def render_markdown(evaluation: Evaluation, profile: TargetProfile, context: Context) -> str:
    """The page: one renderer per section, each from its records; a section whose record the target lacks is left out."""
    lines = render_title(evaluation, context.data_report["headline"])
    if context.runtime_checks:
        lines += render_deploy(context.runtime_checks, context.recommended, evaluation, profile)
    lines += render_artifacts(evaluation) + render_quality(context.quality)
    if context.conversion_records:
        lines += render_conversion(context.conversion_records, profile) + render_metadata(context.conversion_records)
    if context.xla_checks:
        lines += render_xla_checks(context.xla_checks)
    if context.runtime_checks:
        lines += render_runtime_checks(context.runtime_checks, profile)
    if context.calibration:
        lines += render_calibration(context.calibration)
    lines += render_data(context.data_summary, evaluation.labels) + render_training(context.train_log) + render_per_class(evaluation)
    return "\n".join(lines) + "\n"


def build_report(profile: TargetProfile, inputs: ReportInputs, target: Target) -> Evaluation:
    if ("saved_model_xla" in profile.artifacts) != (inputs.xla_checks is not None):
        raise StageError(f"{profile.source}: the XLA checks' record is given exactly when the profile lists saved_model_xla")
    evaluation = Evaluation.read(inputs.evaluation)
    context = Context.read(profile, inputs, target)
    with atomic_output(target.report) as temporary:
        temporary.write_text(render_markdown(evaluation, profile, context), encoding="utf-8")
    return evaluation


def headline(evaluation: Evaluation, report_path: Path) -> str:
    reference = evaluation.reference
    lines = [
        f"== {evaluation.target}: test split, {reference['examples']} examples, {len(evaluation.labels)} classes ==",
        f"   {'reference (CPU SavedModel)':<28} accuracy {reference['accuracy']:.4f} (95% interval {interval(reference)})  macro F1 {reference['macro_f1']:.4f}",
    ]
    for name, r in evaluation.artifacts.items():
        lines.append(
            f"   {name:<28} accuracy {r['accuracy']:.4f}  macro F1 {r['macro_f1']:.4f}  top-1 agreement {r['parity']['top1_agreement']:.4f}"
            f"  max |Δlogit| {logit_error(name, r['parity']['max_abs_logit_error'], '.2g')}  {r['size_bytes'] / 1e6:.2f} MB"
        )
    lines.append(f"   report: {report_path}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.report", description=__doc__.splitlines()[0])
    add_files("report", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    inputs = stage_inputs("report", ReportInputs, args)
    target = Target(args.target_dir, profile.name)
    evaluation = build_report(profile, inputs, target)
    print(headline(evaluation, target.report))


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
