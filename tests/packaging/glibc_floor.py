"""The preload library and the launcher load on glibc 2.17 (manylinux2014, RHEL 7) and newer (issue 11).

Fails on:
- any symbol version GLIBC_x.y above 2.17 that `objdump -T` shows the file requiring;
- a needed library other than libc.so.6 and libdl.so.2 (the launcher: none, it is static);
- a name the library calls through its own exported hooks (a PLT or GOT relocation) that glibc 2.17 does
  not define: the hook's dlsym(RTLD_NEXT) finds nothing there, so it needs a stand-in (real.h).
  A name counts as defined in 2.17 if this machine's libc has a version of it no newer than GLIBC_2.17.

usage: glibc_floor.py LIBRARY LAUNCHER"""
import re
import subprocess
import sys

FLOOR = (2, 17)
ALLOWED_NEEDED = {"libc.so.6", "libdl.so.2"}
# Exported hooks our own code calls and that glibc 2.17 lacks, each with a fallback in src/shim/real_io.h.
HAVE_FALLBACK = {"fstat", "fstat64", "renameat2"}
# Hooks the raw-system-call layer (src/shim/syscall_dispatch.cpp) calls for a trapped system call: that layer
# stays off before glibc 2.34 (docs/design.md, "Raw system calls"), so on glibc 2.17 these calls never happen.
CALLED_ONLY_BY_THE_SYSCALL_LAYER = {"close_range", "copy_file_range", "execveat", "pwritev64v2"}


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


def required_versions(path):
    """{GLIBC version string: [symbols]} for the undefined symbols of path's dynamic symbol table."""
    out = subprocess.run(["objdump", "-T", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    versions = {}
    for line in out.splitlines():
        match = re.search(r"\*UND\*\s+\S+\s+\(?GLIBC_([0-9.]+)\)?\s+(\S+)", line)
        if match:
            versions.setdefault(match.group(1), []).append(match.group(2))
    return versions


def needed(path):
    out = subprocess.run(["readelf", "-d", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def is_dynamic(path):
    out = subprocess.run(["readelf", "-l", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    return "DYNAMIC" in out


def libc_path():
    out = subprocess.run(["ldd", "/bin/sh"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return re.search(r"libc\.so\.6 => (\S+)", out).group(1)


def names_in_old_glibc():
    """Names this libc defines with a version no newer than the floor."""
    out = subprocess.run(["objdump", "-T", libc_path()], check=True, stdout=subprocess.PIPE, text=True).stdout
    names = set()
    for line in out.splitlines():
        match = re.search(r"\s\(?GLIBC_([0-9.]+)\)?\s+(\S+)$", line)
        if match and " *UND*" not in line and version_tuple(match.group(1)) <= FLOOR:
            names.add(match.group(2))
    return names


def self_called_exports(path):
    """Exported names the library's own code calls through the PLT/GOT."""
    exported = set()
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        exported.add(line.split()[-1].split("@")[0])
    relocs = subprocess.run(["readelf", "-r", "-W", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    called = set()
    for line in relocs.splitlines():
        match = re.search(r"R_X86_64_(?:JUMP_SLOT|GLOB_DAT)\s+\S+\s+(\S+?)(?:@\S+)?\s+\+", line)
        if match and match.group(1) in exported:
            called.add(match.group(1))
    return called


def main():
    library, launcher = sys.argv[1], sys.argv[2]
    failures = []
    for path in (library, launcher):
        versions = required_versions(path)
        highest = max(versions, key=version_tuple) if versions else "none"
        print(f"{path}: highest GLIBC version required: {highest}; needs {needed(path) or 'nothing (static)'}")
        for version, symbols in sorted(versions.items(), key=lambda item: version_tuple(item[0])):
            if version_tuple(version) > FLOOR:
                failures.append(f"{path} requires GLIBC_{version} for {', '.join(sorted(symbols))}")
        extra = set(needed(path)) - ALLOWED_NEEDED
        if extra:
            failures.append(f"{path} needs {', '.join(sorted(extra))} (allowed: {', '.join(sorted(ALLOWED_NEEDED))})")
    if is_dynamic(launcher):
        failures.append(f"{launcher} is dynamically linked: it must be static (docs/design.md, glibc floor)")
    old = names_in_old_glibc()
    missing = sorted(name for name in self_called_exports(library) if name not in old and name not in HAVE_FALLBACK
                     and name not in CALLED_ONLY_BY_THE_SYSCALL_LAYER)
    if missing:
        failures.append(f"{library} calls its own hooks {', '.join(missing)}, which glibc 2.17 lacks: "
                        "dlsym(RTLD_NEXT) would find nothing; add a fallback (real_fallback in src/shim/real_io.h)")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
