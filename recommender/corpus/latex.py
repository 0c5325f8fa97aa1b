"""The one LaTeX policy of every written document (Markdown, BibTeX): what a reader of a
title or abstract that holds a little LaTeX should see.

Titles and abstracts come from BibTeX, CSV and JSON exports in which authors wrote LaTeX
("BERT~\\citep{devlin2018bert}", "50\\% fewer", "\\textbf{Tiny}"). Every document shows
the same reading of them, made here once:

- escaped specials (``\\% \\& \\# \\_ \\$ \\{ \\}``) are the character;
- ``~`` (a tie) is a space;
- citations (``\\cite``, ``\\citep``, ``\\citet`` ... ``{keys}``) become ``[keys]``;
- formatting commands (``\\textbf{x}``, ``\\emph{x}`` ...) are their text, ``\\url{x}``
  is x and ``\\href{x}{y}`` is y;
- inline maths (``$...$``) is kept as written;
- everything else (other commands, bare braces) is kept as written: nothing is guessed.

The machine formats (JSON, JSON lines, CSV) carry the text exactly as the input gave it.
"""

from __future__ import annotations

import re

__all__ = ["latex_text", "split_maths"]

_ESCAPED = {"\\%": "%", "\\&": "&", "\\#": "#", "\\_": "_", "\\$": "$", "\\{": "{", "\\}": "}"}
_FORMAT = (
    r"textbf|textit|textsc|texttt|textrm|textsf|textup|textmd|textnormal|text|emph|underline|"
    r"mbox|url|nolinkurl"
)
_FORMAT_RE = re.compile(rf"\\(?:{_FORMAT})\s*\{{([^{{}}\\]*(?:\\.[^{{}}\\]*)*)\}}")
_HREF_RE = re.compile(r"\\href\s*\{[^{}]*\}\s*\{([^{}]*)\}")
_CITE_RE = re.compile(
    r"\\(?:[cC]ite(?:p|t|alp|alt|author|year|yearpar)?\*?|parencite|textcite|autocite)"
    r"\s*(?:\[[^\]]*\]\s*){0,2}\{([^{}]*)\}"
)
# Inline maths: $...$ not started or ended by an escaped dollar.
_MATHS_RE = re.compile(r"(?<!\\)\$(?:[^$\\]|\\.)+\$")
# Ties: a ~ that is not escaped (\~ is an accent command, kept as written).
_TIE_RE = re.compile(r"(?<!\\)~")


def split_maths(text: str) -> list[tuple[str, bool]]:
    """The text as pieces (piece, is inline maths), in order."""
    pieces, position = [], 0
    for match in _MATHS_RE.finditer(text):
        if match.start() > position:
            pieces.append((text[position : match.start()], False))
        pieces.append((match.group(), True))
        position = match.end()
    if position < len(text) or not pieces:
        pieces.append((text[position:], False))
    return pieces


def latex_text(text: str) -> str:
    """The text as the policy above reads it (one line; inline maths as written)."""
    return " ".join(
        "".join(
            piece if maths else _prose(piece) for piece, maths in split_maths(text or "")
        ).split()
    )


def _prose(text: str) -> str:
    text = _CITE_RE.sub(
        lambda match: "[" + ", ".join(k.strip() for k in match.group(1).split(",")) + "]", text
    )
    text = _HREF_RE.sub(r"\1", text)
    previous = None
    while previous != text:  # formatting commands nest: \textbf{\emph{x}}
        previous, text = text, _FORMAT_RE.sub(r"\1", text)
    text = _TIE_RE.sub(" ", text)
    return re.sub(r"\\[%&#_${}]", lambda match: _ESCAPED[match.group()], text)
