#!/usr/bin/env python
"""Put the web app's screenshots beside the previous ones, for a person to look at.

    python scripts/compare_screenshots.py [--before HEAD] [--before-folder DIR]
                                          [--folder docs/images/pages] [--out screenshots-report]

The browser tests (tests/test_serve_pages_browser.py) take a picture of every page into
docs/images/pages/. This script compares each with its previous version (the one committed at
`--before`, default HEAD, or the files of `--before-folder`) and writes an HTML report of the pages
that changed, new or went: the old picture, the new one and a third where the changed pixels are red
over a faded copy of the new one, with the share of pixels that changed (a picture whose pixels
all stay within 16 of 255 of the old ones is the same to the eye: left out). Nothing here passes or
fails: a changed page is for a person to judge (a test never compares pixels). Open
OUT/index.html; it prints the pictures that changed, one a line, and exits 0.

Quoted in: docs/serve.md ("The pages").
"""

from __future__ import annotations

import argparse
import html
import io
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from recommender.files import write_bytes, write_text  # noqa: E402


def previous(name: str, folder: Path, before: str, before_folder: Path | None) -> bytes | None:
    """The picture's previous bytes, or None when it had none."""
    if before_folder is not None:
        path = before_folder / name
        return path.read_bytes() if path.is_file() else None
    relative = folder.resolve().relative_to(ROOT).as_posix()
    done = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{before}:{relative}/{name}"], capture_output=True
    )
    return done.stdout if done.returncode == 0 else None


def previous_names(folder: Path, before: str, before_folder: Path | None) -> set[str]:
    if before_folder is not None:
        return {path.name for path in before_folder.glob("*.png")}
    relative = folder.resolve().relative_to(ROOT).as_posix()
    done = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", before, f"{relative}/"],
        capture_output=True,
        text=True,
    )
    return {Path(line).name for line in done.stdout.splitlines() if line.endswith(".png")}


def difference(old: bytes, new: bytes) -> tuple[float, bytes]:
    """(share of pixels that differ, a PNG: the changed pixels red over a faded new picture)."""
    from PIL import Image, ImageChops

    before = Image.open(io.BytesIO(old)).convert("RGB")
    after = Image.open(io.BytesIO(new)).convert("RGB")
    size = (max(before.width, after.width), max(before.height, after.height))
    canvas = [Image.new("RGB", size, "white") for _ in range(2)]
    canvas[0].paste(before, (0, 0))
    canvas[1].paste(after, (0, 0))
    changed = ImageChops.difference(*canvas).convert("L").point(lambda v: 255 if v > 16 else 0)
    share = sum(changed.histogram()[255:]) / (size[0] * size[1])
    faded = Image.blend(canvas[1], Image.new("RGB", size, "white"), 0.75)
    faded.paste(Image.new("RGB", size, (220, 0, 0)), mask=changed)
    out = io.BytesIO()
    faded.save(out, format="PNG")
    return share, out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=ROOT / "docs" / "images" / "pages")
    parser.add_argument("--before", default="HEAD", help="the git revision of the old pictures")
    parser.add_argument("--before-folder", type=Path, help="the old pictures' folder instead")
    parser.add_argument("--out", type=Path, default=Path("screenshots-report"))
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"{args.folder}: no such folder: run the browser tests first", file=sys.stderr)
        return 2
    names = sorted(
        {path.name for path in args.folder.glob("*.png")}
        | previous_names(args.folder, args.before, args.before_folder)
    )
    args.out.mkdir(parents=True, exist_ok=True)
    rows, changed = [], []
    for name in names:
        path = args.folder / name
        new = path.read_bytes() if path.is_file() else None
        old = previous(name, args.folder, args.before, args.before_folder)
        if old == new:
            continue
        stem = Path(name).stem
        if old is not None and new is not None:
            share, picture = difference(old, new)
            if (
                share == 0
            ):  # other bytes, the same picture to the eye (no pixel off by more than 16)
                continue
        cells = []
        for label, data in (("before", old), ("after", new)):
            if data is None:
                cells.append(f"<td><em>{'new' if label == 'before' else 'gone'}</em></td>")
            else:
                write_bytes(args.out / f"{stem}.{label}.png", data, durable=False)
                cells.append(
                    f'<td><a href="{html.escape(stem)}.{label}.png"><img'
                    f' src="{html.escape(stem)}.{label}.png" alt="{label}"></a></td>'
                )
        if old is not None and new is not None:
            write_bytes(args.out / f"{stem}.diff.png", picture, durable=False)
            cells.append(
                f'<td><a href="{html.escape(stem)}.diff.png"><img'
                f' src="{html.escape(stem)}.diff.png" alt="changed pixels"></a></td>'
            )
            what = f"{share:.1%} of pixels changed"
        else:
            cells.append("<td></td>")
            what = "new" if old is None else "gone"
        changed.append(name)
        rows.append(
            f"<tr><th>{html.escape(name)}<br><small>{what}</small></th>{''.join(cells)}</tr>"
        )
    page = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Screenshots that changed"
        "</title><style>body{font-family:system-ui,sans-serif;margin:16px}img{width:100%;"
        "border:1px solid #ccc}td{vertical-align:top;width:31%}th{text-align:left;"
        "vertical-align:top;width:7%}</style></head><body>",
        f"<h1>{len(rows)} of {len(names)} pictures changed</h1>",
        f"<p>Before: {html.escape(str(args.before_folder or args.before))}; after:"
        f" {html.escape(str(args.folder))}. Red: the pixels that differ.</p>",
        "<table><tr><th></th><th>before</th><th>after</th><th>changed pixels</th></tr>",
        *rows,
        "</table></body></html>",
    ]
    write_text(args.out / "index.html", "\n".join(page), durable=False)
    for name in changed:
        print(name)
    print(
        f"{len(changed)} of {len(names)} pictures changed: open {args.out / 'index.html'}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
