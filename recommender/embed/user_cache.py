"""The user cache folder that model exports and unpacked models share, and how an entry leaves it."""

from __future__ import annotations

import os
import shutil
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
    aside = folder.with_name(f".removing-{folder.name}-{os.getpid()}")
    try:
        os.rename(folder, aside)
    except OSError:
        aside = folder
    shutil.rmtree(aside, ignore_errors=True)
