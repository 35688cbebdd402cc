"""Reading back the page of `appendguard report --html` in the tests: its structure (Python's html.parser),
and a screenshot in headless Chromium checked not blank (the PNG decoded here, with zlib only)."""
import html.parser
import os
import shutil
import struct
import subprocess
import tempfile
import zlib

LAUNCHER = os.environ.get("APPENDGUARD_LAUNCHER", "")


def report_html(logs, out, *extra):
    """Runs `appendguard report --html OUT LOG...`; returns the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    return subprocess.run([LAUNCHER, "report", "--html", out, *extra, *logs], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


class Page(html.parser.HTMLParser):
    """The parts of the page the tests look at: one entry per <svg class="timeline">, with its marks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.svgs = []  # {"path":..., "marks": [(tag, {attrs})]}
        self.external = []  # src= / href= to anything but an anchor of the page
        self.scripts = 0
        self.in_svg = False
        self.text = []
        self.tables = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for name in ("src", "href"):
            if name in a and not a[name].startswith("#"):
                self.external.append(a[name])
        if tag == "link":
            self.external.append(a.get("href", "link"))
        if tag == "svg" and "timeline" in a.get("class", "").split():
            self.svgs.append({"path": a.get("data-path"), "marks": []})
            self.in_svg = True
        elif self.in_svg:
            self.svgs[-1]["marks"].append((tag, a))
        if tag == "table":
            self.tables.append(a.get("class", ""))

    def handle_endtag(self, tag):
        if tag == "svg":
            self.in_svg = False

    def handle_data(self, data):
        self.text.append(data)

    def svg_of(self, path):
        found = [s for s in self.svgs if s["path"] == path]
        return found[0] if len(found) == 1 else None


def parse(path):
    page = Page()
    with open(path, encoding="utf-8", errors="replace") as f:
        page.feed(f.read())
    page.close()
    return page


def marks(svg, cls):
    """The marks of an SVG whose class list has every word of `cls`."""
    want = cls.split()
    return [a for tag, a in svg["marks"] if all(w in a.get("class", "").split() for w in want)]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(page_path, png_path, width=1100, height=900):
    """Headless Chromium's screenshot of the page opened from its file (no server)."""
    browser = chromium()
    if not browser:
        raise AssertionError("chromium is not installed (Debian package chromium, in scripts/lib/common.sh)")
    profile = tempfile.mkdtemp(prefix="report-html-chromium-")
    try:
        proc = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
             f"--screenshot={png_path}", "file://" + os.path.abspath(page_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=90)
    finally:
        shutil.rmtree(profile, True)
    if proc.returncode != 0 or not os.path.exists(png_path):
        raise AssertionError(f"chromium --screenshot failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return png_path


def png_pixels(path):
    """(width, height, rows of RGB(A) tuples) of an 8-bit RGB or RGBA PNG without interlacing."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{path} is not a PNG")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise AssertionError(f"unexpected PNG format: depth {depth}, color type {color}, interlace {interlace}")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def colour_census(path):
    """{(r, g, b): pixels} of a screenshot, sampling every other pixel of every other row."""
    width, height, channels, rows = png_pixels(path)
    counts = {}
    for row in rows[::2]:
        for x in range(0, width * channels, channels * 2):
            rgb = (row[x], row[x + 1], row[x + 2])
            counts[rgb] = counts.get(rgb, 0) + 1
    return counts


def is_reddish(rgb):
    r, g, b = rgb
    return r > 200 and g < 110 and b < 100
