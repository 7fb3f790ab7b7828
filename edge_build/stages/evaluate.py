"""Stage *evaluate*: every artifact of a target on the test split against the reference; write ``eval.json``.

Reads the reference CPU SavedModel and its test logits, the target's artifacts
(SavedModels, and ``.tflite`` files with their conversion records and test
logits), ``test.tfrecord`` and ``labels.txt``; ``edge_build.evaluation`` does
the work. A breach of the profile's tolerances fails the stage with the figures
and writes nothing. The report renders the record; the manifest copies its figures.
"""

from __future__ import annotations

import argparse
import json
import sys

from edge_build import cli
from edge_build.atomic import atomic_output
from edge_build.config.profile import TargetProfile, read_profile
from edge_build.evaluation import EvaluationInputs, evaluate
from edge_build.layout import Target
from edge_build.stage_files import add_files, stage_inputs


def build_evaluation(profile: TargetProfile, inputs: EvaluationInputs, target: Target) -> dict:
    evaluation = evaluate(profile, inputs, target)
    with atomic_output(target.evaluation) as temporary:
        temporary.write_text(json.dumps(evaluation, indent=2) + "\n", encoding="utf-8")
    return evaluation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.stages.evaluate", description=__doc__.splitlines()[0])
    add_files("evaluate", parser)
    return parser


def drive(args: argparse.Namespace) -> None:
    profile = read_profile(args.profile)
    target = Target(args.target_dir, profile.name)
    evaluation = build_evaluation(profile, stage_inputs("evaluate", EvaluationInputs, args), target)
    print(f"evaluate: {len(evaluation['artifacts'])} artifact(s) of {profile.name} within tolerances on the test split -> {target.evaluation}")
    for name, record in evaluation["artifacts"].items():
        for gate in record["gates"]:
            if gate["verdict"] == "undecided":
                print(f"evaluate: {name}: undecided: {gate['message']}")


if __name__ == "__main__":
    sys.exit(cli.run(build_parser, drive))
