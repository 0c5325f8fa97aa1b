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


# How the product came to be (issue numbers, review rounds, who built what) belongs in git history,
# not in the pages users read.
HISTORY = re.compile(
    r"\bissues? (?:#?\d+|\w+'s)|\b(?:the|this|that) issue(?:'s)?\b|\bround (?:\d+|one|two|three|four|five)\b"
    r"|\bengineers'|#\d{2,}\b",
    flags=re.IGNORECASE)


def history_lines(text: str) -> list[str]:
    return [f"{number}: {line.strip()}" for number, line in enumerate(text.splitlines(), 1)
            if HISTORY.search(line)]


@pytest.mark.parametrize("page", ["README.md", *sorted(p.name for p in (ROOT / "docs").glob("*.md"))])
def test_pages_speak_of_the_product_not_its_history(page):
    path = ROOT / page if page == "README.md" else ROOT / "docs" / page
    found = history_lines(path.read_text(encoding="utf-8"))
    assert not found, f"{page} speaks of how papers was made (issues, rounds): " + " | ".join(found)


@pytest.mark.parametrize("line", ["Issue 13's thirteen cases", "### Round three (issue 22): files",
                                  "shared with other engineers' jobs", "the issue's 5.3 GB", "see #35"])
def test_the_history_check_catches_each_kind(line):
    assert history_lines(line)


def test_one_page_a_subject_each_page_its_own_title():
    titles: dict[str, list[str]] = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        first = re.search(r"^# (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
        if first:  # a page made of an include (contributing.md) takes its file's title
            titles.setdefault(first.group(1).strip(), []).append(page.name)
    shared = {title: pages for title, pages in titles.items() if len(pages) > 1}
    assert not shared, f"pages share a title (merge them or retitle one): {shared}"


def modules_named_in_the_architecture_page() -> set[str]:
    """The modules the tree of docs/architecture.md names: `folder/  a.py (...), b.py` names folder/a.py
    and folder/b.py (continuation lines, further indented, belong to the folder above)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = re.search(r"^```\nrecommender/\n(.*?)^```", text, flags=re.M | re.S)
    assert tree, "docs/architecture.md has no tree of recommender/"
    named, folder = set(), ""
    for line in tree.group(1).splitlines():
        if line.startswith("  ") and not line.startswith("   "):  # a folder's or a top-level file's line
            first = line.split()[0]
            folder = first if first.endswith("/") else ""
        elif not line.startswith(" "):
            break  # scripts/ and the like: outside the package
        named |= {folder + name for name in re.findall(r"\b(\w+\.py)\b", line)}
    return named


def test_the_architecture_page_names_every_module():
    modules = {str(path.relative_to(ROOT / "recommender")) for path in (ROOT / "recommender").rglob("*.py")
               if path.name != "__init__.py" or path.parent.name == "recommender"}
    named = modules_named_in_the_architecture_page()
    assert not modules - named, f"docs/architecture.md does not name {sorted(modules - named)}"
    assert not named - modules, f"docs/architecture.md names modules that do not exist: {sorted(named - modules)}"
