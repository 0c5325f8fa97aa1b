"""Content hashes of files, for the index manifest and the shared model exports."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def file_digest(path: Path) -> str:
    """The sha256 of a file's content, read in 1 MiB blocks, as hex. A symbolic link is never
    followed (OSError ELOOP): what is hashed is always the file itself, never what a link names."""
    digest = hashlib.sha256()
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
