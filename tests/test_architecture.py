"""The package's shape, read from its source (ast; nothing of it is run).

Data flows one way through the layers below; a module may import from its own layer or lower ones,
never from a layer above. Imports inside functions count too (the CLI imports lazily). No import
cycles, and no `_private` name imported or used from another module. No module outside `embed/`
tests a model's name (it asks embed.models.model_facts), and no module is over MAX_LINES lines.
The library raises in its own words: no `--option` of the CLI in a message outside cli/ and serve/.
Each mechanism every command shares (writing a file, a user's output, reading the user's papers,
the index lock, the encoder, the ranking options, HTTP, failing in one line) is done in its one
home only (docs/architecture.md, "One home for each mechanism").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import recommender
from recommender.embed.models import MODELS

PACKAGE = Path(recommender.__file__).resolve().parent

# Lowest first. `__init__` and `__main__` modules are exempt: they only re-export and start the CLI.
LAYERS = [
    {"errors", "arrays", "digests", "files", "detached"},
    {"corpus"},
    {"embed"},
    {"index"},
    {"query"},
    {"reading", "evaluation"},
    {"render"},
    {"cli", "serve"},
]


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at `root`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def is_exempt(path: Path) -> bool:
    return path.name in ("__init__.py", "__main__.py")


def imports(name: str, path: Path, known: dict[str, Path]):
    """(imported module, imported name or None, line) for each import, resolved to the package's modules."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield (full, None, node.lineno) if full in known else (target, alias.name, node.lineno)


def private_attributes(path: Path, known: dict[str, Path], name: str):
    """`module._name` uses, where `module` is a package module bound by an import in this file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = {}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known and alias.asname:
                    bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            yield bound[node.value.id], node.attr, node.lineno


def layer(module: str) -> int | None:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else None
    for level, names in enumerate(LAYERS):
        if top in names:
            return level
    return None


def problems(root: Path) -> list[str]:
    """Every layering breach, import cycle and cross-module private name in the package at `root`."""
    known = modules(root)
    found, edges = [], {}
    for name, path in known.items():
        if is_exempt(path):
            continue
        own = layer(name)
        if own is None:
            found.append(f"{name}: in no layer; add its folder to LAYERS in tests/test_architecture.py")
            continue
        for target, imported, line in imports(name, path, known):
            if target not in known or target == name:
                continue
            if not is_exempt(known[target]):
                edges.setdefault(name, set()).add(target)
            other = layer(target)
            if other is not None and other > own:
                found.append(f"{name}:{line} imports {target}, a layer above it")
            if imported and imported.startswith("_") and not imported.startswith("__"):
                found.append(f"{name}:{line} imports the private name {target}.{imported}")
        for target, attribute, line in private_attributes(path, known, name):
            if target != name:
                found.append(f"{name}:{line} uses the private name {target}.{attribute}")
    found.extend(private_inherited(known))
    found.extend(f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(edges))
    return found


def _classes(name: str, path: Path, known: dict[str, Path]):
    """(class name -> (its bases as (module, class), the names it defines, its `self._x` reads))
    for the module's top-level classes; a base is resolved through the module's imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    bound = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            for alias in node.names:
                if target in known:
                    bound[alias.asname or alias.name] = (target, alias.name)
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = []
        for base in node.bases:
            if isinstance(base, ast.Name):
                bases.append(bound.get(base.id, (name, base.id)))
        defined, read = set(), {}
        for child in ast.walk(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(child.name)
            elif (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name)
                  and child.value.id == "self"):
                if isinstance(child.ctx, ast.Store):
                    defined.add(child.attr)
                else:
                    read.setdefault(child.attr, child.lineno)
            elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
                defined.add(child.target.id)
        found[node.name] = (bases, defined, read)
    return found


def private_inherited(known: dict[str, Path]) -> list[str]:
    """Each `_private` name a class overrides, or reads on self, that only a base class in another
    module defines: a hook between modules has a public, documented name."""
    classes = {(name, cls): facts for name, path in known.items()
               for cls, facts in _classes(name, path, known).items()}
    found = []
    for (name, cls), (bases, defined, read) in sorted(classes.items()):
        ancestors, todo = [], list(bases)
        while todo:
            base = todo.pop()
            if base in classes and base not in ancestors:
                ancestors.append(base)
                todo.extend(classes[base][0])
        own = set(defined).union(*(classes[a][1] for a in ancestors if a[0] == name))
        for module, base in ancestors:
            if module == name:
                continue
            for attribute in sorted(classes[module, base][1]):
                if not attribute.startswith("_") or attribute.startswith("__"):
                    continue
                if attribute in defined:
                    found.append(f"{name}.{cls} overrides the private name {module}.{base}.{attribute}")
                elif attribute in read and attribute not in own:
                    found.append(f"{name}.{cls}:{read[attribute]} uses the private name"
                                 f" {module}.{base}.{attribute}")
    return sorted(set(found))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), as a closed path."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    found = []
    for group in groups:
        members = set(group)
        path = [group[0]]
        while True:  # walk inside the group until a module repeats
            nxt = min(n for n in edges[path[-1]] if n in members)
            if nxt in path:
                found.append(path[path.index(nxt):] + [nxt])
                break
            path.append(nxt)
    return found


def test_the_package_imports_only_downwards_with_no_cycle_and_no_private_names():
    assert problems(PACKAGE) == []


def test_every_folder_of_the_package_is_in_a_layer():
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    modules_ = {path.stem for path in PACKAGE.glob("*.py") if not is_exempt(path)}
    assert folders | modules_ <= set().union(*LAYERS)


# ---------------------------------------------------------------- the checker itself finds each breach


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


@pytest.mark.parametrize("files, expected", [
    ({"errors.py": "", "corpus/__init__.py": "", "corpus/papers.py": "from ..errors import InputError\n"}, []),
    ({"corpus/__init__.py": "", "corpus/papers.py": "def f():\n    from ..query import ranking\n",
      "query/__init__.py": "", "query/ranking.py": ""},
     ["pkg.corpus.papers:2 imports pkg.query.ranking, a layer above it"]),
    ({"query/__init__.py": "", "query/a.py": "from . import b\n", "query/b.py": "from .a import x\n"},
     ["import cycle: pkg.query.a -> pkg.query.b -> pkg.query.a"]),
    ({"corpus/__init__.py": "", "corpus/text.py": "def _clean(x):\n    return x\n",
      "corpus/handles.py": "from .text import _clean\n"},
     ["pkg.corpus.handles:1 imports the private name pkg.corpus.text._clean"]),
    ({"index/__init__.py": "", "index/store.py": "_SECRET = 1\n",
      "query/__init__.py": "", "query/ranking.py": "from ..index import store\nx = store._SECRET\n"},
     ["pkg.query.ranking:2 uses the private name pkg.index.store._SECRET"]),
    ({"gadgets/__init__.py": "", "gadgets/tool.py": ""},
     ["pkg.gadgets.tool: in no layer; add its folder to LAYERS in tests/test_architecture.py"]),
    ({"query/__init__.py": "", "query/a.py": "class A:\n    def _hook(self):\n        pass\n",
      "query/b.py": "from .a import A\nclass B(A):\n    def _hook(self):\n        pass\n"},
     ["pkg.query.b.B overrides the private name pkg.query.a.A._hook"]),
    ({"query/__init__.py": "", "query/a.py": "class A:\n    def __init__(self):\n        self._x = 1\n",
      "query/b.py": "from . import a\nfrom .a import A\nclass B(A):\n    def f(self):\n        return self._x\n",
      "query/c.py": "from .a import A\nclass C(A):\n    def f(self):\n        self._y = 2\n        return self._y\n"},
     ["pkg.query.b.B:5 uses the private name pkg.query.a.A._x"]),
], ids=["clean", "upward import", "cycle", "private import", "private attribute", "no layer",
        "private override", "private inherited"])
def test_the_checker_finds_each_kind_of_breach(tmp_path, files, expected):
    assert problems(write_package(tmp_path, files)) == expected


# ---------------------------------------------------------------- model names and module sizes

#: Every name a known model goes by, and every kind of export a build writes for queries (a
#: manifest's query_encoder: "onnx", "static"): what an encoder can do is a fact embed/ answers
#: (models.export_required), never a comparison with a model's name or its export's.
MODEL_NAMES = {name for facts in MODELS for name in (facts.name, *facts.aliases)}
EXPORT_KINDS = {facts.export for facts in MODELS}
MODEL_CONSTANTS = {"STATIC_MODEL", "DEFAULT_MODEL"}
MAX_LINES = 800


def _is_model_constant(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in MODEL_CONSTANTS
    if isinstance(node, ast.Attribute):
        return node.attr in MODEL_CONSTANTS
    if isinstance(node, ast.Constant):
        return node.value in MODEL_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_model_constant(element) for element in node.elts)
    return False


def _is_export_kind(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in EXPORT_KINDS


def model_name_tests(root: Path) -> list[str]:
    """Each place outside `embed/` that compares something with a model's name or an export's
    kind, or keys a table by a model's name."""
    found = []
    for name, path in modules(root).items():
        if is_exempt(path) or name.split(".")[1:2] == ["embed"]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                named = [operand for operand in operands
                         if _is_model_constant(operand) or _is_export_kind(operand)]
                if named:
                    found.append(f"{name}:{node.lineno} tests a model's name: {ast.unparse(node)}")
            elif isinstance(node, ast.Dict):
                keys = [key.value for key in node.keys if isinstance(key, ast.Constant)]
                if any(key in MODEL_NAMES - EXPORT_KINDS for key in keys):
                    listed = sorted(map(str, keys))
                    found.append(f"{name}:{node.lineno} keys a table by model names: {listed}")
    return found


def oversized(root: Path) -> list[str]:
    found = []
    for name, path in modules(root).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{name}: {lines} lines, over {MAX_LINES}: split it by subject")
    return found


def test_no_module_outside_embed_tests_a_model_s_name():
    assert model_name_tests(PACKAGE) == []


def test_no_module_is_over_the_size_limit():
    assert oversized(PACKAGE) == []


@pytest.mark.parametrize("files, expected", [
    ({"query/__init__.py": "", "query/a.py": "def f(model):\n    return model == 'static'\n"},
     ["pkg.query.a:2 tests a model's name: model == 'static'"]),
    ({"index/__init__.py": "",
      "index/a.py": "def f(m, STATIC_MODEL):\n    return m != STATIC_MODEL\n"},
     ["pkg.index.a:2 tests a model's name: m != STATIC_MODEL"]),
    ({"query/__init__.py": "", "query/a.py": "W = {'all-mpnet-base-v2': 0.8}\n"},
     ["pkg.query.a:1 keys a table by model names: ['all-mpnet-base-v2']"]),
    ({"query/__init__.py": "",
      "query/a.py": "def f(m):\n    return m['query_encoder'] == 'static'\n",
      "embed/__init__.py": "",
      "embed/models.py": "def f(model):\n    return model == 'static'\n"},
     ["pkg.query.a:2 tests a model's name: m['query_encoder'] == 'static'"]),
    ({"embed/__init__.py": "",
      "embed/models.py": "def f(model, kind):\n    return model == 'static' or kind != 'onnx'\n"}, []),
], ids=["literal", "constant", "table", "export kind", "embed"])
def test_the_checker_finds_model_name_tests(tmp_path, files, expected):
    assert model_name_tests(write_package(tmp_path, files)) == expected


def test_the_checker_finds_an_oversized_module(tmp_path):
    package = write_package(tmp_path, {"corpus/__init__.py": "", "corpus/big.py": "x = 1\n" * 801,
                                       "corpus/small.py": "x = 1\n" * 800})
    assert oversized(package) == ["pkg.corpus.big: 801 lines, over 800: split it by subject"]


CLI_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
QUOTED_COMMAND = re.compile(r"`[^`]*`")  # a command to run, quoted whole (`papers build --index x`)
COMMAND_BUILDERS = ("shell_command", "install_command")


TELLING = ("warn", "notice")  # warnings.warn and the notice callbacks the library is given


def _called_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def _raised_text(node: ast.AST) -> list[str]:
    """The literal text of the strings in a raise, a formatted value as {} and the words of a
    command built by shell_command left out."""
    if isinstance(node, ast.Call):
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if called in COMMAND_BUILDERS:
            return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        joined = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
        return [joined] + [text for part in node.values if isinstance(part, ast.FormattedValue)
                           for text in _raised_text(part.value)]
    return [text for child in ast.iter_child_nodes(node) for text in _raised_text(child)]


def cli_words_in_library_errors(root: Path) -> list[str]:
    """Each raise, warning or notice outside cli/ and serve/ whose message names a CLI option
    (`--limit`): the library names its parameter (OptionError's `parameter`), and the CLI and API
    their own."""
    found = []
    for name, path in modules(root).items():
        if name.split(".")[1:2] in (["cli"], ["serve"]):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                told, verb = node.exc, "raises"
            elif isinstance(node, ast.Call) and _called_name(node) in TELLING:
                told, verb = node, "tells"  # a warning or a notice reaches the user as an error does
            else:
                continue
            for text in _raised_text(told):
                options = CLI_OPTION.findall(QUOTED_COMMAND.sub("", text))
                if options:
                    found.append(f"{name}:{node.lineno} {verb} with CLI words {options}: {text[:80]}")
    return found


def test_library_errors_name_no_cli_option():
    assert cli_words_in_library_errors(PACKAGE) == []


@pytest.mark.parametrize("files, expected", [
    ({"query/__init__.py": "",
      "query/a.py": "def f(k):\n    raise ValueError(f'--limit must be at least 1, got {k}')\n"},
     ["pkg.query.a:2 raises with CLI words ['--limit']: --limit must be at least 1, got {}"]),
    ({"index/__init__.py": "",
      "index/a.py": "def f(i):\n    raise OSError('cannot write ' + str(i) + ': choose another --index')\n"},
     ["pkg.index.a:2 raises with CLI words ['--index']: : choose another --index"]),
    ({"index/__init__.py": "",
      "index/a.py": "def f(i):\n    raise OSError(f'run `papers build --index {i}`, or '\n"
                    "                  f'{shell_command(\"papers\", \"--index\", i)}')\n"},
     []),
    ({"cli.py": "def f():\n    raise ValueError('--limit must be at least 1')\n",
      "serve/__init__.py": "", "serve/a.py": "def f():\n    raise ValueError('--port must be 0..65535')\n"},
     []),
    ({"corpus/__init__.py": "",
      "corpus/a.py": "import warnings\ndef f(notice):\n    warnings.warn('left out: keep them with --keep')\n"
                     "    notice(f'kept: --model {1} would encode again')\n"},
     ["pkg.corpus.a:3 tells with CLI words ['--keep']: left out: keep them with --keep",
      "pkg.corpus.a:4 tells with CLI words ['--model']: kept: --model {} would encode again"]),
], ids=["f-string", "concatenated", "quoted command", "cli and serve", "warning and notice"])
def test_the_checker_finds_cli_words_in_library_errors(tmp_path, files, expected):
    assert cli_words_in_library_errors(write_package(tmp_path, files)) == expected


PDF_LIBRARIES = ("pypdfium2", "pypdf", "pdfminer", "fitz", "pymupdf")


def pdf_readers(root: Path) -> list[str]:
    """Modules other than corpus/fulltext.py that import a PDF library: every PDF is read there, with
    its bounds on pages, time and size, and its one line for a PDF that cannot be read."""
    found = []
    for name, path in modules(root).items():
        if name == f"{root.name}.corpus.fulltext":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{name}:{node.lineno} imports {imported}" for imported in names
                      if imported.split(".")[0] in PDF_LIBRARIES]
    return found


def test_pdfs_are_read_only_where_they_are_bounded():
    assert pdf_readers(PACKAGE) == []


def test_the_checker_finds_a_pdf_read_elsewhere(tmp_path):
    package = write_package(tmp_path, {"corpus/__init__.py": "", "corpus/fulltext.py": "import pypdfium2\n",
                                       "corpus/other.py": "def f():\n    from pypdf import PdfReader\n"})
    assert pdf_readers(package) == ["pkg.corpus.other:2 imports pypdf"]


def test_no_test_module_imports_another():
    """Shared fixtures live in conftest.py and helpers in helper modules (corpus.py, fakes.py, ...):
    a test module importing another runs that module's fixtures and tests twice over, and breaks when
    it is renamed."""
    import ast
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    found = []
    for path in sorted(tests.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0].startswith("test_")]
    assert not found, f"test modules import other test modules: {found}"


# Renames onto a path: the one output mechanism is files.py (`replacing`, `output`: a FIFO, a device
# or /proc/self/fd link is written into, never replaced). Modules that rename their own files into
# place are listed, each with why it owns what it renames.
RENAMING_OWNERS = {
    "files": "the output mechanism itself",
    "embed.model_parts": "its own part installs in the model cache folder",
    "embed.quantisation": "its own quantised model files in the model cache folder",
    "embed.onnx_encoder": "its own exported ONNX files in the model cache folder",
    "embed.static_encoder": "its own static tables in the model cache folder",
    "embed.user_cache": "its own cache folders, set aside before removal",
    "embed.export_cache": "its own export entries in the cache folder",
    "index.writer": "its own index version folders",
    "index.catalogue": "its own index folders (mv, set aside)",
    "index.segments": "its own index version folders",
}
RENAMING_CALLS = {("os", "rename"), ("os", "replace"), ("os", "renames"), ("shutil", "move")}


def renames_onto_paths(root: Path, owners: dict[str, str]) -> list[str]:
    """Each os.rename/os.replace/shutil.move call (also imported by name) and each one-argument
    `.rename(x)`/`.replace(x)` (Path's; str.replace takes two) outside the modules of `owners`."""
    found = []
    for name, path in modules(root).items():
        if name.split(".", 1)[-1] in owners:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.asname or alias.name for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil")
                    for alias in node.names if (node.module, alias.name) in RENAMING_CALLS}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in imported:
                found.append(f"{name}:{node.lineno} {func.id}")
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else ""
                if (owner, func.attr) in RENAMING_CALLS:
                    found.append(f"{name}:{node.lineno} {owner}.{func.attr}")
                elif func.attr in ("rename", "replace") and len(node.args) == 1 and not node.keywords:
                    found.append(f"{name}:{node.lineno} .{func.attr}")
    return found


def test_only_the_output_module_renames_onto_a_path():
    assert renames_onto_paths(PACKAGE, RENAMING_OWNERS) == []


@pytest.mark.parametrize("files, expected", [
    ({"corpus/__init__.py": "",
      "corpus/fetch.py": "import os\ndef f(partial, out):\n    os.replace(partial, out)\n"},
     ["pkg.corpus.fetch:3 os.replace"]),
    ({"cli/__init__.py": "",
      "cli/a.py": "from shutil import move as m\nfrom pathlib import Path\n"
                  "def f(p, out):\n    Path(p).rename(out)\n    m(p, out)\n    return 'a'.replace('a', 'b')\n"},
     ["pkg.cli.a:4 .rename", "pkg.cli.a:5 m"]),
    ({"files.py": "import os\ndef f(a, b):\n    os.replace(a, b)\n"}, []),
], ids=["a second output mechanism", "Path.rename and an imported move", "the output module"])
def test_the_checker_finds_a_second_output_mechanism(tmp_path, files, expected):
    assert renames_onto_paths(write_package(tmp_path, files), RENAMING_OWNERS) == expected


# ---------------------------------------------------------------- one home for each mechanism
#
# Each mechanism every command shares has one home (docs/architecture.md, "One home for each
# mechanism"). A detector below finds, in a module's source, the signs of a module doing that job
# its own way; `home_breaches` reports each one outside the home and the allowed places, each
# allowed place (module, what it does) with the reason it owns what it does.


def bindings(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted name of what an import binds (`np` -> numpy, `replace` -> os.replace,
    `files` -> files for `from .. import files`: relative imports lose their dots)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name] = ".".join(filter(None, (node.module,
                                                                          alias.name)))
    return bound


def dotted(node: ast.AST, bound: dict[str, str]) -> str:
    """`os.path.join` for a call's function, its first name resolved through the imports ("" for a
    call on anything but names and attributes, `.write_text` for a method of a value)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(bound.get(node.id, node.id))
    else:
        parts.append("")
    return ".".join(reversed(parts))


def calls(tree: ast.AST):
    """(call node, its dotted name) for every call in `tree`."""
    bound = bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, dotted(node.func, bound)


def imported_modules(tree: ast.AST):
    """(line, module) for each absolute import, `from x import y` giving x.y too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def home_breaches(root: Path, detect, home: set[str],
                  allowed: dict[tuple[str, str], str]) -> list[str]:
    """`module:line what` for each (line, kind, what) `detect` finds in a module of the package at
    `root` outside `home` (module names below the package; a folder's name covers its modules)
    and not allowed as (module, kind)."""
    found = []
    for name, path in modules(root).items():
        short = name.split(".", 1)[1] if "." in name else ""
        if any(short == owner or short.startswith(owner + ".") for owner in home):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{name}:{line} {what}" for line, kind, what in sorted(set(detect(tree)))
                  if (short, kind) not in allowed]
    return found


def _argument(node: ast.Call, position: int, keyword: str):
    if len(node.args) > position:
        return node.args[position]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


WRITING_MODE = re.compile(r"[wax+]")
WRITING_FLAGS = {"O_CREAT", "O_WRONLY", "O_RDWR", "O_APPEND", "O_TRUNC"}
COPIES = {"shutil.copyfile", "shutil.copy", "shutil.copy2", "shutil.copytree"}


def _flags(node: ast.AST, assigned: dict[str, list[ast.AST]], depth: int = 0) -> set[str]:
    """The os.O_* names in a flags expression, a name followed to what the module assigns it."""
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute) and child.attr.startswith("O_"):
            found.add(child.attr)
        elif isinstance(child, ast.Name) and child.id.startswith("O_"):
            found.add(child.id)
        elif isinstance(child, ast.Name) and depth < 3:
            for value in assigned.get(child.id, ()):
                found |= _flags(value, assigned, depth + 1)
    return found


def file_writes(tree: ast.AST):
    """Files written other than through files.py: open() for writing (or with a mode not written
    out), Path.open/write_text/write_bytes, os.open creating or writing, shutil's copies."""
    assigned: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    for node, name in calls(tree):
        if name in ("open", "io.open") or (name.startswith(".") and name.endswith(".open")):
            mode = _argument(node, 1 if name in ("open", "io.open") else 0, "mode")
            constant = isinstance(mode, ast.Constant)
            if mode is None or (constant and not WRITING_MODE.search(str(mode.value))):
                continue
            if name.startswith(".") and not isinstance(mode, ast.Constant):
                continue  # zipfile's open(member), a reader's open(path)
            yield node.lineno, "open", f"opens for writing: {ast.unparse(node)}"
        elif name.endswith((".write_text", ".write_bytes")) and name.split(".")[0] != "files":
            yield node.lineno, name.rsplit(".", 1)[1], f"writes a file: {ast.unparse(node.func)}"
        elif (name == "os.open"
              and _flags(_argument(node, 1, "flags") or ast.Constant(0), assigned) & WRITING_FLAGS):
            yield node.lineno, "os.open", f"opens for writing: {ast.unparse(node)}"
        elif name in COPIES:
            yield node.lineno, name, f"copies onto a path: {name}"


WRITING_ALLOWED = {
    ("cli.errors", "os.open"): "standard output pointed at /dev/null once its reader has gone",
    ("corpus.fetch.pages", "os.open"): "appends a page's records to its own file, made by"
                                       " files.write_text, never created here nor through a link",
    ("embed.export_cache", "shutil.copyfile"): "a model file copied into its own staging folder,"
                                               " where a hard link is not allowed",
    ("embed.quantisation", "shutil.copyfile"): "the tokenizer copied into its own temporary folder",
}


@pytest.mark.parametrize("files, expected", [
    ({"index/__init__.py": "",
      "index/a.py": "import os\nfrom pathlib import Path\nFLAGS = os.O_WRONLY | os.O_CREAT\n"
                    "def f(p, mode):\n    open(p, 'w').close()\n    Path(p).write_text('x')\n"
                    "    os.close(os.open(p, FLAGS))\n    open(p, mode)\n    Path(p).open('ab')\n"},
     ["pkg.index.a:5 opens for writing: open(p, 'w')",
      "pkg.index.a:6 writes a file: Path(p).write_text",
      "pkg.index.a:7 opens for writing: os.open(p, FLAGS)",
      "pkg.index.a:8 opens for writing: open(p, mode)",
      "pkg.index.a:9 opens for writing: Path(p).open('ab')"]),
    ({"corpus/__init__.py": "",
      "corpus/a.py": "import os, shutil\nfrom .. import files\ndef f(p, q, z):\n"
                     "    open(p).read()\n"
                     "    open(p, 'rb').read()\n    os.open(p, os.O_RDONLY | os.O_NOFOLLOW)\n"
                     "    files.write_text(p, 'x')\n    z.open(q)\n    shutil.copyfile(p, q)\n"},
     ["pkg.corpus.a:9 copies onto a path: shutil.copyfile"]),
    ({"files.py": "import os\ndef f(p):\n    return open(p, 'x'), os.open(p, os.O_CREAT)\n"}, []),
], ids=["a second writer", "reads and the files module", "the files module"])
def test_the_checker_finds_a_second_way_to_write_a_file(tmp_path, files, expected):
    package = write_package(tmp_path, files)
    assert home_breaches(package, file_writes, {"files"}, WRITING_ALLOWED) == expected


def user_outputs(tree: ast.AST):
    """A user-given output opened other than by cli/common.py's output_file (files.output: a file
    replaced whole, a FIFO or device written into, never an index's own file): files.output or
    stream_target called, click's File or open_file for writing."""
    for node, name in calls(tree):
        if name in ("files.output", "files.stream_target"):
            yield node.lineno, name, f"opens a user's output itself: {name}"
        elif name in ("click.open_file", "click.File"):
            mode = _argument(node, 1 if name == "click.open_file" else 0, "mode")
            if isinstance(mode, ast.Constant) and WRITING_MODE.search(str(mode.value)):
                yield node.lineno, name, f"opens a user's output itself: {ast.unparse(node)}"


OUTPUT_ALLOWED = {
    ("render.map", "files.output"): "write_map of the Python API, given a path rather than a stream"
                                    " (the CLI hands it output_file's stream)",
}


def test_the_checker_finds_a_second_way_to_write_a_user_s_output(tmp_path):
    package = write_package(tmp_path, {
        "cli/__init__.py": "",
        "cli/fetch.py": "import click\nfrom ..files import output\n"
                        "@click.option('--out', type=click.File('wb'))\n"
                        "def f(out):\n    with output(out) as stream:\n        pass\n",
        "cli/common.py": "from ..files import output\ndef output_file(p):\n    return output(p)\n"})
    assert home_breaches(package, user_outputs, {"files", "cli.common"}, OUTPUT_ALLOWED) == [
        "pkg.cli.fetch:3 opens a user's output itself: click.File('wb')",
        "pkg.cli.fetch:5 opens a user's output itself: files.output"]


FORMAT_PARSERS = ("bibtexparser", "pybtex", "rispy", "csv.reader", "csv.DictReader", "csv.Sniffer")


def format_reads(tree: ast.AST):
    """A file format of the user's papers parsed other than by a reader of corpus/readers/."""
    for line, module in imported_modules(tree):
        if module.split(".")[0] in FORMAT_PARSERS:
            yield line, module.split(".")[0], f"parses a user's file itself: imports {module}"
    for node, name in calls(tree):
        if name in FORMAT_PARSERS:
            yield node.lineno, name, f"parses a user's file itself: {name}"


READING_ALLOWED = {
    ("evaluation.reviewers", "csv.reader"): "the reviewer-expertise evaluation set's ratings table,"
                                            " an evaluation's input rather than a user's papers",
}


def test_the_checker_finds_a_second_reader(tmp_path):
    package = write_package(tmp_path, {
        "corpus/__init__.py": "", "corpus/readers/__init__.py": "",
        "corpus/readers/tabular.py": "import csv\ndef f(t):\n    return csv.reader(t)\n",
        "serve/__init__.py": "",
        "serve/upload.py": "import csv\ndef f(t):\n    import bibtexparser\n"
                           "    return csv.DictReader(t)\n"})
    assert home_breaches(package, format_reads, {"corpus.readers"}, READING_ALLOWED) == [
        "pkg.serve.upload:3 parses a user's file itself: imports bibtexparser",
        "pkg.serve.upload:4 parses a user's file itself: csv.DictReader"]


def databases(tree: ast.AST):
    """An SQLite database opened (sqlite3.connect, apsw) other than by the module owning it, or
    opened in place as immutable (a journal or log another program keeps, not applied)."""
    for node, name in calls(tree):
        if name in ("sqlite3.connect", "apsw.Connection"):
            yield node.lineno, name, f"opens a database itself: {name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and "immutable=" in str(node.value):
            yield node.lineno, "immutable", "opens a database in place as immutable"


DATABASE_OWNERS = {
    "reading.tags",  # the tags of an index (tags.sqlite)
    "embed.embedding_cache",  # the embedding cache every index of the user shares
    "corpus.readers.snapshot",  # a committed copy of a database another program writes (Zotero's)
}


def test_the_checker_finds_a_database_opened_elsewhere(tmp_path):
    package = write_package(tmp_path, {
        "corpus/__init__.py": "", "corpus/readers/__init__.py": "",
        "corpus/readers/snapshot.py": "import sqlite3\ndef f(p):\n    return sqlite3.connect(p)\n",
        "corpus/readers/zotero.py": "from sqlite3 import connect\ndef f(p):\n"
                                    "    return connect(f'file:{p}?immutable=1', uri=True)\n"})
    assert home_breaches(package, databases, DATABASE_OWNERS, {}) == [
        "pkg.corpus.readers.zotero:3 opens a database in place as immutable",
        "pkg.corpus.readers.zotero:3 opens a database itself: sqlite3.connect"]


def file_locks(tree: ast.AST):
    """A file lock taken (fcntl, or a package doing it) other than by the index's lock modules."""
    for line, module in imported_modules(tree):
        if module.split(".")[0] in ("fcntl", "filelock", "portalocker"):
            yield line, "lock", f"takes a lock itself: imports {module}"
    for node, name in calls(tree):
        if name in ("fcntl.flock", "fcntl.lockf", "os.lockf"):
            yield node.lineno, "lock", f"takes a lock itself: {name}"


LOCK_OWNERS = {
    "index.writer",  # the build lock (`writing`, and `build_lock` for add, remove, rename)
    "index.stored",  # a reader's pin on the live version, and `unpinned` before a removal
    "index.segments",  # the compaction's own lock, beside the build lock
}


def test_the_checker_finds_a_second_lock(tmp_path):
    package = write_package(tmp_path, {
        "index/__init__.py": "",
        "index/writer.py": "import fcntl\ndef f(h):\n    fcntl.flock(h, fcntl.LOCK_EX)\n",
        "reading/__init__.py": "",
        "reading/tags.py": "import os\ndef f(h):\n    os.lockf(h, os.F_LOCK, 0)\n"})
    assert home_breaches(package, file_locks, LOCK_OWNERS, {}) == [
        "pkg.reading.tags:3 takes a lock itself: os.lockf"]


ENCODER_RUNTIMES = ("onnxruntime", "sentence_transformers", "transformers", "torch", "openvino",
                    "tokenizers", "optimum", "onnx")


# What makes an encoder: the runtimes' sessions and models, and embed/'s own encoder classes (made
# by embed/loading.py and embed/choice.py from what a build asks and an index records).
ENCODER_MAKERS = ("InferenceSession", "SentenceTransformer", "OnnxEncoder", "StaticEncoder",
                  "SentenceTransformerEncoder", "RayEncoder", "LazyEncoder")


def encoders(tree: ast.AST):
    """An encoder made or a model runtime imported outside embed/ (which chooses the encoder:
    embed/choice.py, embed/models.py)."""
    for line, module in imported_modules(tree):
        if module.split(".")[0] in ENCODER_RUNTIMES:
            yield line, "runtime", f"loads a model itself: imports {module}"
    for node, name in calls(tree):
        if name.rsplit(".", 1)[-1] in ENCODER_MAKERS:
            yield node.lineno, "runtime", f"loads a model itself: {name}"


def test_the_checker_finds_an_encoder_made_elsewhere(tmp_path):
    package = write_package(tmp_path, {
        "embed/__init__.py": "",
        "embed/onnx_encoder.py": "import onnxruntime as ort\nS = ort.InferenceSession('m')\n",
        "query/__init__.py": "",
        "query/search.py": "def f(ort):\n"
                           "    from sentence_transformers import SentenceTransformer\n"
                           "    return SentenceTransformer('m'), ort.InferenceSession('m.onnx')\n"
                           "def g(folder):\n    from ..embed.onnx_encoder import OnnxEncoder\n"
                           "    return OnnxEncoder(folder)\n"})
    assert home_breaches(package, encoders, {"embed"}, {}) == [
        "pkg.query.search:2 loads a model itself: imports sentence_transformers",
        "pkg.query.search:2 loads a model itself: imports"
        " sentence_transformers.SentenceTransformer",
        "pkg.query.search:3 loads a model itself: ort.InferenceSession",
        "pkg.query.search:3 loads a model itself: sentence_transformers.SentenceTransformer",
        "pkg.query.search:6 loads a model itself: embed.onnx_encoder.OnnxEncoder"]


RANKING_FUNCTIONS = ("fuse", "mmr", "select", "order_by_score", "check_options", "seed_weights",
                     "combine_dense", "dense_weight_for")


def ranking_options(tree: ast.AST):
    """The ranking modes listed (two of them or more in one literal), or a function of
    query/ranking.py (score fusion, MMR, the options' checks) defined again, outside it."""
    from recommender.query.ranking import MODES

    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            listed = [e.value for e in node.elts
                      if isinstance(e, ast.Constant) and e.value in MODES]
            if len(set(listed)) >= 2:
                yield node.lineno, "modes", f"lists the ranking modes itself: {ast.unparse(node)}"
        elif (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              and node.name in RANKING_FUNCTIONS):
            yield node.lineno, "function", f"ranks itself: defines {node.name}"


RANKING_ALLOWED = {
    ("cli.common", "modes"): "the --mode choices, kept off numpy at start (checked equal to MODES"
                             " by test_the_modes_offered_are_the_ranking_s)",
    ("serve.api", "modes"): "FastAPI reads the mode's choices from a Literal type (checked equal)",
}


def test_the_modes_offered_are_the_ranking_s():
    from typing import get_args

    from recommender.cli.lookups import like
    from recommender.query.ranking import MODES
    from recommender.serve.api import Mode

    choices = next(param.type.choices for param in like.params if param.name == "mode")
    assert sorted(choices) == sorted(get_args(Mode)) == sorted(MODES)


def test_the_checker_finds_a_second_ranking(tmp_path):
    package = write_package(tmp_path, {
        "query/__init__.py": "",
        "query/ranking.py": "MODES = ('dense', 'lexical', 'hybrid')\ndef mmr():\n    pass\n",
        "reading/__init__.py": "",
        "reading/feed.py": "def f(mode='hybrid'):\n    if mode not in ['hybrid', 'dense']:\n"
                           "        raise ValueError\n"
                           "def mmr(scores, lam):\n    return scores\n"})
    assert home_breaches(package, ranking_options, {"query.ranking"}, RANKING_ALLOWED) == [
        "pkg.reading.feed:2 lists the ranking modes itself: ['hybrid', 'dense']",
        "pkg.reading.feed:4 ranks itself: defines mmr"]


HTTP_CLIENTS = ("urllib.request", "http.client", "requests", "httpx", "urllib3", "aiohttp",
                "urllib.request.urlopen", "urllib.request.Request")


def http_requests(tree: ast.AST):
    """A request to a service made other than through corpus/fetch/http.py (its User-Agent, delay,
    retries and bounds on every wait)."""
    for line, module in imported_modules(tree):
        if module in HTTP_CLIENTS or module.split(".")[0] in HTTP_CLIENTS:
            yield line, "http", f"speaks HTTP itself: imports {module}"
    for node, name in calls(tree):
        if name in ("urllib.request.urlopen", "http.client.HTTPConnection",
                    "http.client.HTTPSConnection"):
            yield node.lineno, "http", f"speaks HTTP itself: {name}"


def test_the_checker_finds_a_second_http_client(tmp_path):
    package = write_package(tmp_path, {
        "corpus/__init__.py": "", "corpus/fetch/__init__.py": "",
        "corpus/fetch/http.py": "import urllib.request\n",
        "corpus/fetch/semantic.py": "from . import http\nfrom urllib import request\n"
                                    "import urllib.parse\n"
                                    "def f(u):\n    return request.urlopen(u)\n"})
    assert home_breaches(package, http_requests, {"corpus.fetch.http"}, {}) == [
        "pkg.corpus.fetch.semantic:2 speaks HTTP itself: imports urllib.request",
        "pkg.corpus.fetch.semantic:5 speaks HTTP itself: urllib.request.urlopen"]


def process_exits(tree: ast.AST):
    """The process ended or a traceback printed other than by cli/errors.py (every failure one
    line, its exit status)."""
    for node, name in calls(tree):
        if name in ("sys.exit", "os._exit", "os.abort", "exit", "quit") or name.startswith(
                "traceback."):
            yield node.lineno, name, f"ends the process or prints a traceback itself: {name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "SystemExit":
                yield node.lineno, "SystemExit", "ends the process itself: raise SystemExit"


EXIT_ALLOWED = {
    ("serve.app", "os._exit"): "the server's process ends at once after its last words, its"
                               " threads (uvicorn's, a job's) left to the system",
    ("serve.server", "SystemExit"): "SIGTERM becomes SystemExit, so uvicorn shuts down cleanly",
}


def test_the_checker_finds_a_second_way_to_fail(tmp_path):
    package = write_package(tmp_path, {
        "cli/__init__.py": "", "cli/errors.py": "import sys\ndef f():\n    sys.exit(1)\n",
        "index/__init__.py": "",
        "index/build.py": "import sys, traceback\ndef f():\n    traceback.print_exc()\n"
                          "    sys.exit(2)\n"
                          "    raise SystemExit(1)\n"})
    assert home_breaches(package, process_exits, {"cli.errors"}, EXIT_ALLOWED) == [
        "pkg.index.build:3 ends the process or prints a traceback itself: traceback.print_exc",
        "pkg.index.build:4 ends the process or prints a traceback itself: sys.exit",
        "pkg.index.build:5 ends the process itself: raise SystemExit"]


def warning_places(tree: ast.AST):
    """A warning whose place is a fixed count of frames up: right from one caller, a line of the
    package's own from another (a build's stages, a generator); errors.caller_stacklevel names the
    first line outside the package, whoever called."""
    for node, name in calls(tree):
        if name in ("warnings.warn", "warnings.warn_explicit"):
            level = next((k.value for k in node.keywords if k.arg == "stacklevel"), None)
            if not (isinstance(level, ast.Call) and isinstance(level.func, ast.Name)
                    and level.func.id == "caller_stacklevel"):
                yield node.lineno, "warning", "warns with a place of its own, not caller_stacklevel()"


def test_the_checker_finds_a_warning_placed_by_a_count(tmp_path):
    package = write_package(tmp_path, {
        "stages.py": "import warnings\nfrom .errors import caller_stacklevel\n"
                     "def f():\n    warnings.warn('a', stacklevel=2)\n"
                     "    warnings.warn('b')\n"
                     "    warnings.warn('c', stacklevel=caller_stacklevel())\n"})
    assert home_breaches(package, *HOMES["a warning names the caller's line"]) == [
        "pkg.stages:4 warns with a place of its own, not caller_stacklevel()",
        "pkg.stages:5 warns with a place of its own, not caller_stacklevel()"]


# Each mechanism's check: what finds it, the modules it lives in, and where else it may be (with
# the reason), under the sentence it checks.
HOMES = {
    "files are written through the files module": (file_writes, {"files"}, WRITING_ALLOWED),
    "a user's output is written by output_file": (
        user_outputs, {"files", "cli.common"}, OUTPUT_ALLOWED),
    "the user's papers are read only by the readers": (
        format_reads, {"corpus.readers"}, READING_ALLOWED),
    "each database is opened only by its module": (databases, DATABASE_OWNERS, {}),
    "locks are taken only by the index's lock modules": (file_locks, LOCK_OWNERS, {}),
    "encoders are made only in embed": (encoders, {"embed"}, {}),
    "ranking options live in the ranking module": (
        ranking_options, {"query.ranking"}, RANKING_ALLOWED),
    "services are asked only through the fetch client": (http_requests, {"corpus.fetch.http"}, {}),
    "only the error module ends the process": (process_exits, {"cli.errors"}, EXIT_ALLOWED),
    "a warning names the caller's line": (warning_places, set(), {}),
}


@pytest.mark.parametrize("home", HOMES)
def test_each_mechanism_lives_in_its_home(home):
    detect, modules_of_home, allowed = HOMES[home]
    assert home_breaches(PACKAGE, detect, modules_of_home, allowed) == []


# The web app's pages are drawn in its own layout (templates extending base.html: its header,
# navigation and search box), through pages.render; a page of its own is named here with its reason.
OWN_LAYOUT_PAGES = {"docs.html"}  # Swagger UI's page: a tool of its own, not one of the app's pages


def test_every_page_of_the_app_has_its_header_and_navigation():
    templates = PACKAGE / "serve" / "templates"
    whole = sorted(
        path.name
        for path in templates.glob("*.html")
        if path.name != "base.html" and "<html" in path.read_text(encoding="utf-8").lower()
        and "{% extends \"base.html\" %}" not in path.read_text(encoding="utf-8")
    )
    assert whole == sorted(OWN_LAYOUT_PAGES), f"pages without the app's header: {whole}"
    found = []
    for path in sorted((PACKAGE / "serve").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "HTMLResponse" and function.name != "render"):
                    text = ast.unparse(node)
                    if not any(page in text for page in OWN_LAYOUT_PAGES):
                        found.append(f"{path.name}: {function.name}: {text}")
    assert not found, f"HTML answered outside pages.render (no header, no navigation): {found}"
