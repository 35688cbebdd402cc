"""Measures what the spool costs (docs/benchmarks.md, "The spool"): safetensors save_file of SIZE MiB (1024)
onto appendonlyfs profile=s3 with APPENDGUARD=1, the spool (APPENDGUARD_SPOOL) on a tmpfs of its own, against
APPENDGUARD_SPOOL=off (written on the store, copied at the rename) and a local-disk save without the
library. Prints, per run: seconds, the spool's peak use (sampled every 5 ms) and the bytes appendonlyfs
wrote to its backing directory (its /proc/PID/io wchar: what the store received, i.e. uploaded).

usage: APPENDONLYFS=... APPENDGUARD_LIB=... APPENDGUARD_CLIENT_PYTHON=... python3 spool_cost.py WORKDIR [SIZE]
(as root: it mounts a tmpfs for the spool)."""
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "clients.py")


def wchar(pid):
    with open(f"/proc/{pid}/io") as f:
        return int(next(line for line in f if line.startswith("wchar:")).split()[1])


def used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def run(label, argv, env, spool=None, daemon=None):
    peak = [0]
    stop = threading.Event()

    def sample():
        base = used(spool)
        while not stop.is_set():
            peak[0] = max(peak[0], used(spool) - base)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample) if spool else None
    before = wchar(daemon) if daemon else 0
    if sampler:
        sampler.start()
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - start
    stop.set()
    if sampler:
        sampler.join()
    if proc.returncode != 0:
        sys.exit(f"{label}: failed\n{proc.stderr[-2000:]}")
    uploaded = wchar(daemon) - before if daemon else 0
    print(f"{label:<40} {elapsed:6.2f} s   spool peak {peak[0] / 2**20:7.1f} MiB   uploaded {uploaded / 2**20:7.1f} MiB")


def main():
    work, size = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "1024"
    python = os.environ["APPENDGUARD_CLIENT_PYTHON"]
    os.makedirs(work, exist_ok=True)
    backing, mnt, spool, local = (os.path.join(work, n) for n in ("backing", "mnt", "spool", "local"))
    for d in (backing, mnt, spool, local):
        os.makedirs(d, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3g", "tmpfs", spool], check=True)
    daemon = subprocess.Popen([os.environ["APPENDONLYFS"], "-f", "-o", "profile=s3", backing, mnt])
    try:
        while not os.path.ismount(mnt):
            time.sleep(0.01)
        plain = {k: v for k, v in os.environ.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
        lib = dict(plain, LD_PRELOAD=os.environ["APPENDGUARD_LIB"], APPENDGUARD="1")
        for round_number in range(2):
            run("local disk, without the library", [python, CLIENTS, "save_big", local, size], plain)
            out = os.path.join(mnt, f"spool{round_number}")
            run("appendonlyfs s3, APPENDGUARD=1 (spool)", [python, CLIENTS, "save_big", out, size],
                dict(lib, APPENDGUARD_SPOOL=spool), spool, daemon.pid)
            out = os.path.join(mnt, f"off{round_number}")
            run("appendonlyfs s3, APPENDGUARD_SPOOL=off", [python, CLIENTS, "save_big", out, size],
                dict(lib, APPENDGUARD_SPOOL="off"), spool, daemon.pid)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        daemon.wait()
        subprocess.run(["umount", spool], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
