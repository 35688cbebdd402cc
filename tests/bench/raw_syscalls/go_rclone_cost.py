# What APPENDGUARD_SYSCALLS=always costs a Go program: rclone copying one file of SIZE MiB onto an
# appendonlyfs hdfs mount, without the library, with auto and with always, ROUNDS rounds interleaved; CPU
# time of the rclone child (docs/benchmarks.md, "Go under always"). Usage: go_rclone_cost.py SIZE_MIB ROUNDS
# (APPENDGUARD_BUILD_DIR: the build tree, default ./build).
import os, resource, subprocess, sys, time, shutil
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "appendonlyfs"))
import aofs
B = os.environ.get("APPENDGUARD_BUILD_DIR", "build")
LIB = B + "/src/shim/libappendguard.so"
src = os.path.join(os.environ.get("TMPDIR", "/tmp"), "go-cost-source")
os.makedirs(src, exist_ok=True)
size = int(sys.argv[1]) << 20
if not os.path.exists(src + "/big.bin") or os.path.getsize(src + "/big.bin") != size:
    with open(src + "/big.bin", "wb") as f:
        for _ in range(size >> 20): f.write(os.urandom(1 << 20))
work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "go-cost-mount"); shutil.rmtree(work, True); os.makedirs(work)
rows = {"none": [], "auto": [], "always": []}
with aofs.mounted(B + "/src/appendonlyfs/appendonlyfs", profile="hdfs", log=work + "/log") as (backing, mnt):
    n = 0
    for rnd in range(int(sys.argv[2])):
        for setting in ("none", "auto", "always"):
            n += 1
            env = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD")}
            env["RCLONE_CONFIG"] = "/dev/null"
            if setting != "none":
                env.update(LD_PRELOAD=LIB, APPENDGUARD="1", APPENDGUARD_PATHS=mnt + "/**", APPENDGUARD_SYSCALLS=setting, APPENDGUARD_BACKTRACE="0")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.monotonic()
            p = subprocess.run(["rclone", "copy", src, f"{mnt}/c{n}"], env=env, capture_output=True, text=True)
            wall = time.monotonic() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert p.returncode == 0, p.stderr[-2000:]
            assert os.path.getsize(f"{backing}/c{n}/big.bin") == size
            rows[setting].append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall))
            os.system(f"rm -rf {backing}/c{n}")
for s, r in rows.items():
    print(s, " ".join(f"user={u:.2f} sys={y:.2f} wall={w:.2f}" for u, y, w in r))
