"""Render a report's HTML page and take a PNG screenshot of it with headless Chromium.

    python bench/screenshot.py REPORT.json OUT.png [--dataset DATA.jsonl] [--html OUT.html]

The page is written next to nowhere but a temporary directory (or ``--html``), then opened as
``file://`` by ``chromium --headless --screenshot=OUT.png --window-size=1400,2400``. With
``--dataset`` the answers of the rows are shown (and claim spans highlighted in claim mode).
Needs the ``html`` extra and Chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragbatch.data._jsonl import JsonlReader
from ragbatch.report._html import report_html
from ragbatch.report._models import Report

WINDOW = "1400,2400"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        sys.exit("error: chromium not found; install it (apt-get install chromium)")
    return found


def screenshot(html_path: Path, out: Path, profile: Path, window: str = WINDOW) -> None:
    """Load ``html_path`` in headless Chromium and save a PNG of the window to ``out``."""
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    command += [f"--window-size={window}", f"--screenshot={out.resolve()}"]
    command.append(html_path.resolve().as_uri())
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    if not out.is_file():
        sys.exit(f"error: chromium wrote no screenshot to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="report JSON (ragbatch run --out ...)")
    parser.add_argument("out", type=Path, help="PNG to write")
    parser.add_argument("--dataset", type=Path, help="dataset JSONL, to show questions, answers")
    parser.add_argument("--html", type=Path, help="also keep the rendered HTML page here")
    parser.add_argument("--window-size", default=WINDOW, help="WIDTH,HEIGHT in pixels")
    args = parser.parse_args()
    report = Report.model_validate_json(args.report.read_bytes())
    rows = list(JsonlReader(args.dataset)) if args.dataset else []
    answers = {row.id: row.answer for row in rows} or None
    page = report_html(report, answers, {row.id: row.question for row in rows} or None)
    with tempfile.TemporaryDirectory() as tmp:
        html_path = args.html or Path(tmp) / "report.html"
        html_path.write_text(page, encoding="utf-8")
        screenshot(html_path, args.out, Path(tmp) / "profile", args.window_size)
    print(f"{args.out}: screenshot of {html_path if args.html else 'the report page'}")


if __name__ == "__main__":
    main()
