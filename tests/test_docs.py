"""The documentation cannot go stale: the site builds without a warning (dead links and anchors
included), the CLI reference is click's current --help, and every example in README.md and docs/
shows what the command prints now, on the seed index built with the packaged model (cog --check).

Needs the docs extra; in CI (CI=true) a missing one fails these tests instead of skipping them.
"""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "run `cog -r README.md docs/*.md` (CONTRIBUTING.md) and commit the result"


def require(*modules):
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            message = f"{module} is not installed: pip install -e '.[docs]' runs the documentation tests"
            if os.environ.get("CI") == "true":
                pytest.fail(f"{message} (CI is set, so it must be there)", pytrace=False)
            pytest.skip(message)


def cog_check(*files, env=None):
    require("cogapp")
    command = [sys.executable, "-m", "cogapp", "--check", "--check-fail-msg", REGENERATE, *files]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)


def test_the_site_builds_without_a_warning(tmp_path):
    require("sphinx", "myst_parser", "furo")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), "docs", str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "html" / "cli-reference.html").exists()


def test_the_cli_reference_is_the_current_help():
    done = cog_check("docs/cli-reference.md")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_page_with_examples_is_checked():
    """The test below checks README.md and docs/*.md: no page with cog blocks is left out of it."""
    with_cog = sorted(str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]
                      if "[[[cog" in p.read_text(encoding="utf-8"))
    checked = sorted(["README.md", *(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md"))])
    assert set(with_cog) <= set(checked)


@pytest.mark.model
def test_every_example_shows_what_the_command_prints(tmp_path):
    env = dict(os.environ, PAPERS_DOCS_WORK=str(tmp_path))
    done = cog_check("README.md", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md")), env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and MyST's heading anchors) give a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_links_from_the_front_pages_reach_a_file_and_heading(page):
    """README.md and CONTRIBUTING.md are read on GitHub, outside the Sphinx build: their relative
    links must name a file of the repository and, after `#`, one of its headings."""
    text = (ROOT / page).read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / page
        assert target.exists(), f"{page}: link to {path}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), flags=re.M)
            assert anchor in {github_anchor(h) for h in headings}, f"{page}: no heading #{anchor} in {path}"


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "scripts").glob("*.py")))
def test_every_script_says_what_it_measures_and_where_it_is_quoted(script):
    import ast

    docstring = ast.get_docstring(ast.parse((ROOT / "scripts" / script).read_text(encoding="utf-8")))
    assert docstring, f"scripts/{script} has no docstring"
    quoted = re.search(r"^Quoted in: (.+)$", docstring, flags=re.M | re.S)
    assert quoted, f"scripts/{script}: its docstring does not say which page quotes it (`Quoted in: ...`)"
    for page in re.findall(r"\b((?:docs/)?[\w-]+\.md)\b", quoted.group(1)):
        assert (ROOT / page).exists(), f"scripts/{script} names {page}, which does not exist"
