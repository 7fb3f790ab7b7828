"""Outputs that appear only when complete.

A stage writes every output to a temporary sibling and renames them all at the
end, so a crash or a kill never leaves a file under its final name that a later
build could take as finished.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path


def _temporary_sibling(path: Path) -> Path:
    # The prefix keeps the suffix intact: Keras insists on ``.weights.h5``.
    return path.with_name(f".tmp-{os.getpid()}-{path.name}")


def _owner_gone(leftover: Path) -> bool:
    """Whether the process that named this temporary (``.tmp-<pid>-...``) is gone: a live one may be another build's, still writing."""
    pid = leftover.name.split("-")[1]
    if not pid.isdigit() or len(pid) > 9:
        return False
    if int(pid) == os.getpid():  # an earlier process of the same id: this one is about to use that name
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_outputs(*paths: os.PathLike | str) -> Iterator[Sequence[Path]]:
    """Yield temporary paths for ``paths``; move each onto its final name only if the block succeeds.

    Works for files and directories.  On failure every temporary is removed and
    the final names are left as they were.
    """
    finals = [Path(p) for p in paths]
    temporaries = [_temporary_sibling(p) for p in finals]
    for final in finals:
        final.parent.mkdir(parents=True, exist_ok=True)
        # What a killed run of this stage left behind. Only that: builds sharing a folder (runtime_envs=) may be writing beside it.
        for leftover in final.parent.glob(f".tmp-*-{glob.escape(final.name)}"):
            if _owner_gone(leftover):
                _remove(leftover)
    try:
        yield temporaries
    except BaseException:
        for temporary in temporaries:
            _remove(temporary)
        raise
    for final, temporary in zip(finals, temporaries):
        if not temporary.exists():
            raise RuntimeError(f"stage did not write {final}")
    for final, temporary in zip(finals, temporaries):
        _remove(final)
        os.replace(temporary, final)


@contextlib.contextmanager
def atomic_output(path: os.PathLike | str) -> Iterator[Path]:
    """``atomic_outputs`` for a single path."""
    with atomic_outputs(path) as (temporary,):
        yield temporary


def write_json(path: os.PathLike | str, record) -> None:
    """``record`` as indented JSON at ``path``, complete or absent."""
    with atomic_output(path) as temporary:
        temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
