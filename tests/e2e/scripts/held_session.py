"""The write patterns of the held-session tests (test_held_sessions.py), one per subcommand. Each writes
PATH as the DCP consolidation does: a header with "wb", closed; then "r+b", seek to the end, the tensors;
the bytes are expected(tensors, size) below, so a test can compare them (or a prefix of them).

usage: held_session.py MODE PATH [TENSORS [SIZE [PAUSE]]]
  write    the plain pattern; PAUSE seconds between tensor writes (the SIGKILL test)
  later    the plain pattern in the directory read from stdin (a store mounted after start-up)
  read     between the two sessions, reads the file back with "rb" and prints read_ok=1 if it holds the header
  spawn    between the two sessions, runs a child (subprocess, close_fds=False) that prints what its
           descriptors refer to: child_files=A|B|...
  fork     between the two sessions, forks a child that exits at once
  subprocess  between the two sessions, subprocess.run(["true"]) with its defaults (vfork and exec in
           Python 3.11's _posixsubprocess)
  system   between the two sessions, runs os.system("true") (glibc's own spawn)
  popen    between the two sessions, runs a child through popen(3) (ctypes; os.popen is subprocess)
  wait     between the two sessions, prints "held" and waits for a line on stdin (the time-limit test
           reads the store meanwhile)
  exec     after the header's close, execs a Python child that checks the held number is not open in it and
           that the header reached the store; the child finishes the file with "ab"
"""
import os
import subprocess
import sys
import time


def open_files():
    """What this process's descriptors refer to (readlink of /proc/self/fd/N; the listing's own is gone)."""
    links = []
    for name in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:
            pass
    return links


def header_bytes():
    return b"H" * 64


def tensor(index, size):
    return bytes([ord("0") + index % 10]) * size


def expected(tensors, size):
    return header_bytes() + b"".join(tensor(i, size) for i in range(tensors))


def write_header(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.set_inheritable(fd, True)  # Python opens close-on-exec: the library must set it on what it holds
    os.write(fd, header_bytes())
    os.close(fd)
    return fd


def write_tensors(path, tensors, size, pause=0.0):
    with open(path, "r+b", buffering=0) as f:
        f.seek(0, os.SEEK_END)
        for i in range(tensors):
            data = tensor(i, size)
            done = 0
            while done < len(data):
                done += f.write(memoryview(data)[done:])
            if pause:
                time.sleep(pause)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    tensors = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 5000
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    if mode == "list-fds":
        print("|".join(open_files()))
        return 0
    if mode == "exec-child":  # the program exec'd by "exec": argv PATH TENSORS SIZE HELD_FD
        print(f"held_file_open_in_child={int(any(os.path.basename(path) in link for link in open_files()))}")
        with open(path, "rb") as f:
            print(f"header_committed={int(f.read() == header_bytes())}")
        with open(path, "ab") as f:
            for i in range(tensors):
                f.write(tensor(i, size))
        print("done=1")
        return 0
    if mode == "later":  # the store is mounted after start-up: PATH's directory arrives on stdin
        print("ready", flush=True)  # the library read mountinfo when it was loaded
        path = os.path.join(sys.stdin.readline().strip(), os.path.basename(path))
        mode = "write"
    held_fd = write_header(path)
    print(f"held_fd={held_fd}", flush=True)
    if mode == "read":
        with open(path, "rb") as f:
            print(f"read_ok={int(f.read() == header_bytes())}")
    elif mode == "spawn":
        child = subprocess.run([sys.executable, __file__, "list-fds", path], close_fds=False, stdout=subprocess.PIPE,
                               text=True, check=True)
        print(f"child_files={child.stdout.strip()}")
    elif mode == "subprocess":
        print(f"subprocess={subprocess.run(['true']).returncode}")
    elif mode == "system":
        print(f"system={os.system('true')}")
    elif mode == "popen":
        import ctypes
        libc = ctypes.CDLL(None)
        libc.popen.restype = ctypes.c_void_p
        libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        libc.pclose.argtypes = [ctypes.c_void_p]
        stream = libc.popen(b"true", b"r")
        print(f"pclose={libc.pclose(stream)}")
    elif mode == "wait":
        print("held", flush=True)
        sys.stdin.readline()
    elif mode == "fork":
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    elif mode == "exec":
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, __file__, "exec-child", path, str(tensors), str(size), str(held_fd)])
    elif mode != "write":
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    write_tensors(path, tensors, size, pause)
    print("done=1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
