#!/usr/bin/env python3
"""bundle_wheel.py WHEEL LIBUNWIND_DIR OUT_DIR: a copy of WHEEL in OUT_DIR that carries libunwind, as
manylinux repair tools carry a wheel's libraries: LIBUNWIND_DIR/libunwind.so.8 (build_libunwind.sh's) goes
to appendguard/lib/ beside libappendguard.so, whose RUNPATH becomes $ORIGIN (patchelf, on PATH), so that
the library's dlopen("libunwind.so.8") finds it there before any system copy; its licence goes to the
wheel's licence files. auditwheel cannot do this itself: the library loads libunwind with dlopen, so it
is not a DT_NEEDED dependency that `auditwheel repair` would graft. The wheel's RECORD is written anew.
Prints the new wheel's path."""
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

LIBRARY = "appendguard/lib/libappendguard.so"
BUNDLED = "appendguard/lib/libunwind.so.8"


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    wheel, libunwind_dir, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, os.path.basename(wheel))
    with zipfile.ZipFile(wheel) as source:
        infos = source.infolist()
        contents = {info.filename: source.read(info) for info in infos}
    names = list(contents)
    if LIBRARY not in contents:
        sys.exit(f"bundle_wheel: {LIBRARY} is not in {wheel}")
    if BUNDLED in contents:
        sys.exit(f"bundle_wheel: {wheel} already carries {BUNDLED}")
    dist_info = next(n.split("/", 1)[0] for n in names if n.endswith(".dist-info/RECORD"))
    with tempfile.TemporaryDirectory() as tmp:
        library = os.path.join(tmp, "libappendguard.so")
        with open(library, "wb") as f:
            f.write(contents[LIBRARY])
        subprocess.run(["patchelf", "--set-rpath", "$ORIGIN", library], check=True)
        with open(library, "rb") as f:
            contents[LIBRARY] = f.read()
    with open(os.path.join(libunwind_dir, "libunwind.so.8"), "rb") as f:
        contents[BUNDLED] = f.read()
    with open(os.path.join(libunwind_dir, "libunwind.COPYING"), "rb") as f:
        contents[f"{dist_info}/licenses/libunwind.COPYING"] = f.read()
    record = f"{dist_info}/RECORD"
    lines = [record_line(n, d) for n, d in contents.items() if n != record] + [f"{record},,"]
    contents[record] = ("\n".join(lines) + "\n").encode()
    modes = {info.filename: info.external_attr for info in infos}
    executable = (0o100755 << 16)
    with zipfile.ZipFile(out + ".tmp", "w", zipfile.ZIP_DEFLATED) as target:
        for name in [n for n in contents if n != record] + [record]:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = modes.get(name, executable if name == BUNDLED else (0o100644 << 16))
            info.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(info, contents[name])
    shutil.move(out + ".tmp", out)
    print(out)


if __name__ == "__main__":
    main()
