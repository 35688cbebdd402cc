"""Refused writes whose reports go to a FIFO log; between them the parent closes the FIFO's reader (a line on
stdin). SIGPIPE has its default action, as in a C program. Then the same with a SIGPIPE already pending
(blocked) for the program: it must still be pending afterwards."""
import os
import signal
import sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"0123456789")
fd = os.open(path, os.O_RDWR)


def backward():
    try:
        os.pwrite(fd, b"x", 0)
        return "accepted"
    except OSError as e:
        return "refused"


print("first=" + backward(), flush=True)
sys.stdin.readline()  # the reader is gone now
print("second=" + backward(), flush=True)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
os.kill(os.getpid(), signal.SIGPIPE)
print("third=" + backward(), flush=True)
print("still_pending=%s" % (signal.SIGPIPE in signal.sigpending()), flush=True)
