"""The table of interposed libc names (src/shim/interposed.def), as the tests read it."""
import os
import re
from collections import namedtuple

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEF_FILE = os.path.join(ROOT, "src", "shim", "interposed.def")
REFERENCE = os.path.join(ROOT, "docs", "reference.md")

Row = namedtuple("Row", "name kind twin64 fd_hook")


def read_table(path=DEF_FILE):
    rows = []
    for line in open(path):
        match = re.match(r"^INTERPOSED(_FD)?\((\w+), (\w+), (\w+),", line)
        if match:
            rows.append(Row(match.group(2), match.group(3), match.group(4), match.group(1) is not None))
    return rows


TABLE = read_table()


def names_listed_in_reference():
    text = open(REFERENCE).read()
    section = text.split("## Interposed functions", 1)[1].split("\n## ", 1)[0]
    section = section.split("The library exports these names", 1)[0]
    # Names are written `like_this`; constants (`SCM_RIGHTS`) are not libc names.
    return {name for name in re.findall(r"`(\w+)`", section) if not name.isupper()}
