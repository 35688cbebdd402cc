"""The preload library's size is what its code needs (issue 11): stripped under 1.5 MB, and its
zero-initialized tables (the descriptor table's inline slots) in .bss, not written into the file as .data,
and .bss under 1 MiB: the address space the library adds at load (issue 24, item 14: two 8 MiB descriptor
tables kept programs under a small `ulimit -v` from loading it).

usage: library_size.py LIBRARY"""
import os
import subprocess
import sys
import tempfile

MAX_STRIPPED = 1_500_000
MAX_DATA = 64 * 1024
MIN_BSS = 32 * 1024  # the descriptor table's first 4096 slots
MAX_BSS = 1 << 20


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
    if bss < MIN_BSS:
        failures.append(f".bss is {bss} bytes: where is the descriptor table?")
    if bss > MAX_BSS:
        failures.append(f".bss is {bss} bytes, over {MAX_BSS}: address space reserved at load (ulimit -v)")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
