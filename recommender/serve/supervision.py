"""Processes of the server that stop when the process that started them is gone."""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("papers.serve")


def follow_supervisor(supervisor: int) -> None:
    """A worker stops (gracefully, as on SIGTERM) when its supervisor is gone, killed with -9 too:
    the kernel signals it at once on Linux (PR_SET_PDEATHSIG), and a thread watching the parent does
    it elsewhere (or should the signal be missed)."""
    import signal
    import threading

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == supervisor:
            threading.Event().wait(0.5)
        log.error("the supervisor (pid %d) is gone: this worker stops", supervisor)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="supervisor watch", daemon=True).start()
