"""Exceptions raised by the library; the CLI turns each into a one-line message.

One class a kind of failure. A message speaks the library's words (a parameter's name, never a CLI
option's): where a value given for a parameter is at fault, the error names that parameter in
`parameter`, and the CLI and the API add their own name for it (`--limit`, `?n=`).
"""


class RecommenderError(Exception):
    """Base class: every failure a user can meet is one of these."""


class InputError(RecommenderError):
    """An input file or record cannot be read as papers."""


class OptionError(InputError):
    """A parameter's value is unknown or out of its range ("unknown precision 'fp16'"), or does not
    fit another's: bad usage, which the CLI exits with 2 for, as for click's own. `parameter` names
    the library's parameter at fault (None where the message names it already)."""

    def __init__(self, message: str, parameter: str | None = None):
        super().__init__(message)
        self.parameter = parameter


class LimitError(RecommenderError):
    """A bound on waiting or on size was reached (a fetch's longest wait, its deadline, its most
    pages); `parameter` names the library's parameter that sets it, for the CLI to name its own."""

    def __init__(self, message: str, parameter: str):
        super().__init__(message)
        self.parameter = parameter


class IndexMissingError(RecommenderError):
    """No index exists where one was asked for."""


class IndexMismatchError(RecommenderError):
    """The index was built with another model, chunking or format version."""


class IndexCorruptError(RecommenderError):
    """A stored file of the index is missing, truncated or altered."""


class IndexBusyError(RecommenderError):
    """Another build holds the index lock."""


class PaperNotFoundError(RecommenderError):
    """A paper reference matches no paper, or more than one."""


class ModelError(RecommenderError):
    """The embedding model cannot be loaded."""


class EncodingInterrupted(KeyboardInterrupt):
    """Ctrl-C during a build. The index is unchanged; the vectors of `kept` of the
    build's `total` papers are in the embedding cache, so the same build run again
    resumes from there. A KeyboardInterrupt, so code catching that still does."""

    def __init__(self, kept: int, total: int):
        super().__init__(kept, total)
        self.kept = kept
        self.total = total


class EngineError(RecommenderError):
    """The compute engine of a build (Ray) is missing, unreachable, or one of its workers failed."""


def install_command(extra: str) -> str:
    """How to install one of the distribution's extras ("pip install 'papers-like[serve]'")."""
    from . import DISTRIBUTION

    return f"pip install '{DISTRIBUTION}[{extra}]'"


def shell_command(*words: str) -> str:
    """A command for a message ("run `papers build --index 'my;docs'`"), each word quoted for the
    shell, so that pasting it runs that one command whatever a path or name holds."""
    import shlex

    return shlex.join(str(word) for word in words)


def caller_stacklevel() -> int:
    """The `stacklevel` that makes a warning name the first line outside this package: the user's
    call (`build_index(...)`, `read_papers(...)`), however deep in the package's stages the warning
    is raised, rather than a line of the package's own (what Python 3.12's `skip_file_prefixes`
    does). Called in the function that calls `warnings.warn`."""
    import sys

    package = __name__.split(".")[0]
    frame, level = sys._getframe(1), 1  # stacklevel 1: the function that warns
    while frame.f_back is not None and frame.f_globals.get("__name__", "").split(".")[0] == package:
        frame, level = frame.f_back, level + 1
    return level
