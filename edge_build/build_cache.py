"""The shared build cache (``cache=``): SCons's ``CacheDir``, with each entry's SHA-256 kept beside it and checked on the way out.

SCons names a cache entry by the build signature of what made it (inputs, code, command line),
never by its content, and copies whatever sits there, a link as a link. Here an entry is taken
only if it is a plain file whose content still has the digest written when it was pushed
(``<entry>.sha256``): a link or a changed entry stops the build in one line naming it, and an
entry without a digest (written by another tool) is not trusted: the target is built here and
the entry replaced. Whoever can write both an entry and its digest can still plant bytes: the
gates (quality, evaluation, runtime checks, manifest, bundle) are never cached, so they always
run on what was fetched. Imported by ``SConstruct`` only.
"""

from __future__ import annotations

import os
import tempfile

import SCons.CacheDir
import SCons.Errors

from edge_build.provenance import sha256_file

DIGEST_SUFFIX = ".sha256"


def recorded_digest(entry: str) -> str | None:
    try:
        with open(entry + DIGEST_SUFFIX, encoding="ascii") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


class CheckedCacheDir(SCons.CacheDir.CacheDir):
    """``CacheDir`` that refuses links and entries changed after they were written."""

    def retrieve(self, node) -> bool:
        _, entry = self.cachepath(node)
        if not entry or not os.path.lexists(entry):
            return super().retrieve(node)
        if os.path.islink(entry):
            raise SCons.Errors.UserError(f"{entry}: a link in the build cache, refused (an entry must be a plain file: remove it)")
        recorded = recorded_digest(entry)
        if not super().retrieve(node):
            return False
        local = node.get_internal_path()
        if recorded is None:  # not pushed by edge-build: built here instead, and the entry replaced
            os.unlink(local)
            return False
        if sha256_file(local) != recorded:
            os.unlink(local)
            raise SCons.Errors.UserError(
                f"{entry}: changed after it was written to the build cache (its SHA-256 is not the one in {entry}{DIGEST_SUFFIX}): remove it"
            )
        return True

    def push(self, node):
        pushed = super().push(node)
        _, entry = self.cachepath(node)
        if entry and not self.is_readonly() and os.path.isfile(entry) and not os.path.islink(entry):
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(entry), prefix=".digest-")
            with os.fdopen(handle, "w", encoding="ascii") as out:
                out.write(sha256_file(entry) + "\n")
            os.replace(temporary, entry + DIGEST_SUFFIX)
        return pushed


class ReadOnlyCacheDir(CheckedCacheDir):
    """Fetches and never writes (``cache_mode=readonly``): teammates read what CI alone writes."""

    def is_readonly(self) -> bool:
        return True
