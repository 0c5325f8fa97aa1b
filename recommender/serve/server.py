"""Run the application on uvicorn: one process, or N workers under uvicorn's own supervisor."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError, OptionError
from ..index.home import resolve_index_dir
from ..query.paper_index import PaperIndex
from .app import INDEX_VARIABLE, LOOPBACK_VARIABLE, SUPERVISOR_VARIABLE, TOKEN_VARIABLE
from .security import is_loopback, new_token

TOKEN_ENVIRONMENT = "PAPERS_TOKEN"
MAX_WORKERS = 64
SHUTDOWN_SECONDS = (
    10  # a stop waits this long for requests in progress, then cuts them (and says so)
)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one), bound before uvicorn starts, so the
    printed address is the real one and every worker shares the socket."""
    if not 0 <= port <= 65535:
        raise OptionError(f"port must be 0..65535, got {port}", "port")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise OptionError(
            f"host {host}: {error.strerror}: give an address such as 127.0.0.1", "host"
        ) from None
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
        listener.set_inheritable(True)
    except OSError as error:
        listener.close()
        raise InputError(
            f"cannot listen on {host}:{port}: {error.strerror}: choose another port or host"
        ) from None
    return listener


def url_of(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


TOKEN_FILE_BYTES = 4096  # a token file is a small text file: its first line is the token


def read_token_file(path: str) -> str:
    """The token in the first line of a file (kept out of the process list, which anyone on the host
    reads). Only a small regular file is read: a device (/dev/zero) would be read for ever, a FIFO
    with no writer waited on for ever; either is refused in one line, as bad usage."""
    import stat

    def refused(reason: str) -> OptionError:
        return OptionError(
            f"token file {path}: {reason}: give a small regular file whose first line is the token"
        )

    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once (and is then refused)
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise refused(error.strerror or "cannot be opened") from None
    with open(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise refused(f"is {file_kind(status.st_mode)}, not a regular file")
        if status.st_size > TOKEN_FILE_BYTES:
            raise refused(
                f"holds {status.st_size:,} bytes (a token file holds at most {TOKEN_FILE_BYTES:,})"
            )
        data = handle.read(TOKEN_FILE_BYTES + 1)
    if len(data) > TOKEN_FILE_BYTES:
        raise refused(f"holds more than {TOKEN_FILE_BYTES:,} bytes")
    try:
        token = data.split(b"\n", 1)[0].decode("utf-8").strip()
    except UnicodeDecodeError:
        raise refused("not UTF-8 text") from None
    if not token:
        raise OptionError(f"token file {path} is empty: write the token on its first line")
    return token


def file_kind(mode: int) -> str:
    import stat

    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def serve(
    index: str | None,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    token: str | None = None,
    announce: Callable[[str], None] = print,
    token_file: str | None = None,
) -> None:
    """Serve an index until Ctrl-C or SIGTERM. Off loopback, writes need a token (from `token_file`,
    given, $PAPERS_TOKEN, or generated and announced, as Jupyter does)."""
    if not 1 <= workers <= MAX_WORKERS:
        raise OptionError(f"workers must be 1..{MAX_WORKERS}, got {workers}", "workers")
    index_dir = Path(os.path.abspath(resolve_index_dir(index)))
    PaperIndex.open(
        index_dir
    ).close()  # a missing or damaged index is one line now, not in every request
    loopback = is_loopback(host)
    token, generated = _server_token(token, token_file, loopback)
    import uvicorn

    from .protocol import fit_descriptor_limit

    fit_descriptor_limit()  # before the workers start: they inherit it
    listener = bind(host, port)
    _hand_settings(index_dir, token, loopback, workers)
    config = _uvicorn_config(workers)
    address = url_of(listener)
    announce(
        f"serving {index_dir} at {address} with {workers} worker{'s' if workers != 1 else ''}"
        " (Ctrl-C stops)"
    )
    if token is not None:
        announce(
            f"writes (tags) need the token: open {address}?token={token} or send Authorization:"
            f" Bearer {token}"
            if generated
            else "writes (tags) need the token given with --token or $PAPERS_TOKEN"
        )
    _run_until_stopped(uvicorn, config, listener, workers)


def _server_token(
    token: str | None, token_file: str | None, loopback: bool
) -> tuple[str | None, bool]:
    """The token writes need (from `token_file`, given, $PAPERS_TOKEN, or generated off loopback)
    and whether it was generated."""
    if token_file is not None:
        token = read_token_file(token_file)
    token = token or os.environ.get(TOKEN_ENVIRONMENT) or None
    generated = token is None and not loopback
    if generated:
        token = new_token()
    return token, generated


def _hand_settings(index_dir: Path, token: str | None, loopback: bool, workers: int) -> None:
    """The server's settings as the environment uvicorn's workers inherit."""
    os.environ.update(
        {
            INDEX_VARIABLE: str(index_dir),
            TOKEN_VARIABLE: token or "",
            LOOPBACK_VARIABLE: "1" if loopback else "0",
        }
    )
    if workers > 1:
        os.environ[SUPERVISOR_VARIABLE] = str(os.getpid())
    else:
        os.environ.pop(SUPERVISOR_VARIABLE, None)


def _uvicorn_config(workers: int):
    """uvicorn's settings: the app made in each worker from the environment, the guarded HTTP
    protocol, no access log, no server header, the shutdown bound."""
    import uvicorn

    from .protocol import HEAD_BYTES, GuardedH11Protocol

    return uvicorn.Config(
        "recommender.serve.app:app_from_environment",
        factory=True,
        workers=workers,
        http=GuardedH11Protocol,
        h11_max_incomplete_event_size=HEAD_BYTES,
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
    )


def _run_until_stopped(uvicorn, config, listener, workers: int) -> None:
    """Serve on `listener` until a stop. uvicorn stops gracefully on SIGTERM or Ctrl-C, then raises
    the signal again for whoever handled it before: here, a stop that has already been carried
    out, so the command ends with status 0."""
    from uvicorn.supervisors import Multiprocess

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
