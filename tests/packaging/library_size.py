"""The preload library's size is what its code needs (issue 11): stripped under 1.5 MB, and its
zero-initialized tables (the 8 MiB descriptor table) in .bss, not written into the file as .data.

usage: library_size.py LIBRARY"""
import os
import subprocess
import sys
import tempfile

MAX_STRIPPED = 1_500_000
MAX_DATA = 64 * 1024


def section_sizes(path):
    """{section name: size} from readelf -S -W."""
    out = subprocess.run(["readelf", "-S", "-W", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 6 and fields[0].startswith("[") and fields[1].startswith("."):
            sizes[fields[1]] = int(fields[5], 16)
    return sizes


def main():
    library = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "stripped.so")
        subprocess.run(["strip", "-o", stripped, library], check=True)
        size = os.path.getsize(stripped)
    sections = section_sizes(library)
    data, bss = sections.get(".data", 0), sections.get(".bss", 0)
    print(f"stripped {size} bytes (limit {MAX_STRIPPED}); .data {data} bytes (limit {MAX_DATA}); .bss {bss} bytes")
    failures = []
    if size >= MAX_STRIPPED:
        failures.append(f"the stripped library is {size} bytes, over {MAX_STRIPPED}")
    if data >= MAX_DATA:
        failures.append(f".data is {data} bytes: a zero-initialized table has a non-zero initializer")
    if bss < 8 << 20:
        failures.append(f".bss is {bss} bytes: where is the descriptor table?")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
