"""The one place where user errors become a message and an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from edge_build.errors import EdgeBuildError

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def run(
    build_parser: Callable[[], argparse.ArgumentParser],
    drive: Callable[[argparse.Namespace], None],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse ``argv``, call ``drive`` and map its failures to exit codes."""
    args = build_parser().parse_args(argv)
    try:
        drive(args)
    except EdgeBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
