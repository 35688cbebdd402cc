"""An allocation-heavy Python loop (docs/benchmarks.md, "Raw system calls"), meant to run with gperftools'
tcmalloc preloaded: buffers of 64 KiB to 16 MiB (tcmalloc's page heap, its own mmap/munmap system calls)
and many small objects, first with no guarded file open, then while one is (APPENDGUARD_SYSCALLS=auto
traps then). usage: alloc_loop.py DIR ITERATIONS"""
import os
import random
import sys
import time


def loop(iterations):
    rng = random.Random(0)
    kept = []
    for i in range(iterations):
        size = 1 << rng.randrange(16, 25)  # 64 KiB .. 16 MiB
        buffer = bytearray(size)
        buffer[-1] = 1
        kept.append(buffer)
        if len(kept) > 8:
            kept.pop(rng.randrange(len(kept)))
        small = [{"i": j, "s": str(j)} for j in range(200)]
        del small


directory, iterations = sys.argv[1], int(sys.argv[2])
loop(50)
wall, cpu = time.perf_counter(), time.process_time()
loop(iterations)
cold = (time.perf_counter() - wall, time.process_time() - cpu)
with open(os.path.join(directory, "open.safetensors"), "wb") as f:
    f.write(b"x")
    wall, cpu = time.perf_counter(), time.process_time()
    loop(iterations)
    hot = (time.perf_counter() - wall, time.process_time() - cpu)
print(f"loop_s={cold[0]:.4f} loop_cpu_s={cold[1]:.4f} loop_open_s={hot[0]:.4f} loop_open_cpu_s={hot[1]:.4f}")
