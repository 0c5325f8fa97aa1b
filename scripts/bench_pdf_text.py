"""Measure PDF text libraries on real PDFs: the text of the first pages, time, failures.

    python scripts/bench_pdf_text.py PDF_OR_FOLDER... [--pages 3]

Each candidate that is installed (pypdf, pypdfium2, pdfminer.six) reads the first pages of every
PDF, plus three broken copies of the first one made here (truncated to half, bytes overwritten in
the middle, an empty file). Prints, per library: PDFs read, failures (an exception or no text),
characters extracted, total and slowest time per PDF. Timings are ratios between libraries in the
same run; the machine's load changes them.

Quoted in: docs/input-formats.md (the choice of pypdfium2).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def with_pypdf(path: Path, pages: int) -> str:
    from pypdf import PdfReader

    reader = PdfReader(path)
    return "\n".join(page.extract_text() or "" for page in reader.pages[:pages])


def with_pypdfium2(path: Path, pages: int) -> str:
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        return "\n".join(
            document[i].get_textpage().get_text_range() for i in range(min(pages, len(document)))
        )
    finally:
        document.close()


def with_pdfminer(path: Path, pages: int) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(str(path), maxpages=pages)


CANDIDATES = {"pypdf": with_pypdf, "pypdfium2": with_pypdfium2, "pdfminer.six": with_pdfminer}


def broken_copies(first: Path, folder: Path) -> list[Path]:
    data = first.read_bytes()
    truncated = folder / "truncated.pdf"
    truncated.write_bytes(data[: len(data) // 2])
    scribbled = folder / "scribbled.pdf"
    middle = len(data) // 2
    scribbled.write_bytes(data[:middle] + b"\x00garbage" * 512 + data[middle + 4096 :])
    empty = folder / "empty.pdf"
    empty.write_bytes(b"")
    return [truncated, scribbled, empty]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("inputs", nargs="+", type=Path)
    parser.add_argument("--pages", type=int, default=3)
    args = parser.parse_args()
    pdfs = []
    for given in args.inputs:
        pdfs.extend(sorted(given.rglob("*.pdf")) if given.is_dir() else [given])
    with tempfile.TemporaryDirectory() as folder:
        pdfs += broken_copies(pdfs[0], Path(folder))
        print(f"{len(pdfs)} PDFs (the last 3 broken on purpose), first {args.pages} pages each")
        print("| library | read | failed | characters | total s | slowest s |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, extract in CANDIDATES.items():
            read = failed = characters = 0
            total = slowest = 0.0
            for pdf in pdfs:
                start = time.perf_counter()
                try:
                    text = extract(pdf, args.pages)
                except ImportError:
                    break
                except Exception:  # noqa: BLE001 - robustness is what is measured
                    text = ""
                spent = time.perf_counter() - start
                total, slowest = total + spent, max(slowest, spent)
                if text.strip():
                    read += 1
                    characters += len(text)
                else:
                    failed += 1
            else:
                print(
                    f"| {name} | {read} | {failed} | {characters:,} | {total:.2f} | {slowest:.2f} |"
                )


if __name__ == "__main__":
    main()
