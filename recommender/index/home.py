"""Where indexes live: the home folder bare index names resolve under ($PAPERS_HOME, ./indexes/
of a checkout, else the user data folder), the index folders found there, and the messages that
name an index (how to rebuild it, what to do when it is missing)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import IndexMissingError, InputError, shell_command
from .layout import CURRENT

DEFAULT_INDEX = "default"
# Where a bare index name lives: $PAPERS_HOME, else ./indexes/ when it exists
# (a checkout of the project), else the user data folder (platformdirs).
HOME_VARIABLE = "PAPERS_HOME"
INDEX_ROOT = Path("indexes")
APP_NAME = "papers"


def default_index() -> str:
    return (os.environ.get("PAPERS_INDEX") or "").strip() or DEFAULT_INDEX


@dataclass(frozen=True)
class IndexHome:
    """The folder bare index names resolve under, and why that one."""

    path: Path
    reason: str  # "PAPERS_HOME", "checkout" or "user data folder"

    def describe(self) -> str:
        why = {
            "PAPERS_HOME": f"from ${HOME_VARIABLE}",
            "checkout": f"./{INDEX_ROOT}/ of this folder",
            "user data folder": f"the user data folder; set ${HOME_VARIABLE} to choose another",
        }[self.reason]
        return f"{self.path} ({why})"


def index_home() -> IndexHome:
    """$PAPERS_HOME if set, else ./indexes/ when it exists (a checkout), else the user data
    folder."""
    home = os.environ.get(HOME_VARIABLE)
    if home:
        return IndexHome(Path(home).expanduser(), "PAPERS_HOME")
    if INDEX_ROOT.is_dir():
        return IndexHome(INDEX_ROOT, "checkout")
    import platformdirs

    return IndexHome(
        Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "indexes", "user data folder"
    )


def resolve_index_dir(index: str | os.PathLike | None = None) -> Path:
    """`<home>/<name>` for a bare name (see `index_home`), else the path as given."""
    index = str(index) if index is not None else default_index()
    if not index.strip():
        # An unset variable in a script (`--index "$NAME"`) would otherwise build into indexes/
        # itself.
        raise InputError("index name is empty: give an index name or folder")
    if os.sep in index or index.startswith(".") or (os.altsep and os.altsep in index):
        path = Path(index)
        # An index is not the folder of indexes: no need to work out where that is (platformdirs).
        if not (path / CURRENT).is_file() and path.resolve() == index_home().path.resolve():
            raise InputError(
                f"index {index} is the folder that holds every index: give an index name"
            )
        return path
    return index_home().path / index


def rebuild_hint(index_dir: Path, inputs: str | None = None) -> str:
    """The command that rebuilds the index, quoted for the shell (errors.shell_command)."""
    target = () if index_dir == resolve_index_dir(None) else ("--index", display_name(index_dir))
    return shell_command("papers", "build", *([inputs] if inputs else []), *target)


def display_name(index_dir: Path) -> str:
    """How to give the index to `--index`: its name when it lives in the home, else its path in a
    form `resolve_index_dir` reads as a path (`./stored`, not `stored`, which is a name)."""
    if index_dir.parent == index_home().path:
        return index_dir.name
    shown = str(index_dir)
    if os.sep not in shown and not shown.startswith("."):
        return os.path.join(".", shown)
    return shown


def missing_index(index_dir: Path) -> IndexMissingError:
    """The error for a folder without an index: where it looked (and why there), the other
    indexes of the home when the default is missing, and a user data folder that has the name."""
    home = index_home()
    # Outside a checkout there is no seeds/ to build from: the hint names an input.
    hint = rebuild_hint(index_dir, "my-papers.bib" if home.reason == "user data folder" else None)
    named = index_dir.parent == home.path
    where = (
        f" (names resolve under ${HOME_VARIABLE})" if named and home.reason == "PAPERS_HOME" else ""
    )
    message = f"no index at {index_dir}{where}"
    if named and home.reason == "PAPERS_HOME":
        import platformdirs

        user_data = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "indexes"
        if (
            user_data.resolve() != home.path.resolve()
            and (user_data / index_dir.name / CURRENT).is_file()
        ):
            return IndexMissingError(
                f"{message}; the user data folder has an index '{index_dir.name}'"
                f" ({user_data / index_dir.name}): unset ${HOME_VARIABLE} or give the index by its"
                f" path, {shell_command(str(user_data / index_dir.name))}"
            )
    others = [path.name for path in index_folders(home.path) if path != index_dir] if named else []
    if named and index_dir.name == default_index() and others:
        shown = ", ".join(others[:10]) + (
            f" and {len(others) - 10} more" if len(others) > 10 else ""
        )
        return IndexMissingError(
            f"{message}; the indexes there: {shown}: pick one by its name (or set"
            f" PAPERS_INDEX=NAME), or run `{hint}` to make '{index_dir.name}'"
        )
    return IndexMissingError(f"{message}: run `{hint}` first")


def index_folders(home: Path) -> list[Path]:
    """The index folders of a home (those with a CURRENT), by name."""
    try:
        return sorted(
            path for path in home.iterdir() if path.is_dir() and (path / CURRENT).exists()
        )
    except OSError:
        return []
