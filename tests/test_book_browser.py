"""Every page of the built book in headless Chromium at 1280 x 900: no table or code block wider than its column.

Reads the book built in ``book/_build/html`` (or the folder ``CONVKIT_BOOK_HTML`` names), else builds it (the
suite's ``built_book``, shared with tests/test_book.py); skips, with the reason, where Debian's ``chromium`` is not
installed. Collapsed sections are opened first, so a
table inside a dropdown must fit as well; the notebooks' own code (folded away behind "show code") is not read.
Chromium is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``: JSON messages ending
in NUL on file descriptors 3 and 4), so that the layout is measured, not guessed from the HTML.

Screenshots of every page at 1280 px, for a reader's eye::

    .venv/bin/python tests/test_book_browser.py SHOTS_DIR [HTML_DIR]
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

WIDTH, HEIGHT = 1280, 900
#: Pages of the theme, not of the book (index.html only redirects to the intro).
SKIPPED = {"genindex.html", "search.html", "py-modindex.html", "index.html"}

#: Opens every dropdown, then lists each table and pre block (with the chain of boxes up to the page's column)
#: whose content is wider than the box that shows it: hidden behind a scroll bar, or past the column's edge.
MEASURE = """
(async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  await document.fonts.ready;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const column = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const edge = column.getBoundingClientRect().right;
  const found = [];
  for (const el of document.querySelectorAll('table, pre')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || !column.contains(el) || el.closest('.cell_input')) continue;  // a cell's own code
    let worst = null;
    for (let n = el; n && n !== column.parentElement; n = n.parentElement) {
      if (n.clientWidth > 0 && n.scrollWidth > n.clientWidth + 1) {
        worst = {content: n.scrollWidth, shown: n.clientWidth}; break;
      }
    }
    if (!worst && box.right > edge + 1) worst = {content: Math.round(box.width), shown: Math.round(edge - box.left)};
    if (worst) {
      const caption = el.closest('.convkit-table, figure, .cell_output, .highlight, div');
      const text = (el.tagName === 'TABLE' ? (el.querySelector('th, td') || el).innerText
                                           : el.innerText.split('\\n').sort((a, b) => b.length - a.length)[0]);
      found.push({kind: el.tagName.toLowerCase(), content_px: worst.content, shown_px: worst.shown,
                  text: (text || '').trim().slice(0, 80), where: caption ? caption.className : ''});
    }
  }
  return {column_px: Math.round(column.getBoundingClientRect().width), overflows: found};
})()
"""


def html_dir() -> Path:
    from convkit.study.checkout import book_dir

    return Path(os.environ.get("CONVKIT_BOOK_HTML") or book_dir() / "_build" / "html")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def pages(root: Path) -> list[Path]:
    """Every page of the book under ``root``, the theme's own pages left out."""
    return sorted(p for p in root.rglob("*.html") if p.name not in SKIPPED and "_static" not in p.parts
                  and "_sources" not in p.parts)  # fmt: skip


class Browser:
    """Headless Chromium driven over the DevTools pipe: one tab, 1280 px wide."""

    def __init__(self, executable: str, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="convkit-chromium-")
        to_chrome_r, self._write = os.pipe()
        self._read, from_chrome_w = os.pipe()

        def wire() -> None:  # the child's fd 3 reads our commands, fd 4 writes its answers (inheritable)
            reading, writing = os.dup(to_chrome_r), os.dup(from_chrome_w)  # neither is 3 or 4 once both are taken
            os.dup2(reading, 3)
            os.dup2(writing, 4)
            os.set_inheritable(3, True)  # dup2 onto itself keeps close-on-exec
            os.set_inheritable(4, True)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--hide-scrollbars",
                "--mute-audio",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                "about:blank",
            ],
            preexec_fn=wire,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip (close_fds=False: Python's own fds are close-on-exec, fds 3 and 4 must survive the exec)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.resize(HEIGHT)

    def _message(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._message()
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def resize(self, height: int) -> None:
        metrics = {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=True)

    def open(self, page: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": page.as_uri()}, session=True)
        deadline = time.monotonic() + self.timeout_s
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{page.name} did not load")
            self.events.append(self._message())

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, session=True)  # fmt: skip
        if "exceptionDetails" in result:
            raise RuntimeError(str(result["exceptionDetails"])[:500])
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The whole page, 1280 px wide, as PNG."""
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or HEIGHT)
        self.resize(min(max(height, HEIGHT), 16_000))
        self.evaluate("window.scrollTo(0, 0)")
        clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(max(height, HEIGHT), 16_000), "scale": 1}
        shot = self.call("Page.captureScreenshot", {"format": "png", "clip": clip}, session=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        self.resize(HEIGHT)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def overflows(root: Path) -> dict[str, dict[str, Any]]:
    """Per page (relative to ``root``): the column's width and every table or pre block wider than its column."""
    found = {}
    with Browser(chromium() or "chromium") as browser:
        for page in pages(root):
            browser.open(page)
            found[str(page.relative_to(root))] = browser.evaluate(MEASURE)
    return found


def screenshots(root: Path, out: Path) -> list[Path]:
    """A 1280-px-wide PNG of every page under ``root``, into ``out`` (``notebooks_02_lu2020.png``, ...)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with Browser(chromium() or "chromium") as browser:
        for page in pages(root):
            browser.open(page)
            browser.evaluate("document.fonts.ready.then(() => true)")
            shot = out / (str(page.relative_to(root).with_suffix(".png")).replace(os.sep, "_"))
            browser.screenshot(shot)
            written.append(shot)
    return written


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest) -> Path:
    """The built book: ``CONVKIT_BOOK_HTML`` or book/_build/html where built, else the suite's own build."""
    if chromium() is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    root = html_dir()
    if not (root / "intro.html").is_file():
        root = request.getfixturevalue("built_book")[2]
    return root


def test_no_table_or_code_block_is_wider_than_its_column_at_1280_px(built):
    found = overflows(built)
    assert found and all(v["column_px"] > 500 for v in found.values()), "every page laid out with its column"
    wide = [f"{page}: {o['kind']} {o['content_px']} px in {o['shown_px']} px ({o['text']!r})"
            for page, v in found.items() for o in v["overflows"]]  # fmt: skip
    assert not wide, f"{len(wide)} tables or code blocks wider than their column:\n" + "\n".join(wide)


def test_every_page_has_a_screenshot(built, tmp_path):
    shots = screenshots(built, tmp_path)
    assert len(shots) == len(pages(built))
    assert all(s.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and s.stat().st_size > 10_000 for s in shots)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = Path(sys.argv[2]) if len(sys.argv) == 3 else html_dir()
    for shot in screenshots(root, Path(sys.argv[1])):
        print(shot)
    for page, result in overflows(root).items():
        for o in result["overflows"]:
            print(f"too wide: {page}: {o['kind']} {o['content_px']} px in {o['shown_px']} px ({o['text']!r})")
