"""Talking to a board through the user's own OpenSSH client: the board agent's commands, and the bundle they receive.

Every call is ``ssh`` as the user would type it, so ``~/.ssh/config``, agents and
jump hosts apply (``ssh_config``: ``-F PATH`` instead). Nothing else is needed on
the board's side: the agent's code and any bundle travel on the session's standard
input, so a board whose ssh server has no SFTP subsystem (Dropbear, minimal
images) is checked like any other, and no path passes through a remote shell
that a legacy ``scp`` would hand it to. Every call also
runs in batch mode (no password or passphrase prompt) with strict host key
checking: a board whose key is not in ``known_hosts`` or differs from it is
refused, never accepted. What goes wrong becomes a ``BoardFault``: one line that
names the board and the cause, not ssh's own output.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

from edge_build.config.boards import Board
from edge_build.errors import StageError

#: The board agent, streamed to the board's Python on each call.
AGENT = Path(__file__).resolve().parent / "board" / "agent.py"
#: What the board's Python runs: the agent's length in bytes on the first line of standard input, then its source;
#: what follows is the agent's own input (a bundle's archive). ``exec`` runs it as ``__main__``, with the call's arguments.
BOOTSTRAP = "import sys; size = int(sys.stdin.buffer.readline()); exec(compile(sys.stdin.buffer.read(size), 'agent.py', 'exec'))"
#: The most a board may print on one stream of one call: its answers are JSON, logits included (a few MB).
ANSWER_LIMIT = 64 * 2**20
#: Seconds ssh waits for the board to answer a connection.
CONNECT_TIMEOUT_S = 15
#: The shell's exit codes for a command that is not there or not executable.
COMMAND_NOT_FOUND = (126, 127)
#: ssh's exit code for its own failures (the connection, the authentication, the host key).
SSH_FAILED = 255
#: Parts of ssh's message on a failed connection, and what they mean; the first that matches wins.
SSH_FAULTS = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host key mismatch", "the board's host key differs from the one in known_hosts"),
    (
        "Host key verification failed",
        "unknown host key",
        "the board's host key is not in known_hosts (check its fingerprint, then connect once by hand)",
    ),
    ("Permission denied", "authentication refused", "the board refused every key offered"),
    ("timed out", "unreachable", f"no answer within {CONNECT_TIMEOUT_S} s"),
    ("Connection refused", "unreachable", "connection refused"),
    ("No route to host", "unreachable", "no route to host"),
    ("Network is unreachable", "unreachable", "network unreachable"),
    ("Could not resolve hostname", "unreachable", "unknown host name"),
    ("Name or service not known", "unreachable", "unknown host name"),
)


def _read_capped(stream, kept: bytearray, over: threading.Event, process: subprocess.Popen) -> None:
    """Keep what ``stream`` gives up to ``ANSWER_LIMIT`` bytes; past it, set ``over`` and stop the process."""
    while chunk := stream.read(1 << 16):
        if len(kept) + len(chunk) > ANSWER_LIMIT:
            over.set()
            process.kill()
            break
        kept += chunk
    stream.close()


def _send(pipe, head: bytes, payload: Path | None) -> None:
    """Write ``head``, then the file ``payload``, to ``pipe``; a command that stops reading is left to its exit status."""
    try:
        pipe.write(head)
        if payload is not None:
            with payload.open("rb") as source:
                shutil.copyfileobj(source, pipe, 1 << 20)
        pipe.close()
    except OSError:  # BrokenPipeError: the command ended without reading it all
        pass


class BoardFault(StageError):
    """A board that could not be checked: unreachable, refused, missing software, crashed or too slow to answer.

    One line: ``<address>: <kind>: <detail>``; the failure table shows ``<kind>: <detail>`` against the board.
    """

    def __init__(self, address: str, kind: str, detail: str):
        super().__init__(f"{address}: {kind}: {detail}")
        self.kind, self.detail = kind, detail

    @property
    def cause(self) -> str:
        return f"{self.kind}: {self.detail}"


def remote_word(value: str) -> str:
    """``value`` quoted for the board's shell; a leading ``~/`` stays the board user's home."""
    return '"$HOME"/' + shlex.quote(value[2:]) if value.startswith("~/") else shlex.quote(value)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Connection:
    """The commands that reach one board: ``ssh`` with the build's options."""

    def __init__(self, board: Board, ssh_config: Path | None = None):
        self.board = board
        self.options = [
            *(["-F", str(ssh_config)] if ssh_config else []),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            # A board that stops answering mid-run (power, network) ends the call within a minute.
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
        ]

    def _call(self, command: list[str], timeout_s: float, head: bytes, payload: Path | None = None) -> subprocess.CompletedProcess:
        """Run ``command`` with ``head`` then ``payload`` on its standard input; its output read up to ``ANSWER_LIMIT``
        bytes a stream and decoded with replacement (a board's bytes are not trusted)."""
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise BoardFault(self.board.address, "no ssh client", f"{command[0]} not found on this machine (install OpenSSH's client)") from None
        streams = {"stdout": bytearray(), "stderr": bytearray()}
        over = threading.Event()
        threads = [threading.Thread(target=_read_capped, args=(getattr(process, name), kept, over, process)) for name, kept in streams.items()]
        # Written from a thread too: a board that stops reading must not hold the build past the timeout.
        threads.append(threading.Thread(target=_send, args=(process.stdin, head, payload)))
        for thread in threads:
            thread.start()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            raise BoardFault(self.board.address, "timeout", f"no result after {timeout_s:g} s (ssh stopped)") from None
        finally:
            for thread in threads:
                thread.join()
        if over.is_set():
            raise BoardFault(self.board.address, "answer too large", f"more than {ANSWER_LIMIT // 2**20} MiB of output (ssh stopped)")
        text = {name: kept.decode("utf-8", errors="replace") for name, kept in streams.items()}
        return subprocess.CompletedProcess(command, process.returncode, text["stdout"], text["stderr"])

    def _ssh_fault(self, done: subprocess.CompletedProcess, otherwise: str = "ssh failed") -> BoardFault:
        """What ssh's message says went wrong with the connection, or ``otherwise`` with its last line."""
        for marker, kind, meaning in SSH_FAULTS:
            if marker in done.stderr:
                return BoardFault(self.board.address, kind, f"{meaning} ({last_line(done.stderr)})")
        return BoardFault(self.board.address, otherwise, last_line(done.stderr) or f"exit {done.returncode}")

    def agent(self, arguments: list[str], timeout_s: float, payload: Path | None = None) -> dict:
        """Run ``agent.py ARGUMENTS`` in the board's Python, with the file ``payload`` on its standard input; its JSON answer."""
        port = ["-p", str(self.board.port)] if self.board.port else []
        remote = " ".join(["exec", remote_word(self.board.python), "-c", shlex.quote(BOOTSTRAP), *map(shlex.quote, arguments)])
        source = AGENT.read_bytes()
        # "--": nothing after it is read as an option, whatever the address holds.
        done = self._call(["ssh", *self.options, *port, "--", self.board.destination, remote], timeout_s, b"%d\n%s" % (len(source), source), payload)
        if done.returncode == SSH_FAILED:
            raise self._ssh_fault(done)
        if done.returncode in COMMAND_NOT_FOUND:
            raise BoardFault(
                self.board.address,
                "no Python",
                f"'{self.board.python}' is not on the board ({last_line(done.stderr)}); name the board's Python in its address: ?python=PATH",
            )
        if done.returncode > 128:
            raise BoardFault(self.board.address, "crash", f"the board's Python died of signal {done.returncode - 128}")
        if done.returncode != 0:
            why = last_line(done.stderr).removeprefix("error: ") or f"exit {done.returncode}"
            raise BoardFault(self.board.address, "board error", why)
        answer = last_line(done.stdout)
        try:
            return json.loads(answer)
        except ValueError:
            raise BoardFault(self.board.address, "board error", f"its answer is not JSON: {answer[:200]!r}") from None
