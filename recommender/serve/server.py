"""Run the application on uvicorn: one process, or N workers under uvicorn's own supervisor."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..index.home import resolve_index_dir
from ..query.recommender import Recommender
from .app import INDEX_VARIABLE, LOOPBACK_VARIABLE, TOKEN_VARIABLE
from .security import is_loopback, new_token

TOKEN_ENVIRONMENT = "PAPERS_TOKEN"
MAX_WORKERS = 64


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one), bound before uvicorn starts, so the
    printed address is the real one and every worker shares the socket."""
    if not 0 <= port <= 65535:
        raise InputError(f"--port must be 0..65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise InputError(f"--host {host}: {error.strerror}: give an address such as 127.0.0.1") from None
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
        listener.set_inheritable(True)
    except OSError as error:
        listener.close()
        raise InputError(f"cannot listen on {host}:{port}: {error.strerror}: choose another --port or --host") from None
    return listener


def url_of(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(index: str | None, host: str = "127.0.0.1", port: int = 8000, workers: int = 1, token: str | None = None,
          announce: Callable[[str], None] = print) -> None:
    """Serve an index until Ctrl-C or SIGTERM. Off loopback, writes need a token (given, $PAPERS_TOKEN,
    or generated and announced, as Jupyter does)."""
    if not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"--workers must be 1..{MAX_WORKERS}, got {workers}")
    index_dir = Path(os.path.abspath(resolve_index_dir(index)))
    Recommender.open(index_dir).close()  # a missing or damaged index is one line now, not in every request
    token = token or os.environ.get(TOKEN_ENVIRONMENT) or None
    loopback = is_loopback(host)
    generated = token is None and not loopback
    if generated:
        token = new_token()
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    listener = bind(host, port)
    os.environ.update({INDEX_VARIABLE: str(index_dir), TOKEN_VARIABLE: token or "", LOOPBACK_VARIABLE: "1" if loopback else "0"})
    config = uvicorn.Config("recommender.serve.app:app_from_environment", factory=True, workers=workers,
                            log_level="warning", access_log=False, server_header=False, timeout_graceful_shutdown=10)
    address = url_of(listener)
    announce(f"serving {index_dir} at {address} with {workers} worker{'s' if workers != 1 else ''} (Ctrl-C stops)")
    if token is not None:
        announce(f"writes (tags) need the token: open {address}?token={token} or send Authorization: Bearer {token}"
                 if generated else "writes (tags) need the token given with --token or $PAPERS_TOKEN")
    # uvicorn stops gracefully on SIGTERM or Ctrl-C, then raises the signal again for whoever handled it
    # before: here, a stop that has already been carried out, so the command ends with status 0.
    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        if workers > 1:
            Multiprocess(config, sockets=[listener]).run()
        else:
            uvicorn.Server(config).run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        listener.close()


def _stopped(signum, frame):
    raise SystemExit(0)
