"""BibTeX (.bib), as reference managers export it, read with bibtexparser.

Each entry with an `abstract` is a paper: its citation key is the ID. LaTeX in
titles and abstracts is kept as written (maths, commands, escapes) with only
the protective braces removed (`{BERT}` -> `BERT`); author names are decoded
(`M{\\"u}ller` -> `Müller`).

Values are read as BibTeX reads them: `@string` macros (and the month names)
resolved, `#` concatenations joined, and an entry with `crossref` inheriting the
fields it lacks from the entry named (its abstract aside: that describes one work).
An entry without authors but with editors (a `@proceedings`, an edited book) takes
its editors as its authors. Fields the tool does not use are never a reason to refuse.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from ...errors import InputError
from .base import Record, strip_prefix

NAME = "BibTeX"
VENUE_FIELDS = ("journal", "journaltitle", "booktitle")
_COMMAND = re.compile(r"\\([A-Za-z]+|.)", re.S)
_KEY = re.compile(r"@\s*\w+\s*[{(]\s*([^,\s]+)")


def read(path: Path, text: str) -> list[Record]:
    import bibtexparser
    from bibtexparser import middlewares

    # bibtexparser logs each syntax error it recovers from; we report the first ourselves.
    log = logging.getLogger("bibtexparser")  # its modules' loggers inherit this level
    level = log.level
    log.setLevel(logging.CRITICAL + 1)
    try:
        # Its own string resolution knows neither `#` nor nested macros: values are evaluated here.
        library = bibtexparser.parse_string(text, parse_stack=[])
        _evaluate_values(library)
        # Every field as written (macros resolved), before the middlewares split names: the
        # fields not modelled go back out as they came in.
        written = {
            entry.key.casefold(): [
                (field.key.lower(), field.value)
                for field in entry.fields
                if isinstance(field.value, str)
            ]
            for entry in library.entries
        }
        for middleware in (
            middlewares.NormalizeFieldKeys(),
            middlewares.SeparateCoAuthors(),
            middlewares.SplitNameParts(),
        ):
            library = middleware.transform(library)
    except Exception as error:  # the parser's own failures: still one line about this file
        raise InputError(
            f"{path}: BibTeX cannot be read"
            f" ({' '.join(str(error).split()) or type(error).__name__})"
        ) from None
    finally:
        log.setLevel(level)
    if library.failed_blocks:
        block = min(library.failed_blocks, key=lambda b: b.start_line or 0)
        raise _failed(path, block)
    fields_of = {
        entry.key.casefold(): {field.key: field.value for field in entry.fields}
        for entry in library.entries
    }
    return [_record(path, entry, fields_of, written) for entry in library.entries]


# BibTeX's predefined macros: the months.
MONTHS = {
    name[:3].lower(): name
    for name in (
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    )
}
# Fields a crossref does not pass on: the abstract describes the one work, the rest name the entry.
NOT_INHERITED = ("abstract", "crossref", "ids", "key")


def _evaluate_values(library) -> None:
    """Every field's raw value as BibTeX reads it: `{...}` and `"..."` delimiters removed, `#`
    pieces joined, numbers kept, @string macros (in order of definition) and months resolved."""
    macros = dict(MONTHS)
    for string in library.strings:
        macros[string.key.casefold()] = _evaluate(string.value, macros)
    for entry in library.entries:
        for field in entry.fields:
            if isinstance(field.value, str):
                field.value = _evaluate(field.value, macros)


def _evaluate(raw: str, macros: dict[str, str]) -> str:
    pieces = _pieces(raw.strip())
    if pieces is None:  # not a BibTeX value we understand: kept as written, not refused, less
        return _unwrapped(raw.strip())  # the quotes or braces around it
    out = []
    for kind, text in pieces:
        if kind == "macro":
            out.append(
                macros.get(text.casefold(), text)
            )  # BibTeX warns on an undefined macro; we keep its name
        else:
            out.append(text)
    return "".join(out)


def _unwrapped(raw: str) -> str:
    """A value BibTeX cannot parse, without the delimiters around it (`"a } b"` -> `a } b`)."""
    for opening, closing in (('"', '"'), ("{", "}")):
        if len(raw) >= 2 and raw.startswith(opening) and raw.endswith(closing):
            return raw[1:-1].strip()
    return raw


def _pieces(raw: str) -> list[tuple[str, str]] | None:
    """`{a} # "b" # name # 12` as [("text", "a"), ("text", "b"), ("macro", "name"), ("text",
    "12")]."""
    pieces, i, n = [], 0, len(raw)
    while True:
        while i < n and raw[i].isspace():
            i += 1
        if i >= n:
            return None
        if raw[i] == "{":
            end = _closing(raw, i + 1, quote=False)
            if end is None:
                return None
            pieces.append(("text", raw[i + 1 : end]))
            i = end + 1
        elif raw[i] == '"':
            end = _closing(raw, i + 1, quote=True)
            if end is None:
                return None
            pieces.append(("text", raw[i + 1 : end]))
            i = end + 1
        else:
            found = re.match(r"[^\s#{}\"]+", raw[i:])
            if not found:
                return None
            word = found.group(0)
            pieces.append(("text" if word.isdigit() else "macro", word))
            i += len(word)
        while i < n and raw[i].isspace():
            i += 1
        if i >= n:
            return pieces
        if raw[i] != "#":
            return None
        i += 1


def _closing(raw: str, i: int, quote: bool) -> int | None:
    """Where the value that starts before `i` ends: the `}` closing its brace (or, for a quoted
    value, the `"` outside braces); braces escaped with a backslash are not counted, as the
    splitter does not count them."""
    depth = 0
    while i < len(raw):
        char = raw[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return None if quote else i
            depth -= 1
        elif char == '"' and quote and depth == 0:
            return i
        i += 1
    return None


def _failed(path: Path, block) -> InputError:
    line = (block.start_line or 0) + 1
    found = _KEY.match(block.raw or "")
    entry = f" (entry '{found.group(1)}')" if found else ""
    if type(block).__name__ == "DuplicateBlockKeyBlock":
        return InputError(
            f"{path}:{line}{entry}: the key is used by an earlier entry too: give each entry its"
            " own key"
        )
    reason = (
        " ".join(str(getattr(block.error, "abort_reason", "") or block.error).split())
        or "syntax error"
    )
    return InputError(
        f"{path}:{line}{entry}: not valid BibTeX ({reason}): fix the entry's braces, quotes and"
        " commas"
    )


# Fields that only link an entry to another: an entry is written out with what it inherits.
LINKS = ("crossref", "xdata")


def _record(path: Path, entry, fields_of: dict[str, dict], written: dict[str, list]) -> Record:
    line = (entry.start_line or 0) + 1
    source = f"{path}:{line}"
    label = f"{source} (entry '{entry.key}')"
    values = {field.key: field.value for field in entry.fields}
    # The entry as written, to go back out as it came in (`render.bibtex`).
    as_written = dict(
        (name, value) for name, value in written[entry.key.casefold()] if name not in LINKS
    )
    own_editors = values.get("editor")
    parent = values.get("crossref")
    if isinstance(parent, str) and parent.strip().casefold() in fields_of:
        inherited = fields_of[parent.strip().casefold()]
        for name, value in inherited.items():
            if name not in NOT_INHERITED:
                values.setdefault(name, value)
        for name, value in written[parent.strip().casefold()]:  # as BibTeX inherits: field by field
            if name not in NOT_INHERITED and name not in LINKS and name != "title":
                as_written.setdefault(name, value)
        if "booktitle" not in values and isinstance(inherited.get("title"), str):
            values["booktitle"] = inherited[
                "title"
            ]  # the proceedings' title is the paper's book title
    authors = values.get("author") or own_editors  # an edited volume: its editors
    # Only the fields used are read as text: any other (a list of editors, say) is left alone.
    values = {name: value for name, value in values.items() if isinstance(value, str)}
    venue = next((values[name] for name in VENUE_FIELDS if values.get(name)), "")
    doi = strip_prefix(
        values.get("doi", "").strip(), "https://doi.org/", "http://dx.doi.org/", "doi:"
    )
    url = values.get("url", "").strip()
    if not url and doi:
        url = "https://doi.org/" + doi
    eprint = values.get("eprint", "").strip()
    if not url and eprint and values.get("archiveprefix", "arxiv").strip().lower() == "arxiv":
        url = "https://arxiv.org/abs/" + eprint
    year = values.get("year") or values.get("date", "")[:4]
    fields = {
        "id": entry.key,
        "title": text_of(values["title"]) if "title" in values else None,
        "abstract": text_of(values["abstract"]) if "abstract" in values else None,
        "authors": _authors(label, authors),
        "year": year.strip() or None,
        "venue": text_of(venue),
        "url": url,
    }
    keywords = values.get("keywords", "")
    categories = tuple(word.strip() for word in re.split(r"[,;]", keywords) if word.strip())
    extra = {
        "citation_key": entry.key,
        "entry_type": entry.entry_type,
        "bibtex_fields": tuple(as_written.items()),
    }
    attached = file_paths(values.get("file", ""), path.parent)
    if values.get("file", "").strip():  # a reference manager's entry with its files: a paper
        from ..fulltext import complete

        extra["text_from"] = complete(
            fields, [], [file for file in attached if file.is_file()], label
        )
    return Record(fields, source, label, bulk=True, categories=categories, extra=extra)


# A letter a command makes (`\\ss`, `{\\o}`, `\\textbackslash{}`), and a letter with an accent
# (`\\"u`, `{\\'e}`, `\\v{c}`, `\\c c`).
_SYMBOL = re.compile(r"(\{)?\\([A-Za-z]+)(?![A-Za-z])(?(1)\s*\}|(?:\{\}| ?))")
_ACCENT = re.compile(
    r"(\{)?\\(?:(['\"^`~=.])\s*(?:\{(\w)\}|(\w))|([uvHcdbkr])(?:\s*\{(\w)\}|\s+(\w)))(?(1)\})"
)
_COMBINING = {
    "'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304",
    ".": "\u0307", "u": "\u0306", "v": "\u030c", "H": "\u030b", "c": "\u0327", "k": "\u0328",
    "r": "\u030a", "d": "\u0323", "b": "\u0331",
}  # fmt: skip
_BACKSLASH = "\uf8ff"  # a backslash decoded, kept apart from the LaTeX around it until the end
_ESCAPE_AGAIN = {"{": "\\{", "}": "\\}", "%": "\\%", "&": "\\&", "#": "\\#", "_": "\\_", "$": "\\$"}


def text_of(value: str) -> str:
    """A title, abstract or venue as the reader keeps it: the letters and symbols that LaTeX
    commands make decoded (`M{\\"u}ller` -> `Müller`, `{\\textbackslash}` -> `\\`), as author names
    are (pylatexenc's table), maths and every other command kept as written, less the braces that
    only protect case (`strip_braces`)."""
    from ..latex import split_maths

    decoded = "".join(piece if maths else _characters(piece) for piece, maths in split_maths(value))
    return strip_braces(decoded).replace(_BACKSLASH, "\\")


def _characters(text: str) -> str:
    import unicodedata

    def symbol(match: re.Match) -> str:
        made = _symbols().get(match.group(2))
        if made is None:
            return match.group()
        return _BACKSLASH if made == "\\" else _ESCAPE_AGAIN.get(made, made)

    def accent(match: re.Match) -> str:
        mark = match.group(2) or match.group(5)
        letter = match.group(3) or match.group(4) or match.group(6) or match.group(7)
        return unicodedata.normalize("NFC", letter + _COMBINING[mark])

    return _SYMBOL.sub(symbol, _ACCENT.sub(accent, text))


_SYMBOL_TABLE: dict[str, str] = {}


def _symbols() -> dict[str, str]:
    """The commands of no argument that make one character, from pylatexenc's tables."""
    if not _SYMBOL_TABLE:
        from pylatexenc import latex2text, latexwalker

        parsing = latexwalker.get_default_latex_context_db()
        for spec in latex2text.get_default_latex_context_db().iter_macro_specs():
            made = getattr(spec, "simplify_repl", None)
            parsed = parsing.get_macro_spec(spec.macroname)
            arguments = getattr(getattr(parsed, "args_parser", None), "argspec", "")
            if isinstance(made, str) and len(made) == 1 and not arguments:
                _SYMBOL_TABLE[spec.macroname] = made
    return _SYMBOL_TABLE


def file_paths(value: str, folder: Path) -> list[Path]:
    """The PDFs a `file` field names, as JabRef (`:papers/x.pdf:PDF`) and Better BibTeX
    (`Full Text:/home/me/x.pdf:application/pdf`, or the path alone) write it: `;` between files,
    `:` between description, path and type, `\\:` a colon of the path; relative to the .bib's
    folder."""
    out = []
    for item in re.split(r"(?<!\\);", value):
        parts = [
            part.replace("\\:", ":").replace("\\;", ";") for part in re.split(r"(?<!\\):", item)
        ]
        if len(parts) >= 3:
            parts = parts[1:-1]
        name = ":".join(parts).strip().replace("\\\\", "\\")
        if name.lower().endswith(".pdf"):
            out.append(folder / name)
    return out


def _authors(label: str, authors) -> list[str]:
    if not authors:
        return []
    if isinstance(authors, str):  # one name the splitter left alone
        authors = [authors]
    from pylatexenc.latex2text import LatexNodes2Text

    decoder = LatexNodes2Text()
    names = []
    for name in authors:
        if isinstance(name, str):
            text = name
        else:
            text = " ".join(name.first + name.von + name.last)
            if name.jr:
                text += ", " + " ".join(name.jr)
        try:
            decoded = decoder.latex_to_text(text)
        except Exception:  # pylatexenc gives up on odd markup: keep the name as written
            decoded = strip_braces(text)
        decoded = " ".join(decoded.split())
        if decoded:
            names.append(decoded)
    return names


def strip_braces(text: str) -> str:
    """LaTeX as written, less the braces that only protect case or group text.

    Maths ($...$, \\(...\\), \\[...\\]) is kept verbatim, and so are a command's
    argument braces (`\\emph{word}`) and escapes (`\\{`, `\\%`, `\\$`)."""
    out: list[str] = []
    kept: list[bool] = []  # for each open brace: was it written out?
    math: str | None = None  # the closing delimiter while inside maths
    i, n = 0, len(text)
    after_command = False
    while i < n:
        char = text[i]
        if char == "\\":
            found = _COMMAND.match(text, i)
            token = found.group(0) if found else char
            out.append(token)
            i += len(token)
            name = token[1:]
            if math is None and name in ("(", "["):
                math = "\\)" if name == "(" else "\\]"
            elif math is not None and token == math:
                math = None
            after_command = bool(name) and name not in ("{", "}", "$", "%", "&", "#", "_", " ")
            continue
        if math is not None and math.startswith("$"):
            out.append(char)
            if text.startswith(math, i):
                out.append(text[i + 1 : i + len(math)])
                i += len(math)
                math = None
            else:
                i += 1
            continue
        if math is None and char == "$":
            math = "$$" if text.startswith("$$", i) else "$"
            out.append(math)
            i += len(math)
            continue
        if math is not None:
            out.append(char)
            i += 1
            continue
        if char == "{":
            kept.append(after_command)
            if after_command:
                out.append(char)
        elif char == "}":
            if not kept or kept.pop():
                out.append(char)
            # `\frac{a}{b}`: a brace group right after a kept group is an argument too
            after_command = bool(out) and out[-1] == "}"
            i += 1
            continue
        else:
            out.append(char)
        after_command = False
        i += 1
    return "".join(out)
