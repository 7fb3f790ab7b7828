"""Boards over ssh: the bundle checked on a "board" behind a real OpenSSH server, its faults, and the board report.

The board is this machine through ``sshd`` on 127.0.0.1 (``tests/sshd.py``), its
Python a virtual environment holding only numpy and tflite-runtime: the run
proves the bundle needs nothing else. Its cache folder is per test, so that what
a run leaves on the board can be listed.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TINY_PROFILE, with_litert, write_profile

from edge_build import cli
from edge_build.board.decision import p50_interval, samples_to_decide
from edge_build.config.boards import Board, parse_board, parse_boards
from edge_build.errors import ConfigError
from edge_build.layout import Target
from edge_build.stages import board_check, board_report


@pytest.fixture
def target(tiny_bundle, tmp_path: Path) -> Target:
    """A copy of the tiny target (bundle, golden set, runtime checks) whose boards/ this test owns."""
    copy = tmp_path / "tiny"
    shutil.copytree(tiny_bundle["target"], copy, ignore=shutil.ignore_patterns("boards"))
    return Target(copy, "tiny")


def profile_file(tmp_path: Path, text: str = TINY_PROFILE) -> Path:
    return write_profile(tmp_path / "targets", "tiny", text)


def board_address(name: str, python: str, cache: Path) -> str:
    return Board(name, python=python, cache=str(cache)).spec


def check(profile: Path, target: Target, board: str, ssh_config: Path, capsys) -> tuple[int, str, str]:
    """The board_check stage's command line, in this process; its exit code, standard output and error."""
    code = cli.run(
        board_check.build_parser,
        board_check.drive,
        ["--profile", str(profile), "--target-dir", str(target.dir), "--board", board, "--ssh-config", str(ssh_config)],
    )
    out, err = capsys.readouterr()
    return code, out, err


def left_on_board(cache: Path) -> list[str]:
    """Everything under the board's cache but the cached bundles themselves."""
    if not cache.exists():
        return []
    return sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*") if not p.relative_to(cache).as_posix().startswith("bundles/"))


def assert_nothing_written(target: Target, board: str) -> None:
    folder = target.dir / "boards"
    assert not folder.exists() or not any(folder.rglob("*")), sorted(folder.rglob("*"))
    assert not any(target.dir.glob(".tmp-*"))


def test_a_board_checks_the_bundle_and_a_second_run_uploads_nothing(ssh_server, board_python, target, tmp_path: Path, capsys):
    cache = tmp_path / "board-cache"
    address = f"ssh://{ssh_server.user}@127.0.0.1:{ssh_server.port}?python={board_python}&cache={cache}"
    board = parse_board(address)
    profile = profile_file(tmp_path)
    # The server has no SFTP subsystem, as Dropbear-based and minimal images: scp (SFTP since OpenSSH 9) cannot reach it.
    scp = ["scp", "-F", str(ssh_server.ssh_config), "-o", "BatchMode=yes", "--", str(profile), f"board:{tmp_path}/copied"]
    refused = subprocess.run(scp, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and not (tmp_path / "copied").exists(), refused.stderr
    code, out, err = check(profile, target, address, ssh_config=ssh_server.ssh_config, capsys=capsys)
    assert code == 0, err
    result_path, plot = target.board_outputs(board.name)
    first = json.loads(result_path.read_text())
    assert first["bundle"]["uploaded"] and "uploaded" in out
    system = first["system"]
    assert system["machine"] == "x86_64" and system["python"].startswith("3.11.") and system["numpy"] == "1.26.4"
    assert system["runtimes"]["tflite-runtime"] == {"version": "2.14.0", "problem": None}
    assert system["hostname"] and system["cpu"]
    for artifact in ("tflite_fp32", "tflite_fp16", "tflite_int8"):
        r = first["checks"][artifact]["tflite-runtime"]
        assert r["status"] == "ok" and r["problems"] == [] and r["emulated"] is False
        assert len(r["latency"]["invoke_us"]) == 20 and r["parity"]["examples"] == first["golden_examples"]
        low, high = r["intervals"]["p50_us"]
        assert low <= r["latency"]["p50_us"] <= high
        assert r["intervals"]["accuracy"][0] <= r["parity"]["accuracy"] <= r["intervals"]["accuracy"][1]
        assert r["latency_budget_ms"] == 1000.0 and r["undecided"]["latency"] == []  # 1 s: far outside any interval
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in (cache / "bundles").iterdir()] == [first["bundle"]["manifest_sha256"]]
    assert left_on_board(cache) == ["bundles", "runs", "uploads"]

    code, out, err = check(profile, target, address, ssh_config=ssh_server.ssh_config, capsys=capsys)
    assert code == 0, err
    second = json.loads(result_path.read_text())
    assert not second["bundle"]["uploaded"] and "already on the board, not uploaded" in out
    fp32 = "tflite_fp32", "tflite-runtime"
    assert second["checks"][fp32[0]][fp32[1]]["latency"]["invoke_us"] != first["checks"][fp32[0]][fp32[1]]["latency"]["invoke_us"]
    assert left_on_board(cache) == ["bundles", "runs", "uploads"]

    # The board report: the board's own description, intervals, and this machine's figure beside the board's.
    assert (
        cli.run(board_report.build_parser, board_report.drive, ["--profile", str(profile), "--target-dir", str(target.dir), "--board", address]) == 0
    )
    page = target.boards_report.read_text()
    assert f"## {board.address} (`{system['hostname']}`)" in page
    assert "| machine (`uname -m`) | x86_64 |" in page and f"| CPU | {system['cpu']} |" in page and "| tflite-runtime | 2.14.0 |" in page
    assert "already on the board" in page and "p50 (95% CI)" in page and "p50 here" in page and "(x86_64)" in page
    assert f"![latency per invoke on {system['hostname']}]({board.name}/latency.png)" in page


def test_a_damaged_cached_bundle_is_uploaded_again(ssh_server, board_python, target, tmp_path: Path, capsys):
    cache = tmp_path / "board-cache"
    address = board_address("board", board_python, cache)
    profile = profile_file(tmp_path)
    assert check(profile, target, address, ssh_server.ssh_config, capsys)[0] == 0
    (cached,) = (cache / "bundles").iterdir()
    (cached / "labels.txt").write_text("tampered\n")
    code, out, err = check(profile, target, address, ssh_server.ssh_config, capsys)
    assert code == 0, err
    assert "uploaded" in out and (cached / "labels.txt").read_text() != "tampered\n"
    # A file the manifest does not list, planted in the board's copy, would run before numpy: the board drops that copy.
    (cached / "numpy").mkdir()
    (cached / "numpy" / "__init__.py").write_text("raise SystemExit('planted')\n")
    code, out, err = check(profile, target, address, ssh_server.ssh_config, capsys)
    assert code == 0, err
    assert "uploaded" in out and not (cached / "numpy").exists()


def test_a_latency_budget_broken_on_purpose_fails_the_gate_and_writes_nothing(ssh_server, board_python, target, tmp_path: Path, capsys):
    cache = tmp_path / "board-cache"
    profile = profile_file(tmp_path, TINY_PROFILE.replace("int8_p50_ms = 1000.0", "int8_p50_ms = 0.000001"))
    code, _, err = check(profile, target, board_address("board", board_python, cache), ssh_server.ssh_config, capsys)
    assert code == cli.EXIT_USER_ERROR
    assert "tflite_int8  tflite-runtime on board" in err and "(budget <= 1e-06 ms)" in err
    assert err.strip().splitlines()[-1] == "error: ssh://board: board checks failed for tiny (table above)"
    assert "tflite_fp32" not in err  # the other models met their budgets
    assert_nothing_written(target, "board")
    assert left_on_board(cache) == ["bundles", "runs", "uploads"]


@pytest.mark.parametrize(
    "host, profile_change, python, cause",
    [
        (
            "board",
            ('arch = "x86_64"', 'arch = "aarch64"'),
            None,
            "architecture: an x86_64 board, and {profile} builds for aarch64; nothing was uploaded",
        ),
        ("stranger", None, None, "authentication refused: the board refused every key offered"),
        ("impostor", None, None, "host key mismatch: the board's host key differs from the one in known_hosts"),
        ("unknown", None, None, "unknown host key: the board's host key is not in known_hosts"),
        ("closed", None, None, "unreachable: connection refused"),
        ("board", None, "/nonexistent/bin/python3", "no Python: '/nonexistent/bin/python3' is not on the board"),
        (
            "board",
            "litert",
            None,
            "no runtime: ai-edge-litert is not installed for {python} (pip install ai-edge-litert==2.3.0); nothing was uploaded",
        ),
    ],
    ids=["wrong-architecture", "refused-key", "host-key-mismatch", "unknown-host-key", "unreachable", "no-python", "no-runtime"],
)
def test_a_board_fault_is_one_line_a_nonzero_exit_and_leaves_nothing(
    ssh_server, board_python, target, tmp_path: Path, capsys, host, profile_change, python, cause
):
    cache = tmp_path / "board-cache"
    text = TINY_PROFILE
    if profile_change == "litert":
        text = with_litert(TINY_PROFILE, required=True)
    elif profile_change:
        text = TINY_PROFILE.replace(*profile_change)
    profile = profile_file(tmp_path, text)
    code, out, err = check(profile, target, board_address(host, python or board_python, cache), ssh_server.ssh_config, capsys)
    assert code == cli.EXIT_USER_ERROR
    expected = cause.format(profile=profile, python=board_python)
    *table, error = err.strip().splitlines()
    assert error.startswith(f"error: ssh://{host}: {expected}"), error
    assert table[-1].startswith(f"  {'(all)':<12} {host:<28} {expected}"), err
    assert "Traceback" not in err and out == ""
    assert_nothing_written(target, host)
    assert not cache.exists()  # nothing was uploaded: the cache was never made


@pytest.mark.parametrize(
    "how, checks, expected",
    [
        ("killed", "runs = 1000000\ntimeout_s = 120", "crashed (signal 9)"),
        ("timeout", "runs = 1000000\ntimeout_s = 2", "timed out after 2 s"),
    ],
)
def test_a_runtime_killed_or_timed_out_mid_run_is_a_row_and_leaves_nothing(ssh_server, board_python, target, tmp_path: Path, how, checks, expected):
    """The board's runtime process dies of a signal (or runs past the profile's timeout): a row of the failure table, and no leftovers either side."""
    cache = tmp_path / "board-cache"
    profile = profile_file(tmp_path, TINY_PROFILE.replace("warmup = 2\nruns = 20", f"warmup = 2\n{checks}"))
    command = [
        sys.executable,
        "-m",
        "edge_build.stages.board_check",
        "--profile",
        str(profile),
        "--target-dir",
        str(target.dir),
        "--board",
        board_address("board", board_python, cache),
        "--ssh-config",
        str(ssh_server.ssh_config),
    ]
    stage = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = 0
    deadline = time.monotonic() + 240
    while how == "killed" and stage.poll() is None and time.monotonic() < deadline:
        # Each model's bench.py in turn, once it is timing invokes.
        found = subprocess.run(["pgrep", "-f", f"{cache}/bundles/.*bench.py"], capture_output=True, text=True).stdout.split()
        if found:
            time.sleep(1)
            killed += subprocess.run(["kill", "-KILL", *found]).returncode == 0
        time.sleep(0.2)
    out, err = stage.communicate(timeout=300)
    assert how != "killed" or killed == 3, err
    assert stage.returncode == cli.EXIT_USER_ERROR, err
    assert f"  {'tflite_fp32':<12} {'tflite-runtime on board':<28} {expected}" in err, err
    assert err.strip().splitlines()[-1] == "error: ssh://board: board checks failed for tiny (table above)"
    assert_nothing_written(target, "board")
    assert left_on_board(cache) == ["bundles", "runs", "uploads"]


def test_board_addresses_are_parsed_and_refused_in_one_line():
    board = parse_board("ssh://pi@rpi.local:2222?python=/home/pi/venv/bin/python")
    assert (board.user, board.host, board.port, board.python, board.cache) == (
        "pi",
        "rpi.local",
        2222,
        "/home/pi/venv/bin/python",
        "~/.cache/edge-build",
    )
    assert board.address == "ssh://pi@rpi.local:2222" and board.name == "pi-rpi.local-2222"
    assert parse_board(board.spec) == board
    named = parse_board("ssh://Lab-Board")
    assert (named.user, named.host, named.port, named.python, named.destination) == (None, "Lab-Board", None, "python3", "Lab-Board")
    assert parse_board("ssh://[::1]:22").address == "ssh://[::1]:22"
    assert [b.name for b in parse_boards("ssh://a, ssh://b")] == ["a", "b"]
    for text, message in [
        ("pi@rpi", "expected an ssh:// address"),
        ("ssh://pi:secret@rpi", "a password is never passed"),
        ("ssh://rpi:99999", "the port must be a number from 1 to 65535"),
        ("ssh://rpi:0", "the port must be a number from 1 to 65535"),  # before: ssh's default port
        ("ssh://rpi?python=/usr/bin/py%00thon", "option python is '/usr/bin/py\\x00thon' (allowed: a path with no control character"),
        ("ssh://rpi?cache=/tmp/a%0Ab", "option cache is '/tmp/a\\nb' (allowed: a path with no control character"),
        ("ssh://rpi?python=-c", "option python is '-c' (allowed: a path with no control character, not starting with '-')"),
        ("ssh://rpi?pyhton=/usr/bin/python3", "unknown option(s) pyhton (allowed: python, cache)"),
        ("ssh://rpi/home", "unexpected '/home'"),
        ("ssh://rpi?python=", "option python needs exactly one non-empty value"),
        # Words ssh or scp would read as options, or a shell would act on (before: passed as they were).
        ("ssh://-oProxyCommand=x", "host '-oProxyCommand=x' is not a plain host name"),
        ("ssh://-lroot@rpi", "user '-lroot' is not a plain user name"),
        ("ssh://pi@rpi;reboot", "host 'rpi;reboot' is not a plain host name"),
        ("ssh://p$i@rpi", "user 'p$i' is not a plain user name"),
    ]:
        with pytest.raises(ConfigError, match=f"^{re.escape(f'board={text}: ')}.*{re.escape(message)}"):
            parse_board(text)
    with pytest.raises(ConfigError, match=r"names the board\(s\) a twice"):
        parse_boards("ssh://a,ssh://a?python=/usr/bin/python3")


def test_a_p50_interval_and_the_invokes_that_would_decide_a_budget():
    rng = np.random.default_rng(1)
    invokes = rng.lognormal(np.log(100.0), 0.2, size=400)
    low, high = p50_interval(invokes)
    assert low < np.median(invokes) < high and p50_interval(invokes) == (low, high)  # seeded: reproducible
    assert samples_to_decide(400, (low, high), float(np.median(invokes)), 1000.0) is None  # a budget far away is decided
    inside = (low + np.median(invokes)) / 2
    needed = samples_to_decide(400, (low, high), float(np.median(invokes)), inside)
    assert needed > 400
    assert samples_to_decide(400, (low, high), 100.0, 100.0) == math.inf


LYING_BOARD = """#!{python}
# A board whose Python runs the agent, then forges its answer to `run`: {mode}.
import json, subprocess, sys
# Called as the agent's Python: -c BOOTSTRAP COMMAND ..., the agent and any bundle on standard input.
done = subprocess.run([{python!r}, *sys.argv[1:]], input=sys.stdin.buffer.read(), capture_output=True)
sys.stderr.write(done.stderr.decode())
if sys.argv[3:4] != ["run"] or done.returncode:
    sys.stdout.write(done.stdout.decode())
    sys.exit(done.returncode)
answer = json.loads(done.stdout.decode().strip().splitlines()[-1])
mode = {mode!r}
if mode == "short":
    answer["checks"].pop()
elif mode == "nan-p50":
    answer["checks"][0]["latency"]["p50_us"] = float("nan")
elif mode == "wrong-logits":
    answer["checks"][0]["logits_npy"] = answer["checks"][1]["logits_npy"][:64]
elif mode == "flood":
    sys.stdout.write("x" * (100 * 2**20))
elif mode == "emulated":
    for check in answer["checks"]:
        check["emulated"] = True
print(json.dumps(answer))
"""


def lying_board(tmp_path: Path, board_python: str, mode: str) -> str:
    path = tmp_path / f"lying-{mode}"
    path.write_text(LYING_BOARD.format(python=board_python, mode=mode), encoding="utf-8")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    "mode, where, cause",
    [
        ("short", "(all)", "bad answer: 3 checks asked for, 2 returned"),
        ("nan-p50", "tflite-runtime on board", "answer refused: p50 nan µs does not match its own timed invokes'"),
        ("wrong-logits", "tflite-runtime on board", "answer refused: "),
        ("flood", "(all)", "answer too large: more than 64 MiB of output (ssh stopped)"),
    ],
)
def test_a_board_answer_that_cannot_be_believed_is_one_row(ssh_server, board_python, target, tmp_path: Path, capsys, mode, where, cause):
    cache = tmp_path / "board-cache"
    address = board_address("board", lying_board(tmp_path, board_python, mode), cache)
    code, _, err = check(profile_file(tmp_path), target, address, ssh_server.ssh_config, capsys)
    assert code == cli.EXIT_USER_ERROR and "Traceback" not in err
    rows = [line for line in err.splitlines() if line.startswith("  ") and cause in line]
    assert len(rows) == 1 and where in rows[0], err
    assert_nothing_written(target, "board")


def test_the_build_decides_emulation_not_the_board(ssh_server, board_python, target, tmp_path: Path, capsys):
    # A board claiming its timings are emulated would turn the latency budgets into notes.
    address = board_address("board", lying_board(tmp_path, board_python, "emulated"), tmp_path / "board-cache")
    profile = profile_file(tmp_path, TINY_PROFILE.replace("int8_p50_ms = 1000.0", "int8_p50_ms = 0.000001"))
    code, _, err = check(profile, target, address, ssh_server.ssh_config, capsys)
    assert code == cli.EXIT_USER_ERROR and "(budget <= 1e-06 ms)" in err
    assert_nothing_written(target, "board")


def test_a_tarball_that_is_not_its_manifest_is_never_uploaded(ssh_server, board_python, target, tmp_path: Path, capsys, monkeypatch):
    # A shared cache or a hand could swap the tarball beside a good bundle folder: it is checked file by file first.
    cache = tmp_path / "board-cache"
    with tarfile.open(target.bundle_archive, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    top = members[0][0].name.split("/")[0]
    with tarfile.open(target.bundle_archive, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        planted = tarfile.TarInfo(f"{top}/numpy/__init__.py")
        planted.size = 5
        tar.addfile(planted, io.BytesIO(b"x = 1"))
    code, out, err = check(profile_file(tmp_path), target, board_address("board", board_python, cache), ssh_server.ssh_config, capsys)
    assert code == cli.EXIT_USER_ERROR and "Traceback" not in err
    assert (
        err.strip().splitlines()[-1]
        == f"error: {target.bundle_archive}: does not hold what {target.bundle_dir}/manifest.json lists (numpy/__init__.py); run scons again"
    )
    assert not cache.exists()  # nothing reached the board

    # Were the build's own check skipped, the board refuses the bundle itself: it holds it to exactly its manifest.
    manifest = target.bundle_dir / "manifest.json"
    monkeypatch.setattr(
        board_check, "consistent_bundle", lambda t: (hashlib.sha256(manifest.read_bytes()).hexdigest(), json.loads(manifest.read_text()))
    )
    code, out, err = check(profile_file(tmp_path), target, board_address("board", board_python, cache), ssh_server.ssh_config, capsys)
    assert code == cli.EXIT_USER_ERROR and "Traceback" not in err
    assert re.search(r"board error: \S+/numpy: not listed in the manifest; a bundle holds exactly the files its manifest lists$", err.strip()), err
    assert list((cache / "bundles").iterdir()) == [] and list((cache / "uploads").iterdir()) == []
