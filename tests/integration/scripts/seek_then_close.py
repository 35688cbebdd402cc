"""Buffered writes (test_report_stacks.py): the seek that leaves the end is one line, the refused write
comes at the close, far from it."""
import sys

path = sys.argv[1]
f = open(path, "wb")
f.write(b"0123456789")
f.flush()
f.seek(0)  # the culprit
f.write(b"x")  # buffered: nothing reaches the file here
try:
    f.close()  # the buffer is flushed here, at offset 0: refused
except OSError as error:
    print(f"close={error.errno}")
