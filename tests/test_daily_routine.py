"""The daily routine exactly as docs/commands.md prints it (its one-line form, its cron line and its
systemd unit's command, read from the page), run by /bin/sh from nothing: a new user's home, no
index, no fetch before. Day one, day two and a day with nothing new, against an OAI-PMH server on
127.0.0.1 that the test starts; `papers` is a real process (tests/build_launcher.py: the fake
encoder) that a small script on PATH points at the test's server."""

import os
import re
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fetching import OaiServer

TESTS = Path(__file__).resolve().parent
DOCS = TESTS.parent / "docs" / "commands.md"
OAI_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
    "<responseDate>2025-06-02T00:00:00Z</responseDate>"
    '<request verb="ListRecords">x</request>'
)


def record(arxiv_id: str, title: str, abstract: str) -> str:
    return (
        f"<record><header><identifier>oai:arXiv.org:{arxiv_id}</identifier>"
        "<datestamp>2025-06-01</datestamp><setSpec>cs</setSpec></header>"
        f'<metadata><arXiv xmlns="http://arxiv.org/OAI/arXiv/"><id>{arxiv_id}</id>'
        "<created>2025-05-30</created><authors><author><keyname>Lovelace</keyname>"
        f"<forenames>Ada</forenames></author></authors><title>{title}</title>"
        f"<categories>cs.LG</categories><abstract>{abstract}</abstract></arXiv></metadata></record>"
    )


def page(*records: str) -> str:
    if not records:
        return OAI_HEAD + '<error code="noRecordsMatch">none</error></OAI-PMH>'
    return OAI_HEAD + "<ListRecords>" + "".join(records) + "</ListRecords></OAI-PMH>"


def routine_commands() -> dict[str, str]:
    """The routine's three forms as docs/commands.md prints them: the one-liner, the cron line's
    command (its five schedule fields taken off) and the systemd service's ExecStart command."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### A daily routine", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    one_line = blocks[0].strip()
    cron = blocks[1].splitlines()[0].split(None, 5)[5]
    (exec_start,) = [
        line.split("=", 1)[1] for line in blocks[2].splitlines() if line.startswith("ExecStart=")
    ]
    return {"one line": one_line, "cron": cron, "systemd": exec_start}


@pytest.fixture
def new_user(tmp_path):
    """A new user's home (no index, no fetch state) and the environment the routine runs in, with
    `papers` on PATH running this checkout against the test's server."""
    server = OaiServer(then=page())  # every ListRecords answered with today's page
    home = tmp_path / "home"
    (home / "papers").mkdir(parents=True)
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    shim = bin_folder / "papers"
    launcher = shlex.quote(str(TESTS / "build_launcher.py"))
    shim.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = fetch ]; then exec {shlex.quote(sys.executable)} {launcher} "$@"'
        f" --base-url {server.url} --delay 0; fi\n"
        f'exec {shlex.quote(sys.executable)} {launcher} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PAPERS_HOME", "PAPERS_INDEX")
    }
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        PATH=f"{bin_folder}{os.pathsep}{env['PATH']}",
        PYTHONPATH=os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")]),
    )
    yield server, home, env
    server.close()


def sh(command, home, env):
    """`command` run as cron and systemd run it: by /bin/sh, in ~/papers."""
    return subprocess.run(
        command if isinstance(command, list) else ["/bin/sh", "-c", command],
        cwd=home / "papers",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_documented_routine_runs_from_nothing_day_after_day(new_user):
    server, home, env = new_user
    commands = routine_commands()
    digest = home / "papers" / "today.html"

    # Day one, the one-line form: no fetch before, no index.
    server.then = page(
        record("2506.00001", "Private Training at Scale", "Differentially private training."),
        record("2506.00002", "Video Aesthetics", "Video aesthetic assessment models."),
    )
    first = sh(commands["one line"], home, env)
    assert first.returncode == 0, first.stderr
    two_days_ago = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 2 * 86400))
    assert f"fetching the last 2 days (since {two_days_ago})" in first.stderr
    assert server.queries[-1]["from"] == two_days_ago
    assert "added 2 papers to arxiv, a new index" in first.stdout
    assert "mine holds no papers yet" in first.stderr and "papers tags add mine" in first.stderr
    assert "Traceback" not in first.stderr and digest.is_file()
    tagging = sh("papers tags add mine 2506.00001 --index arxiv", home, env)
    assert tagging.returncode == 0, tagging.stderr
    assert "mine: 1 paper\n" in tagging.stderr

    # Day two, the cron line: what arrived is in the digest; the fetch starts from the last one.
    server.then = page(
        record("2506.00003", "Private Clipping of Gradients", "Differentially private clipping."),
        record("2506.00004", "Aesthetic Video Models", "Video aesthetic assessment at scale."),
    )
    second = sh(commands["cron"], home, env)
    assert second.returncode == 0, second.stderr
    assert server.queries[-1]["from"] == time.strftime("%Y-%m-%d", time.gmtime())
    page_two = digest.read_text(encoding="utf-8")
    assert "Private Clipping of Gradients" in page_two and "Aesthetic Video Models" in page_two
    assert page_two.count("border:1px solid") == 2  # the two new papers, not the tag's own
    assert "since 20" not in page_two and "T0" not in page_two  # a date as people read it

    # A day with nothing new, the systemd unit's command: the routine still succeeds, saying so.
    server.then = page()
    third = sh(shlex.split(commands["systemd"]), home, env)
    assert third.returncode == 0, third.stderr
    assert "No new papers." in digest.read_text(encoding="utf-8")
