"""Real output for the examples in README.md and docs/*.md, written there by cog.

Each example runs the installed `papers` command as a user would, in a folder laid out like a
checkout (`seeds/`, `indexes/`), on the seed index built once per cog run with the packaged model:

    <!-- [[[cog
    from _examples import run        # README.md: from docs._examples import run
    run("papers like FlashDP -k 5")
    ]]] -->
    ...the output, written by `cog -r` and compared by `cog --check`...
    <!-- [[[end]]] -->

`cog -r README.md docs/*.md` rewrites every example; `cog --check` (tests/test_docs.py) fails when one
no longer matches what the command prints. The work folder is $PAPERS_DOCS_WORK, else
build/docs-examples/ in the checkout; it is made anew for every run. Every index is built at
int8-smooth ($PAPERS_PRECISION), so the examples print the same on every CPU.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import cog

ROOT = Path(__file__).resolve().parent.parent
#: The examples' index records this build time (2025-11-30T12:00:00+0000), not the time of the run.
BUILD_TIME = "1764504000"
#: Set in this process once the seed index is built, so README.md (which imports this module as
#: docs._examples) and docs/*.md (as _examples) share one build.
_BUILT = "PAPERS_DOCS_EXAMPLES_BUILT"


def _work() -> Path:
    return Path(os.environ.get("PAPERS_DOCS_WORK") or ROOT / "build" / "docs-examples").resolve()


def _papers() -> str:
    """The `papers` script installed beside this Python, as a user runs it."""
    script = Path(sys.executable).parent / "papers"
    found = str(script) if script.exists() else shutil.which("papers")
    if not found:
        raise SystemExit("docs examples: no `papers` command; pip install -e '.[docs]' first")
    return found


def _environment(cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERS_HOME", "PAPERS_INDEX", "COLUMNS")}
    env["PAPERS_CACHE"] = str(_cache(cwd))  # the checkout's user: an embedding cache of its own
    env["SOURCE_DATE_EPOCH"] = BUILD_TIME  # the build time `papers info` shows, the same every run
    env["PAPERS_SLOW_PHASE_SECONDS"] = "off"  # a short build's log stays silent however loaded the machine
    # Built at int8-smooth, the default on most CPUs, whatever this one has: at bf16 (the default
    # on AMX) scores and orders differed between an AMX Xeon and an AMD EPYC, at int8-smooth every
    # example printed the same on both.
    env["PAPERS_PRECISION"] = "int8-smooth"
    # Shown as a terminal 100 columns wide shows them (a pipe would get whole lines).
    env["COLUMNS"] = "100"
    return env


def _cache(checkout: Path) -> Path:
    return checkout.parent / f"cache-{checkout.name}"


def _checkout(folder: Path) -> Path:
    """A folder laid out like a fresh checkout: the seeds and an empty `indexes/`, and a new user's
    cache folder (its embedding cache empty; the ONNX exports, made once, shared by every run)."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(ROOT / "seeds", folder / "seeds")
    (folder / "indexes").mkdir()
    cache, exports = _cache(folder), folder.parent / "onnx-exports"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    exports.mkdir(exist_ok=True)
    (cache / "onnx").symlink_to(exports)
    return folder


def _seed_checkout() -> Path:
    """The checkout whose seed index the examples query, built on first use in this process."""
    work = _work()
    folder = work / "checkout"
    if os.environ.get(_BUILT) != str(folder):
        _checkout(folder)
        _execute("papers build --quiet", folder, status=0)
        os.environ[_BUILT] = str(folder)
    return folder


def _execute(command: str, cwd: Path, status: int | None) -> str:
    """Run one shell-like command line (`papers ...`, comments allowed); its stdout and stderr
    interleaved as a terminal shows them (one pipe for both; click flushes every line)."""
    words = shlex.split(command, comments=True)
    if words[0] == "papers":
        words[0] = _papers()
    done = subprocess.run(words, cwd=cwd, env=_environment(cwd), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    if status is not None and done.returncode != status:
        raise SystemExit(f"docs example `{command}` exited {done.returncode}, not {status}:\n{done.stdout}")
    return done.stdout


def run(*commands: str, head: int | None = None, width: int | None = None, fresh: bool = False,
        files: dict | None = None, show_files: bool = False, status: int | None = 0,
        lang: str = "console") -> None:
    """Write a fenced block with each command (`$ papers ...`) followed by its real output.

    head: show only the first lines of each output, then `...`; width: cut longer lines there,
    ending them with `…` (the prose says so where it is used); fresh: run in a new checkout with
    no index (its first `papers build` encodes every paper); files: {name: text or Path} written into
    the folder first (show_files: each shown before the commands, in its own block); status: the exit status every command must have (None: any)."""
    work = _work()
    folder = _checkout(work / "fresh") if fresh else _seed_checkout()
    for name, content in (files or {}).items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_text(content, encoding="utf-8")
        if show_files:
            cog.outl(f"`{name}`:\n")
            _fence(target.read_text(encoding="utf-8").rstrip("\n").split("\n"), Path(name).suffix.lstrip(".") or "text")
            cog.outl()
    lines = []
    for command in commands:
        lines += [f"$ {command}", *_shorten(_execute(command, folder, status), head, width)]
    _fence(lines, lang)


def output(command: str, *, head: int | None = None, width: int | None = None, lang: str = "text",
           status: int | None = 0) -> None:
    """Like `run`, for one command, without the `$ command` line (when the prose names the command)."""
    _fence(_shorten(_execute(command, _seed_checkout(), status), head, width), lang)


def _shorten(text: str, head: int | None, width: int | None) -> list[str]:
    lines = text.rstrip("\n").split("\n")
    if head is not None and len(lines) > head:
        lines = [*lines[:head], "..."]
    if width is not None:
        lines = [line if len(line) <= width else line[:width - 1] + "…" for line in lines]
    return lines


def python(code: str) -> None:
    """Show a Python snippet, then what it prints when run in the seed checkout (a fresh process)."""
    code = code.strip("\n")
    _fence(code.split("\n"), "python")
    folder = _seed_checkout()
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=_environment(folder),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"docs example failed:\n{code}\n{done.stdout}")
    cog.outl("\nprints\n")
    _fence(done.stdout.rstrip("\n").split("\n"), "text")


def help_text(*command: str) -> str:
    """`papers COMMAND --help` as printed at 80 columns (click's help, not an imitation)."""
    from click.testing import CliRunner

    from recommender.cli import main

    result = CliRunner().invoke(main, [*command, "--help"], prog_name="papers", terminal_width=80)
    if result.exit_code != 0:
        raise SystemExit(f"papers {' '.join(command)} --help failed: {result.output}")
    return result.output.rstrip("\n")


def cli_reference() -> None:
    """Every command's --help, one section each, in the order `papers --help` lists them."""
    from recommender.cli import main

    sections = [("", help_text())]
    for name in main.list_commands(None):
        command = main.get_command(None, name)
        sections.append((name, help_text(name)))
        for sub in getattr(command, "list_commands", lambda ctx: [])(None):
            sections.append((f"{name} {sub}", help_text(name, sub)))
    for name, text in sections:
        anchor = "help" + ("-" + re.sub(r"\W+", "-", name) if name else "")
        cog.outl(f"\n({anchor})=\n## papers {name + ' ' if name else ''}--help\n")
        _fence(text.split("\n"), "text")


def _fence(lines: list[str], lang: str) -> None:
    longest = max((len(m) for line in lines for m in re.findall(r"`{3,}", line)), default=0)
    fence = "`" * max(3, longest + 1)
    cog.outl(f"{fence}{lang}")
    for line in lines:
        cog.outl(line)
    cog.outl(fence)
