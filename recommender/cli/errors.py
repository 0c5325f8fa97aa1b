"""How the `papers` commands fail: library errors, warnings, Ctrl-C and SIGTERM, and click's usage
errors, each as one line on stderr with a non-zero exit (2 for bad usage)."""

from __future__ import annotations

import _thread
import contextlib
import functools
import os
import signal
import sys
import threading
import warnings

import click

from ..errors import OptionError, RecommenderError


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


@contextlib.contextmanager
def _summarised_warnings(verbose: bool):
    """Warnings on stderr, one line each; duplicate papers summarised once unless `verbose`."""
    from ..corpus.papers import DuplicatePaperWarning

    duplicates = []

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DuplicatePaperWarning) and not verbose:
            duplicates.append(str(message))
        else:
            _show_warning(message, category, filename, lineno)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "always", UserWarning
            )  # every run shows its warnings, not just the first
            warnings.showwarning = show
            yield
    finally:
        if len(duplicates) == 1:
            _show_warning(duplicates[0], DuplicatePaperWarning, "", 0)
        elif duplicates:
            click.echo(
                f"warning: {len(duplicates)} duplicate papers kept once (--verbose lists them)",
                err=True,
            )


def library_errors(command):
    """Library exceptions become one-line messages with a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        if sys.stdout is None and kwargs.get("out") is None:
            # Started with standard output closed (`papers list >&-`): its results could go nowhere.
            raise click.ClickException(
                "standard output is closed: nothing can be printed (redirect it to a file)"
            )
        try:
            with _summarised_warnings(kwargs.get("verbose", False)), _terminate_unwinds():
                return command(*args, **kwargs)
        except (
            OptionError
        ) as error:  # an option's value out of range: bad usage, as click's own errors
            raise _UsageLine(_naming_the_option(error)) from None
        except RecommenderError as error:
            raise click.ClickException(str(error)) from None
        except BrokenPipeError:
            # The reader went away (`papers list | head`): stop quietly, as Unix tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except OSError as error:
            where = f"{error.filename}: " if error.filename else ""
            raise click.ClickException(f"{where}{error.strerror or error}") from None
        except MemoryError:
            raise click.ClickException(
                "out of memory: free some memory or raise the limit (ulimit -v)"
            ) from None
        except KeyboardInterrupt:
            # Ctrl-C outside a build (those say what they keep): one line, as a build's, not click's
            # "Aborted!".
            out = kwargs.get("out")
            kept = f"{out} was not written (an earlier file of that name is kept); " if out else ""
            click.echo(f"interrupted: {kept}run the same command again", err=True)
            sys.exit(130)
        except (
            ImportError
        ) as error:  # a library that cannot be mapped under a memory limit, or a broken install
            raise click.ClickException(
                f"cannot load a library ({error}): check memory limits (ulimit -v) or reinstall"
            ) from None

    return wrapper


class _Terminated(SystemExit):
    """SIGTERM's exit, raised wherever the signal's handler runs."""


def _stop_signal(stop: BaseException) -> signal.Signals:
    """The signal whose handler raised `stop`: SIGTERM's `_Terminated`, else Ctrl-C's SIGINT."""
    return signal.SIGTERM if isinstance(stop, _Terminated) else signal.SIGINT


# A stop is delivered again this long after it was lost: by then the program has left the
# finalizer or the callback it landed in (should it land in one again, it is delivered again).
DELIVER_AGAIN_SECONDS = 0.01


@contextlib.contextmanager
def _terminate_unwinds():
    """SIGTERM (`kill`, a closed terminal) unwinds like Ctrl-C while a command runs, so a partial
    output file or a build's private folder is removed on the way out.

    Python runs a signal's handler wherever the program is when the signal arrives, and an
    exception raised inside a finalizer or a garbage-collector callback is reported and ignored
    there, not raised: a SIGTERM or a Ctrl-C arriving during a collection would be lost, and the
    command would carry on. Such a stop is delivered again, from a thread, a moment later."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise _Terminated(128 + signum)

    reported = sys.unraisablehook
    later: list[threading.Timer] = []
    on_its_way: list[signal.Signals] = []  # the stop a timer is about to deliver, until then

    def deliver(signum: signal.Signals) -> None:
        # Cleared before the stop is raised: should it be lost again at once, a new delivery is
        # made, even while this timer's thread is still ending (under load, it can outlive it).
        on_its_way.clear()
        _thread.interrupt_main(signum)

    def deliver_later(signum: signal.Signals) -> None:
        if not on_its_way:
            on_its_way.append(signum)
            later.append(threading.Timer(DELIVER_AGAIN_SECONDS, deliver, (signum,)))
            later[-1].daemon = True
            later[-1].start()

    def deliver_again(unraisable) -> None:
        try:
            if isinstance(unraisable.exc_value, (_Terminated, KeyboardInterrupt)):
                deliver_later(_stop_signal(unraisable.exc_value))
            else:
                reported(unraisable)
        except (_Terminated, KeyboardInterrupt) as stop:  # landed here, ignored here as well
            deliver_later(_stop_signal(stop))

    previous = signal.signal(signal.SIGTERM, terminate)
    sys.unraisablehook = deliver_again
    try:
        yield
    finally:
        for timer in later:
            timer.cancel()  # the command has ended: a stop still on its way is not needed
        signal.signal(signal.SIGTERM, previous)
        if sys.unraisablehook is deliver_again:
            sys.unraisablehook = reported


@contextlib.contextmanager
def _one_line_usage():
    """Click's usage errors (a bad option value, an unknown option) as one `Error:` line, like every
    other error."""
    try:
        yield
    except click.UsageError as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `papers`: click shows the help
            raise
        command = error.ctx.command_path if error.ctx is not None else "papers"
        message = error.format_message().rstrip(".")
        raise _UsageLine(f"{message} (see `{command} --help`)") from None


def _naming_the_option(error: OptionError) -> str:
    """The library's message, with the command's name for the parameter at fault (as click's)."""
    context = click.get_current_context(silent=True)
    params = context.command.params if context is not None else []
    option = next((param for param in params if param.name == error.parameter), None)
    if option is None:
        return str(error)
    name = option.opts[0] if isinstance(option, click.Option) else option.human_readable_name
    return f"Invalid value for '{name}': {error}"


class _UsageLine(click.ClickException):
    exit_code = 2


class CommandGroup(click.Group):
    """A group whose usage errors and unwritable help are one line each, never a traceback."""

    def main(self, *args, **kwargs):
        """Output that cannot be written (`papers --help > /dev/full`, a closed pipe) is one line,
        not a traceback."""
        try:
            return super().main(*args, **kwargs)
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(141)
        # library errors are caught in each command: this is writing out help or a version
        except OSError as error:
            _silence_stdout()
            click.echo(
                f"Error: cannot write to standard output: {error.strerror or error}", err=True
            )
            sys.exit(1)

    def make_context(self, *args, **kwargs):
        with _one_line_usage():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _one_line_usage():
            return super().invoke(ctx)


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so what is still buffered cannot fail again at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@contextlib.contextmanager
def stopped_builds(command: str = "build"):
    """Ctrl-C during a build (of `papers build`, or of `papers evaluate`'s index): one line saying
    what is kept and how to resume, exit code 130."""
    from ..errors import EncodingInterrupted

    try:
        yield
    except EncodingInterrupted as interrupt:
        click.echo(
            f"interrupted: {interrupt.kept:,} of {interrupt.total:,} papers are encoded and kept in"
            f" the cache; run the same {command} again to resume",
            err=True,
        )
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo(
            f"interrupted: run the same {command} again (papers already encoded are kept in the"
            " cache)",
            err=True,
        )
        sys.exit(130)
