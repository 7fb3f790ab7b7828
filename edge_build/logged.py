"""Run one build stage with its output in a log file and a short account of it on the console.

    python -m edge_build.logged --log LOG [--name NAME] [--verbose] -- COMMAND ...

``SConstruct`` runs every stage through this. COMMAND's stdout and stderr go to
LOG as they come (a killed build still leaves what was written), headed by the
command line and ended by its exit status and wall time. Then the console gets
one line: the stage's NAME, its wall time and its result lines. A result line is what
the stage prints on stdout as ``<what>: ...`` (``data: 36 examples ...``,
``runtime check: tflite_int8 on ...``), a ``== ... ==`` heading with the indented
lines under it (the report's table), or the project's own ``warning: ...``; epoch
progress and TensorFlow's start-up lines (``cuInit``, ``cpu_feature_guard``) stay
in the log. When COMMAND fails, the last lines of the log follow its path on
stderr, and this exits with COMMAND's status (128 + n after signal n, as a shell
does). ``--verbose`` also streams everything to the console as it comes.

SIGINT, SIGTERM and SIGHUP are passed on to COMMAND. A Ctrl-C at the terminal
reaches COMMAND itself (it is in the terminal's foreground process group), so a
SIGINT is passed on only when it cannot have, or when COMMAND is still running
a few seconds later.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: Lines of the log shown when the command fails.
TAIL_LINES = 25
#: Seconds a SIGINT that the terminal also sent to the command is given before it is passed on.
SIGINT_GRACE_S = 5.0
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: A result line's label: lower case or an acronym (``data:``, ``runtime check:``, ``XLA check:``), not prose such as pip's ``Requirement already satisfied:``.
LABELLED = re.compile(r"(?:[a-z]|[A-Z]{2})[\w .-]*: ")
HEADING = re.compile(r"== .* ==$")
WARNING = "warning: "
LABEL_WIDTH = 16


def label(command: list[str]) -> str:
    """A name for a command without ``--name``: the module it runs (last part), else its program."""
    if "-m" in command[:-1]:
        return command[command.index("-m") + 1].rpartition(".")[2]
    return Path(command[0]).name


class Results:
    """Picks a command's result lines out of its output, in the order they come."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._continues = False

    def stdout(self, line: str) -> None:
        if LABELLED.match(line) or HEADING.match(line):
            self.lines.append(line)
            self._continues = True
        elif self._continues and line[:1].isspace() and line.strip():
            self.lines.append(line)
        else:
            self._continues = False

    def stderr(self, line: str) -> None:
        if line.startswith(WARNING):
            self.lines.append(line)


def account(name: str, seconds: float, lines: list[str]) -> str:
    """The console's lines for a command that succeeded: name, wall time, then its result lines one under another."""
    head = f"{name:<{LABEL_WIDTH}} {seconds:6.1f} s"
    if not lines:
        return head
    indent = " " * (len(head) + 2)
    return "\n".join([f"{head}  {lines[0]}", *(indent + line for line in lines[1:])])


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


def exit_status(returncode: int) -> int:
    """A shell's status for the command: its exit code, or 128 + n when signal n ended it."""
    return 128 - returncode if returncode < 0 else returncode


def terminal_reaches(pid: int) -> bool:
    """Whether a key typed at this session's terminal (Ctrl-C) signals ``pid`` too: it is in the foreground process group."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgid(pid)
    except OSError:
        return False
    finally:
        os.close(fd)


class Interrupt:
    """Passes SIGINT, SIGTERM and SIGHUP on to the command, a terminal's Ctrl-C only if the command outlives its grace."""

    def __init__(self, child: subprocess.Popen) -> None:
        self.child = child
        self.signal: int | None = None
        self._pending_since: float | None = None

    def pass_on(self, signum, frame) -> None:
        self.signal = signum
        if signum == signal.SIGINT and terminal_reaches(self.child.pid):
            self._pending_since = self._pending_since or time.monotonic()
        else:
            self.child.send_signal(signum)

    def after_grace(self) -> None:
        """Called while the command runs: a Ctrl-C it has ignored for SIGINT_GRACE_S is passed on after all."""
        if self._pending_since is not None and time.monotonic() - self._pending_since > SIGINT_GRACE_S:
            self._pending_since = None
            self.child.send_signal(signal.SIGINT)


def output_lines(child: subprocess.Popen, while_waiting: Callable[[], None]) -> Iterator[tuple[int, bytes]]:
    """The command's output as it comes, line by line: (1, line) from stdout, (2, line) from stderr.

    One reader for both pipes, stdout's lines first when both have some: the log keeps the order they were
    written in, give or take lines written at the same moment, and a failure's last lines (on stderr) come last.
    """
    streams = {child.stdout.fileno(): 1, child.stderr.fileno(): 2}
    partial = dict.fromkeys(streams, b"")
    exited = None
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            for fd in sorted((key.fd for key, _ in selector.select(timeout=0.5)), key=streams.get):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    selector.unregister(fd)
                    chunk = b"\n" if partial[fd] else b""
                *lines, partial[fd] = (partial[fd] + chunk).split(b"\n")
                for line in lines:
                    yield streams[fd], line + b"\n"
            while_waiting()
            if exited is None and child.poll() is not None:
                exited = time.monotonic()
            if exited is not None and time.monotonic() - exited > 5.0:
                break  # a process the command left behind holds its pipes open


def run(command: list[str], log_path: Path, verbose: bool = False, name: str | None = None) -> int:
    """Run ``command`` as the module docstring says; return the status to exit with."""
    name = name or label(command)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    results, tail = Results(), collections.deque(maxlen=TAIL_LINES)
    with open(log_path, "wb") as log:
        log.write(f"$ {shlex.join(command)}\n".encode())
        log.flush()
        started = time.monotonic()
        try:
            # Unbuffered: each line reaches the log when it is written (a killed stage leaves all it wrote), in order.
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except OSError as exc:
            message = f"{name}: cannot run {command[0]}: {exc.strerror or exc}"
            log.write(f"{message}\n".encode())
            print(f"error: {message} (log: {log_path})", file=sys.stderr)
            return 127
        interrupt = Interrupt(child)
        # A signal ignored when the build started (SIGINT of a job a script put in the background) stays
        # ignored: the stage inherited that, and passing it on would change nothing.
        previous = {signum: signal.signal(signum, interrupt.pass_on) for signum in FORWARDED if signal.getsignal(signum) != signal.SIG_IGN}
        try:
            with child.stdout, child.stderr:
                for stream, raw in output_lines(child, interrupt.after_grace):
                    log.write(raw)
                    log.flush()
                    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    tail.append(text)
                    (results.stdout if stream == 1 else results.stderr)(text)
                    if verbose:
                        console = sys.stdout if stream == 1 else sys.stderr
                        console.buffer.write(raw)
                        console.flush()
            while True:  # the command may have closed its output and still run
                try:
                    returncode = child.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    interrupt.after_grace()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        seconds = time.monotonic() - started
        log.write(f"[{how_it_ended(returncode)} after {seconds:.2f} s]\n".encode())

    if returncode == 0:
        if not verbose:
            print(account(name, seconds, results.lines), flush=True)
        return 0
    ended = how_it_ended(returncode)
    if interrupt.signal is not None:
        print(f"{name} interrupted after {seconds:.1f} s ({ended}); its output so far: {log_path}", file=sys.stderr, flush=True)
    elif verbose:
        print(f"{name} failed after {seconds:.1f} s ({ended}); its full output: {log_path}", file=sys.stderr, flush=True)
    else:
        print(f"{name} failed after {seconds:.1f} s ({ended}); the end of its log, {log_path}:", file=sys.stderr, flush=not tail)
        if tail:
            print("\n".join(tail), file=sys.stderr, flush=True)
    return exit_status(returncode)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m edge_build.logged", description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="the log file to write (its folders are made)")
    parser.add_argument("--name", help="what the console calls the command (default: the module it runs with -m, else its program)")
    parser.add_argument("--verbose", action="store_true", help="also stream the command's stdout and stderr to the console")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run (put it after --)")
    return run(command, args.log, args.verbose, args.name)


if __name__ == "__main__":
    sys.exit(main())
