"""`cmake --install` of a build tree: the launcher, the library, the man page appendguard(1) and the
documents the messages name (docs/*.md) land under the prefix, and the installed launcher finds the
installed library.

usage: install.py BUILD_DIR PREFIX"""
import os
import shutil
import subprocess
import sys


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def main():
    build, prefix = sys.argv[1], sys.argv[2]
    shutil.rmtree(prefix, ignore_errors=True)
    proc = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"cmake --install exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    for path in ("bin/appendguard", "share/man/man1/appendguard.1", "share/doc/appendguard/docs/limits.md",
                 "share/doc/appendguard/docs/stores.md", "share/doc/appendguard/docs/reference.md"):
        if not os.path.isfile(os.path.join(prefix, path)):
            fail(f"{path} is not installed under {prefix}:\n{proc.stdout}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    doctor = subprocess.run([os.path.join(prefix, "bin", "appendguard"), "doctor"], capture_output=True, text=True,
                            env=env)
    if f"library:        {prefix}/" not in doctor.stdout:
        fail(f"the installed launcher did not find the installed library:\n{doctor.stdout}")
    if shutil.which("man"):
        page = subprocess.run(["man", "-M", os.path.join(prefix, "share", "man"), "appendguard"], capture_output=True,
                              text=True, env=dict(env, MANPAGER="cat", PAGER="cat", MANWIDTH="100"))
        if page.returncode != 0 or "APPENDGUARD_PATHS" not in page.stdout:
            fail(f"man -M {prefix}/share/man appendguard: exit {page.returncode}\n{page.stdout[:2000]}{page.stderr}")
    print("installed: launcher, library, man page and documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
