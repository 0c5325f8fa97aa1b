"""Small real PDFs for the tests, written here byte by byte as PDF 1.4 (a text layer in Helvetica,
an Info dictionary, a cross-reference table): every PDF reader opens them. Also the kinds a reader
must refuse: a damaged one, one encrypted with a password, one of pictures of pages (no text)."""

from __future__ import annotations

from pathlib import Path


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: list[list[str]], title: str = "", encrypted: bool = False,
              image_only: bool = False) -> bytes:
    """A PDF of these pages (each a list of lines), with `title` in its Info dictionary."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    font = 3 + 2 * count
    for i, lines in enumerate(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R"
            f" /Resources << /Font << /F1 {font} 0 R >> /XObject << /Im1 {font + 2} 0 R >> >> >>".encode()
        )
        if image_only:
            stream = b"q 500 0 0 700 50 50 cm /Im1 Do Q"
        else:
            body = "".join(f"({_escape(line)}) Tj T* " for line in lines)
            stream = f"BT /F1 11 Tf 14 TL 50 740 Td {body}ET".encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objects.append(f"<< /Title ({_escape(title)}) /Producer (tests) >>".encode("latin-1"))
    pixels = bytes(range(256)) * 16  # 64 x 64 grey: a picture, no text
    objects.append(b"<< /Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray"
                   b" /BitsPerComponent 8 /Length %d >>\nstream\n" % len(pixels) + pixels + b"\nendstream")
    info = font + 1
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    encrypt = ""
    if encrypted:  # the standard handler, RC4 40-bit, with a user password the reader is not given
        offsets.append(len(out))
        number = len(objects) + 1
        out += (b"%d 0 obj\n<< /Filter /Standard /V 1 /R 2 /O <" % number + b"ab" * 32 + b"> /U <"
                + b"cd" * 32 + b"> /P -4 >>\nendobj\n")
        encrypt = f" /Encrypt {number} 0 R /ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>]"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += f"trailer\n<< /Size {len(offsets) + 1} /Root 1 0 R /Info {info} 0 R{encrypt} >>\n".encode()
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def paper_pdf(path: Path, title: str, abstract: str, body: str = "", metadata_title: str = "",
              **kinds) -> Path:
    """A paper's PDF: its title, authors, an Abstract heading and its text, then an introduction,
    wrapped at ~80 characters a line."""
    lines = [title, "A. Author and B. Author", "", "Abstract"] + _wrap(abstract) + [
        "", "1 Introduction"] + _wrap(body or "The introduction says why this matters and what is new here.")
    path.write_bytes(pdf_bytes([lines, ["Page two of the paper, with more of its body."]],
                               title=metadata_title, **kinds))
    return path


def _wrap(text: str, width: int = 80) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])
