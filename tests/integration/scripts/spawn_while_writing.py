"""Spawns a child (subprocess closes the inherited descriptors in the child, possibly after vfork, which
shares memory with us) while a guarded file is open, then checks the file is still guarded here.

usage: spawn_while_writing.py PATH
"""
import errno
import os
import subprocess
import sys

path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"x" * 10)
subprocess.run(["true"], check=True)  # close_fds=True: the child runs close_range before exec
os.lseek(fd, 0, os.SEEK_SET)
try:
    os.write(fd, b"y")
    print("write_back=ok")
except OSError as e:
    print("write_back=" + ("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else str(e.errno)))
os.lseek(fd, 0, os.SEEK_END)
print("write_end=%d" % os.write(fd, b"z"))
