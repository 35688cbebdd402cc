"""A Python writer for the fault options of appendonlyfs: a 64-byte header with open(p, "wb"), then
open(p, "r+b"), seek(0, SEEK_END) and TOTAL pattern bytes in CHUNK-byte writes.

usage: py_writer.py buffered|raw PATH TOTAL CHUNK [--signal-us N]
  buffered: the default buffered writer (io.BufferedRandom), which itself retries short writes and
            EINTR; the first OSError ends the run.
  raw:      buffering=0 (io.FileIO): short counts continue with the rest; after an OSError the file
            position (f.tell(), answered by the library) must still be 64 + the bytes written, and the
            same bytes are retried once; a second failure ends the run.
  --signal-us N: SIGALRM every N microseconds from a Python handler (installed without SA_RESTART).
Prints key=value lines: error=<errno name> (each failure), retry=<count or errno name>, shorts,
signals, written (pattern bytes reported written; buffered: all bytes handed to write() before the
failure), tell_mismatches, tell, fstat_size. Exit 0 when everything was written, 3 otherwise.
"""
import errno
import os
import signal
import sys

HEADER = b"H" * 64


def pattern(total):
    return bytes((i * 7 + i // 251) % 256 for i in range(total))


def main():
    mode, path, total, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    signal_us = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--signal-us" else 0
    data = memoryview(pattern(total))
    signals = 0

    def on_alarm(signum, frame):
        nonlocal signals
        signals += 1

    with open(path, "wb") as f:
        f.write(HEADER)
    written = shorts = tell_mismatches = 0
    failed = False
    f = open(path, "r+b", buffering=-1 if mode == "buffered" else 0)
    f.seek(0, os.SEEK_END)
    if signal_us:
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, signal_us / 1e6, signal_us / 1e6)
    try:
        while written < total and not failed:
            piece = data[written:written + chunk]
            if mode == "buffered":
                try:
                    f.write(piece)
                    f.flush()
                except OSError as error:
                    print(f"error={errno.errorcode[error.errno]}")
                    failed = True
                    break
                written += len(piece)
                continue
            done = 0
            retried = False
            while done < len(piece):
                try:
                    n = f.write(piece[done:])
                except OSError as error:
                    print(f"error={errno.errorcode[error.errno]}")
                    if f.tell() != len(HEADER) + written + done:
                        tell_mismatches += 1
                    if retried:
                        failed = True
                        break
                    retried = True
                    try:
                        n = f.write(piece[done:])
                        print(f"retry={n}")
                    except OSError as again:
                        print(f"retry={errno.errorcode[again.errno]}")
                        failed = True
                        break
                if n < len(piece) - done:
                    shorts += 1
                done += n
            written += done
    finally:
        if signal_us:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
    print(f"shorts={shorts}\nsignals={signals}\nwritten={written}\ntell_mismatches={tell_mismatches}")
    print(f"tell={f.tell()}")
    print(f"fstat_size={os.fstat(f.fileno()).st_size}")
    try:
        f.close()
    except OSError as error:
        print(f"close_error={errno.errorcode[error.errno]}")
        failed = True
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
