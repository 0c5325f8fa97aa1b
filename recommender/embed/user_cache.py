"""The user cache folder that model exports, unpacked models and compiled models share, how an
entry leaves it, and the staging folders that killed processes leave in it.

Every staging folder (an export, a quantisation, a distillation, an unpacked model, an entry being
removed) carries its owner in its name: the pid and start time of the process making it. A folder
whose owner is gone is a leftover: the next export, `papers cache info` and `papers cache clear`
remove it. A live owner's folder is never touched; one named before owners were recorded is a
leftover once nothing in it has changed for STALE_UNOWNED_SECONDS.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

CACHE_VARIABLE = "PAPERS_CACHE"
APP_NAME = "papers"  # the platformdirs name, as for the user data folder of indexes


def cache_home() -> Path:
    """$PAPERS_CACHE if set, else the user cache folder (platformdirs)."""
    home = os.environ.get(CACHE_VARIABLE)
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def remove_entry(folder: Path) -> None:
    """Remove a cache entry: renamed aside first, so no reader sees it half removed."""
    if not folder.exists():
        return
    aside = folder.with_name(f".removing-{folder.name}-{owner_tag()}-{os.urandom(3).hex()}")
    try:
        os.rename(folder, aside)
    except OSError:
        aside = folder
    shutil.rmtree(aside, ignore_errors=True)


# The staging folders of the cache; an owner record ends each name: -o<pid>-<start time>-<random>.
STAGING_PREFIXES = (".export-", ".unpack-", ".removing-")
_OWNER = re.compile(r"-o(\d+)-(\d+)-[A-Za-z0-9_]+$")
# A staging folder named without an owner (an earlier version of papers) is a leftover once
# nothing in it has changed for this long: no export or unpacking pauses that long.
STALE_UNOWNED_SECONDS = 3600


def _start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat), 0 where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return 0


def owner_tag() -> str:
    """This process as the owner of a staging folder: `o<pid>-<start time>`."""
    return f"o{os.getpid()}-{_start_time(os.getpid())}"


def staging_folder(parent: Path, prefix: str) -> Path:
    """A new private staging folder in `parent`, its owner (this process) in its name."""
    return Path(tempfile.mkdtemp(dir=parent, prefix=f"{prefix}{owner_tag()}-"))


def _owner_alive(pid: int, start: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    # A pid is reused: the owner is this process only if it started when the record says.
    return not start or _start_time(pid) in (0, start)


def _newest_change(folder: Path) -> float:
    newest = folder.lstat().st_mtime
    for path in folder.rglob("*"):
        try:
            newest = max(newest, path.lstat().st_mtime)
        except OSError:
            pass
    return newest


def _folder_bytes(folder: Path) -> int:
    """The bytes of the plain files under `folder`, a file linked twice (hard links) once."""
    total, seen = 0, set()
    try:
        paths = list(folder.rglob("*"))
    except OSError:
        return 0
    for path in paths:
        try:
            status = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(status.st_mode) and (status.st_dev, status.st_ino) not in seen:
            seen.add((status.st_dev, status.st_ino))
            total += status.st_size
    return total


def folder_contents(home: Path, kinds: dict[str, str]) -> list[dict]:
    """What the cache folder `home` keeps in each of `kinds` (folder name -> what it holds): the
    folder's path, its entries and its bytes (0 and 0 for a folder not made yet). Staging folders
    and partial files, named with a leading dot, are not entries; their bytes count."""
    contents = []
    for name, holds in kinds.items():
        folder = Path(home) / name
        try:
            entries = sum(1 for path in folder.iterdir() if not path.name.startswith("."))
        except OSError:
            entries = 0
        contents.append(
            {
                "folder": name,
                "holds": holds,
                "path": str(folder),
                "entries": entries,
                "bytes": _folder_bytes(folder),
            }
        )
    return contents


def stale_leftovers(home: Path | None = None) -> list[Path]:
    """The staging folders in the cache whose owner is gone (see the module's docstring)."""
    home = cache_home() if home is None else Path(home)
    found = []
    try:
        # onnx/ may be a link to another disk: its staging folders are looked for there too
        folders = [home, *(path for path in home.iterdir() if path.is_dir())]
    except OSError:
        return []
    for folder in folders:
        try:
            candidates = sorted(folder.iterdir())
        except OSError:
            continue
        for path in candidates:
            if not path.name.startswith(STAGING_PREFIXES) or path.is_symlink() or not path.is_dir():
                continue
            owner = _OWNER.search(path.name)
            try:
                if owner:
                    stale = not _owner_alive(int(owner[1]), int(owner[2]))
                else:
                    stale = time.time() - _newest_change(path) > STALE_UNOWNED_SECONDS
            except OSError:
                continue  # removed meanwhile
            if stale:
                found.append(path)
    return found


def remove_stale_leftovers(home: Path | None = None) -> list[dict]:
    """Remove the cache's leftovers (`stale_leftovers`); returns each one's path and bytes."""
    removed = []
    for path in stale_leftovers(home):
        size = _folder_bytes(path)
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append({"path": str(path), "bytes": size})
    return removed


def leftovers_notice(removed: list[dict], home: Path) -> str:
    """One line on the leftovers removed from the cache folder `home` ('' for none)."""
    if not removed:
        return ""
    total = sum(item["bytes"] for item in removed)
    folders = "folder" if len(removed) == 1 else "folders"
    return (
        f"removed {len(removed)} {folders} ({total / 1e6:,.1f} MB) that interrupted model exports "
        f"or unpackings left in the cache folder {home}"
    )
