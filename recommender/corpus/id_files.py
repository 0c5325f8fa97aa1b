"""Files of paper IDs or handles (`--from`, `--exclude`): one a line, read like input files
(UTF-8, a BOM and CRLF line ends from Notepad allowed); `#` starts a comment, at the start of
a line or after an ID (`dp1  # read in March`)."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError

# A `#` that starts a line or follows a space: `a#b` stays one ID.
_COMMENT = re.compile(r"(?:^|\s)#.*$")


def read_id_file(path: str | Path, option: str, required: bool = False) -> list[str]:
    """The IDs or handles of a file, in order (InputError naming the file and `option` when it
    cannot be read, or holds none and `required`)."""
    from .readers.base import decode

    usage = f"{option} takes a file of paper IDs or handles, one a line"
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file ({usage})")
    if path.is_dir():
        raise InputError(f"{path}: a folder, not a file ({usage})")
    try:
        text = decode(path)
    except InputError as error:
        raise InputError(f"{error} ({usage})") from None
    references = []
    for line in text.splitlines():
        reference = _COMMENT.sub("", line).strip()
        if reference:
            references.append(reference)
    if required and not references:
        raise InputError(f"{path}: no paper IDs in it ({usage})")
    return references
