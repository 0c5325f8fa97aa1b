"""Processes started to outlive the one that starts them, detached from it: a background
compaction that goes on after the short `papers add` that started it."""

from __future__ import annotations

import os
from pathlib import Path

from .files import open_exclusive


def start_detached(command: list[str], log_path: Path) -> int:
    """Start `command`, its output to a new file `log_path`, as a process that is not a child of
    this one: a short-lived launcher starts it in a session of its own (not stopped with the
    terminal or a Ctrl-C of this process) and exits at once, waited for here. Nothing is left for
    this process to reap, however long it lives; the command, orphaned, is reaped by the system
    when it ends. Returns its process ID."""
    import subprocess
    import sys

    reader, writer = os.pipe()
    try:
        with open_exclusive(log_path, "w") as log:
            launcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _DETACHED, str(writer), *command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(writer,),
                start_new_session=True,
            )
        os.close(writer)
        writer = -1
        told = b""
        while chunk := os.read(reader, 64):
            told += chunk
    finally:
        os.close(reader)
        if writer >= 0:
            os.close(writer)
    if launcher.wait() != 0 or not told.isdigit():
        raise OSError(f"{command[0]} could not be started in the background: see {log_path}")
    return int(told)


# `start_detached`'s launcher (run as `python -c`, given the descriptor to tell the process ID
# on, then the command): it forks, the child running the command in a session of its own, and
# exits.
_DETACHED = r"""
import os, sys
told = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    try:
        os.close(told)
        os.setsid()
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as error:
        sys.stderr.write(f"Error: {sys.argv[2]} could not be started: {error}\n")
        sys.stderr.flush()
    os._exit(127)
os.write(told, str(pid).encode())
"""
