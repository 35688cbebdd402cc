"""A killed writer during an overwrite, per store (issue 23): what is left of a file when the program that
overwrites it (`open(p, "wb")`, 64 writes of 16 KiB, a few ms apart) is killed by SIGKILL at a random
moment. Run by hand (it takes about a minute), with the e2e tests' environment:

  APPENDGUARD_LIB=build/src/shim/libappendguard.so APPENDONLYFS=build/src/appendonlyfs/appendonlyfs \\
  APPENDGUARD_CLIENT_PYTHON=build/venv/bin/python PYTHONPATH=tests/integration:tests/appendonlyfs \\
  TMPDIR=build/tests/e2e/tmp python3 tests/e2e/kill_overwrite.py [KILLS] [STORE...]

For each store of matrix_stores.STORES and each mode (without the library, with APPENDGUARD=1 alone) it
kills KILLS writers (default 10) and prints one line: how many left the old file, a prefix of the new one
(with the shortest and longest), the whole new file, an empty file, or anything else. docs/stores.md
quotes the figures.
"""
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import matrix_ops  # noqa: E402
import matrix_stores  # noqa: E402
from e2e_support import harness  # noqa: E402

OLD = bytes((i * 7 + 3) % 251 for i in range(256 * 1024))
NEW = bytes((i * 13 + 5) % 241 for i in range(1024 * 1024))
WRITER = """
import sys, time
data = open(sys.argv[2], "rb").read()
with open(sys.argv[1], "wb") as f:
    for i in range(0, len(data), 16384):
        f.write(data[i:i + 16384])
        f.flush()
        time.sleep(0.004)
"""


def outcome(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        return f"unreadable ({error.strerror})", 0
    if data == OLD:
        return "old", len(data)
    if data == NEW:
        return "whole new", len(data)
    if not data:
        return "empty", 0
    if NEW.startswith(data):
        return "prefix", len(data)
    return "other", len(data)


def measure(directory, lib, kills, source, append_only=False):
    results = []
    for n in range(kills):
        path = os.path.join(directory, f"{'lib' if lib else 'plain'}-{n}.bin")
        with open(path, "wb") as f:
            f.write(OLD)
        if append_only:  # the `chattr +a` store: the pre-existing file carries the attribute
            matrix_ops.set_append_only(path)
        time.sleep(0.2)
        env = harness.child_env(mode="1" if lib else None, preload=lib)
        proc = subprocess.Popen([sys.executable, "-c", WRITER, path, source], env=env, stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(0.03, 0.45))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(1.0)  # the store's upload of what the dead writer left (rclone's write-back is 0 s here)
        results.append(outcome(path))
    return results


def summary(results):
    counts = {}
    for kind, _ in results:
        counts[kind] = counts.get(kind, 0) + 1
    prefixes = [size for kind, size in results if kind == "prefix"]
    text = ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()))
    if prefixes:
        text += f" (prefixes {min(prefixes) // 1024} to {max(prefixes) // 1024} KiB of 1024)"
    return text


def main():
    args = sys.argv[1:]
    kills = int(args.pop(0)) if args and args[0].isdigit() else 10
    stores = args or list(matrix_stores.STORES)
    random.seed(23)
    root = tempfile.mkdtemp(prefix="kill-overwrite-")
    source = os.path.join(root, "new")
    with open(source, "wb") as f:
        f.write(NEW)
    client = os.environ.get("APPENDGUARD_CLIENT_PYTHON", "")
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(matrix_stores.moto_server(client, root))
        for key in stores:
            base = os.path.join(root, key)
            os.makedirs(base)
            with matrix_stores.mounted_store(key, base, endpoint) as directory:
                for lib in (False, True):
                    append_only = matrix_stores.STORES[key][1] == "chattr"
                    line = summary(measure(directory, lib, kills, source, append_only))
                    print(f"{key:16} {'with' if lib else 'without':8} {line}", flush=True)


if __name__ == "__main__":
    main()
