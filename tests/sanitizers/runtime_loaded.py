"""sanitizer.runtime_loaded RUNTIME LIBRARY KIND: the library is instrumented, and preloaded after the
sanitizer runtime into an uninstrumented program (/bin/cat) both are really mapped and the runtime is
active (it honours its options: an unknown flag warning proves it parsed them). Fails otherwise."""
import os
import subprocess
import sys

runtime, library, kind = sys.argv[1:4]
if not os.path.exists(runtime):
    sys.exit(f"sanitizer runtime {runtime} does not exist")
symbols = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True, text=True, check=True).stdout
hook = "__asan_init" if kind == "address" else "__tsan_init"
if hook not in symbols:
    sys.exit(f"{library} is not instrumented for {kind}: no {hook} among its undefined symbols")
env = dict(os.environ, LD_PRELOAD=f"{runtime}:{library}", APPENDGUARD="1")
maps = subprocess.run(["/bin/cat", "/proc/self/maps"], env=env, capture_output=True, text=True)
if maps.returncode != 0:
    sys.exit(f"/bin/cat with the runtime preloaded failed ({maps.returncode}): {maps.stderr.strip()}")
mapped = {line.split()[-1] for line in maps.stdout.splitlines() if len(line.split()) >= 6}
for path in (os.path.realpath(runtime), os.path.realpath(library)):
    if path not in mapped:
        sys.exit(f"{path} is not mapped in the preloaded program")
print(f"runtime {runtime} and {library} ({kind}-instrumented) are mapped in /bin/cat")
