#!/usr/bin/env python3
"""lint.docs: the user documentation stays readable and says each fact once.

usage: docs_check.py [REPO_ROOT]

Checks README.md, CHANGELOG.md and docs/*.md: no table row over 300 characters, no "issue N" reference,
every relative link resolves (the file, and the heading for a link with #anchor), every document is
listed in docs/README.md (the index by task), docs/benchmarks.md under 250 lines, one table of the
settings (docs/reference.md's), and the facts that were once written twice with different values stay
written one way. The documents that messages in src/ name exist in docs/ (both install routes install
docs/*.md). Prints every failure, then exits 1 if there was one.
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]).resolve()
MAX_ROW = 300
MAX_BENCHMARK_LINES = 250
ISSUE_REFERENCE = re.compile(r"\bissues?\s+#?\d+", re.I)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")

# Facts once written two ways: (what must not appear, in which files, what is true instead).
CONTRADICTIONS = [
    (re.compile(r"PyTorch 2\.9\s*[–-]\s*2\.\d+"), "*.md", "the consolidation is PyTorch 2.9 and later"),
    (re.compile(r"--reopen rewrite --paths"), "*.md", "mountpoint-s3 needs no option (the library knows it)"),
]


def documents():
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *docs]


def prose_lines(text):
    """(number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    for _, line in prose_lines(path.read_text()):
        match = re.match(r"^#{1,6}\s+(.*)$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def check_document(path, failures):
    name = path.relative_to(ROOT)
    text = path.read_text()
    for number, line in prose_lines(text):
        if line.lstrip().startswith("|") and len(line) > MAX_ROW:
            failures.append(f"{name}:{number}: a table row of {len(line)} characters (at most {MAX_ROW})")
        for match in ISSUE_REFERENCE.finditer(line):
            failures.append(f"{name}:{number}: an issue reference, {match.group(0)!r}: say what it is about")
        for match in LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                failures.append(f"{name}:{number}: a link to {target}: {file_part} does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                failures.append(f"{name}:{number}: a link to {target}: {linked.name} has no heading #{anchor}")


def check_index(failures):
    index = ROOT / "docs" / "README.md"
    text = index.read_text()
    listed = {m.group(1) or m.group(2) for m in LINK.finditer(text)} | set(re.findall(r"`([\w-]+\.md)`", text))
    for doc in sorted((ROOT / "docs").glob("*.md")):
        if doc != index and doc.name not in listed:
            failures.append(f"docs/README.md does not list {doc.name}: every document has a task there")


def check_one_truth(failures):
    benchmarks = ROOT / "docs" / "benchmarks.md"
    lines = len(benchmarks.read_text().splitlines())
    if lines >= MAX_BENCHMARK_LINES:
        failures.append(f"docs/benchmarks.md has {lines} lines (under {MAX_BENCHMARK_LINES}: the current figures "
                        "only; history goes to CHANGELOG.md)")
    for path in documents():
        text = path.read_text()
        name = path.relative_to(ROOT)
        # A table whose header starts "| variable |" (the environment settings; CMake options are not).
        settings_rows = re.findall(r"^\| variable \|.*\n\|[-|: ]+\|\n((?:\|.*\n?)*)", text, re.M)
        settings_rows = [row for rows in settings_rows for row in rows.splitlines()]
        if settings_rows and name.as_posix() != "docs/reference.md":
            failures.append(f"{name}: a table of settings ({len(settings_rows)} rows): docs/reference.md has the "
                            "one table; link to it")
        for pattern, _, truth in CONTRADICTIONS:
            for match in pattern.finditer(text):
                failures.append(f"{name}: {match.group(0)!r} contradicts the rest: {truth}")


def check_message_hints(failures):
    """Documents that the library's and the launcher's messages name exist under docs/."""
    named = set()
    for source in sorted((ROOT / "src").rglob("*.[ch]pp")):
        for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', source.read_text()):
            named.update((source, m) for m in re.findall(r"\b([a-z]+\.md)\b", literal))
    for source, document in sorted(named):
        if not (ROOT / "docs" / document).exists():
            failures.append(f"{source.relative_to(ROOT)}: a message names {document}, which docs/ does not have")


def main():
    failures = [f"{path.relative_to(ROOT)} is missing" for path in documents() if not path.exists()]
    if failures:
        print("\n".join(f"FAIL: {failure}" for failure in failures))
        return 1
    for path in documents():
        check_document(path, failures)
    check_index(failures)
    check_one_truth(failures)
    check_message_hints(failures)
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"lint.docs: {len(documents())} documents, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
