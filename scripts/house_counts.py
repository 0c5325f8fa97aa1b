"""The house's counts: long functions, functions with many parameters, the largest docs pages,
and the choices `papers build --precision` offers.

    python scripts/house_counts.py [--json]

A function's length is its lines of code: the lines from `def` to its last statement, less its
docstring, blank lines and comment-only lines (a nested function counts inside its parent and
on its own). Its parameters are every name it takes (`self` and `cls` not counted, `*args` and
`**kwargs` counted once each). The limits are CONTRIBUTING's: 60 lines of code and 8
parameters; docs/architecture.md names the functions allowed past them ("Allowed past the
limits"). The largest page leaves out the generated CLI reference.

Quoted in: CONTRIBUTING.md ("The house's counts").
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "recommender"
MAX_CODE_LINES = 60
MAX_PARAMETERS = 8
MAX_PAGE_BYTES = 25_000
GENERATED_PAGES = {"cli-reference.md"}


def code_lines(source: str) -> set[int]:
    """Line numbers holding code: not blank, not only a comment."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines


def docstring_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return set()


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    names = [n for n in names if n not in ("self", "cls")]
    return len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)


def functions(root: Path = PACKAGE):
    """(module, qualified name, lines of code, parameters) for every function of the package."""
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        yield from visit(ast.parse(source), "", str(path.relative_to(REPO)), code_lines(source))


def visit(node: ast.AST, prefix: str, module: str, code: set[int]):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = set(range(child.lineno, (child.end_lineno or child.lineno) + 1))
            length = len((span & code) - docstring_lines(child))
            name = f"{prefix}{child.name}"
            yield module, name, length, parameter_count(child)
            yield from visit(child, f"{name}.", module, code)
        elif isinstance(child, ast.ClassDef):
            yield from visit(child, f"{prefix}{child.name}.", module, code)


def allowed_past_limits() -> set[str]:
    """`module: function` names docs/architecture.md allows past the limits, with a reason each."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    heading = "## Allowed past the limits"
    section = page.split(heading, 1)[1] if heading in page else ""
    section = section.split("\n## ", 1)[0]
    return set(re.findall(r"`([\w/.]+\.py: [\w.]+)`", section))


def docs_pages() -> list[tuple[str, int]]:
    pages = [(p.name, p.stat().st_size) for p in sorted((REPO / "docs").glob("*.md"))]
    return sorted(pages, key=lambda page: -page[1])


def precision_choices() -> list[str]:
    """The values `papers build --precision` accepts, read from the real command's help."""
    command = [sys.executable, "-m", "recommender", "build", "--help"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=True)
    flat = " ".join(done.stdout.split())
    found = re.search(r"--precision \[([^\]]+)\]", flat)
    return [choice.strip() for choice in found.group(1).split("|")] if found else []


def counts() -> dict:
    allowed = allowed_past_limits()
    rows = list(functions())
    long = [(f"{m}: {n}", lines) for m, n, lines, _ in rows if lines > MAX_CODE_LINES]
    many = [(f"{m}: {n}", params) for m, n, _, params in rows if params > MAX_PARAMETERS]
    pages = docs_pages()
    largest = next(page for page in pages if page[0] not in GENERATED_PAGES)
    return {
        "functions": len(rows),
        "over_60_lines": sorted(long, key=lambda row: -row[1]),
        "over_60_lines_not_allowed": [row for row in long if row[0] not in allowed],
        "over_8_parameters": sorted(many, key=lambda row: -row[1]),
        "over_8_parameters_not_allowed": [row for row in many if row[0] not in allowed],
        "largest_page": largest,
        "pages_over_25kb": [
            page for page in pages if page[1] > MAX_PAGE_BYTES and page[0] not in GENERATED_PAGES
        ],
        "docs_bytes": sum(size for _, size in pages),
        "precision_choices": precision_choices(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="Print the counts as JSON.")
    options = parser.parse_args()
    found = counts()
    if options.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"functions: {found['functions']}")
    for key, limit in (("over_60_lines", "lines of code"), ("over_8_parameters", "parameters")):
        rows, beyond = found[key], found[f"{key}_not_allowed"]
        named = len(rows) - len(beyond)
        print(f"{key.replace('_', ' ')}: {len(rows)} ({named} named in docs/architecture.md)")
        for name, value in rows:
            print(f"  {value:4d} {limit}  {name}{'' if (name, value) in beyond else '  (allowed)'}")
    name, size = found["largest_page"]
    print(f"largest docs page (the CLI reference aside): {name}, {size / 1000:.1f} KB")
    print(f"docs pages over 25 KB: {', '.join(n for n, _ in found['pages_over_25kb']) or 'none'}")
    print(f"all docs pages: {found['docs_bytes'] / 1000:.0f} KB")
    choices = found["precision_choices"]
    print(f"--precision choices: {len(choices)} ({', '.join(choices)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
