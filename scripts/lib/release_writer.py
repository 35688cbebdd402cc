"""The clean-root check's writer (scripts/lib/clean_root_check.sh), as PyTorch DCP consolidation opens a
file: the header with "wb", then "r+b", an append at the end (must go through) and a write back at 0 (must
be refused). Prints what happened and which libunwind the report loaded (none when there is none)."""
import errno
import sys

path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"H" * 8)
with open(path, "r+b", buffering=0) as f:
    f.seek(0, 2)
    f.write(b"T" * 16)
    f.seek(0)
    try:
        f.write(b"X")
        print("backward=written")
    except OSError as e:
        print("backward=EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else f"backward=errno {e.errno}")
print(f"size={len(open(path, 'rb').read())}")
print("unwind=" + ",".join(sorted({line.split()[-1] for line in open("/proc/self/maps") if "libunwind" in line})))
