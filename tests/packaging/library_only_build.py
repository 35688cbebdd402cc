"""The library-only build (issue 11): with APPENDGUARD_BUILD_TESTS and APPENDGUARD_BUILD_APPENDONLYFS OFF,
configuring and building needs only CMake and a C++20 compiler (fmt and CLI11 from third_party/ when the
system has none: `pip install .` without -dev packages). Catch2, Python, pkg-config (FUSE), fmt and CLI11
are hidden with CMAKE_DISABLE_FIND_PACKAGE_*, and libunwind's headers with CMAKE_IGNORE_PATH, in a
fresh build tree; then `cmake --install` to a prefix with a non-default LIBDIR, moved elsewhere, and the
installed launcher must find the installed library (`appendguard doctor`).

usage: library_only_build.py SOURCE_DIR WORK_DIR"""
import os
import shutil
import subprocess
import sys

HIDDEN_PACKAGES = ["Catch2", "Python3", "Python", "PythonInterp", "PkgConfig", "FUSE3", "fmt"]
# libunwind.h (Debian's libunwind-dev), CLI/CLI.hpp (libcli11-dev): as on a machine without -dev packages,
# where third_party/'s fmt and CLI11 are used.
HIDDEN_PATHS = ["/usr/include/x86_64-linux-gnu", "/usr/include"]


def step(what, argv, **kwargs):
    print(f"--- {what}: {' '.join(argv)}", flush=True)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    print(proc.stdout[-6000:], flush=True)
    if proc.returncode != 0:
        print(f"FAIL: {what} exited {proc.returncode}")
        sys.exit(1)
    return proc.stdout


def main():
    source, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    build, prefix, moved = (os.path.join(work, name) for name in ("build", "prefix", "moved"))
    configure = ["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DAPPENDGUARD_BUILD_TESTS=OFF",
                 "-DAPPENDGUARD_BUILD_APPENDONLYFS=OFF", f"-DCMAKE_INSTALL_PREFIX={prefix}",
                 "-DCMAKE_INSTALL_LIBDIR=lib64", f"-DCMAKE_IGNORE_PATH={';'.join(HIDDEN_PATHS)}"]
    configure += [f"-DCMAKE_DISABLE_FIND_PACKAGE_{name}=ON" for name in HIDDEN_PACKAGES]
    out = step("configure", configure)
    if "using src/compat/libunwind/libunwind.h" not in out:
        print("FAIL: libunwind.h was found although its directory is ignored")
        return 1
    for carried in ("using third_party/fmt", "using third_party/CLI11"):
        if carried not in out:
            print(f"FAIL: configure did not say '{carried}' with the system's headers hidden")
            return 1
    step("build", ["cmake", "--build", build, "-j2"])
    targets = set(os.listdir(build))
    if "tests" in targets:
        print("FAIL: the tests were configured")
        return 1
    step("install", ["cmake", "--install", build])
    for path in ("bin/appendguard", "lib64/libappendguard.so"):
        if not os.path.isfile(os.path.join(prefix, path)):
            print(f"FAIL: {path} was not installed under {prefix}")
            return 1
    os.rename(prefix, moved)  # relocatable: the launcher looks relative to itself
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
    out = step("doctor", [os.path.join(moved, "bin", "appendguard"), "doctor"], env=env)
    expected = f"library:        {os.path.realpath(os.path.join(moved, 'lib64', 'libappendguard.so'))}"
    if expected not in out or "all good" not in out:
        print(f"FAIL: the installed launcher did not find and use the installed library ({expected!r})")
        return 1
    print("library-only configure, build, install: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
