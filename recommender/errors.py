"""Exceptions raised by the library; the CLI turns each into a one-line message."""


class RecommenderError(Exception):
    """Base class: every failure a user can meet is one of these."""


class InputError(RecommenderError):
    """An input file or record cannot be read as papers."""


class OptionError(InputError):
    """An option's value is out of its range: bad usage, which the CLI exits with 2 for, as for click's own."""


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


def shell_command(*words: str) -> str:
    """A command for a message ("run `papers build --index 'my;docs'`"), each word quoted for the
    shell, so that pasting it runs that one command whatever a path or name holds."""
    import shlex

    return shlex.join(str(word) for word in words)
