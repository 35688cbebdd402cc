"""Short CPU PyTorch training steps (a 512-512-512 MLP, batch 64: a few milliseconds each), first with no
guarded file open, then while DIR/open.safetensors is open (docs/benchmarks.md, "Raw system calls"): the
case where APPENDGUARD_SYSCALLS=auto traps the most per unit of work, libgomp's futex at every OpenMP
barrier. raw_bench.py runs it with OMP_WAIT_POLICY=PASSIVE (threads sleep in futex instead of spinning:
the most futex calls, and CPU time that is work, not spinning on a loaded machine).
usage: small_steps.py DIR STEPS [main|background]. Prints per phase the wall and CPU ms per step, open /
cold CPU, and the median over ten alternating pairs of STEPS/10 steps of the same ratio.
  main        the training (main) thread opens the guarded file and holds it open (the default)
  background  a background thread opens it, writes 4 KiB to it every 10 ms and closes it at the phase's
              end, while the main thread trains (asynchronous checkpointing)"""
import contextlib
import os
import sys
import threading
import time

import torch
import torch.nn as nn

out, steps = sys.argv[1], int(sys.argv[2])
holder = sys.argv[3] if len(sys.argv) > 3 else "main"
if holder not in ("main", "background"):
    sys.exit(f"small_steps.py: holder {holder!r} is neither main nor background")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 512)


def step():
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


def timed():
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return (time.perf_counter() - wall) / steps * 1e3, (time.process_time() - cpu) / steps * 1e3


@contextlib.contextmanager
def guarded_file_open(name):
    """DIR/NAME open for writing meanwhile, by this thread or by a background one."""
    path = os.path.join(out, name)
    if holder == "main":
        with open(path, "wb") as f:
            f.write(b"x")
            yield
        return
    opened, done = threading.Event(), threading.Event()

    def hold():
        with open(path, "wb", buffering=0) as f:
            f.write(b"x")
            opened.set()
            while not done.wait(0.01):
                f.write(b"y" * 4096)

    thread = threading.Thread(target=hold)
    thread.start()
    opened.wait()
    try:
        yield
    finally:
        done.set()
        thread.join()


for _ in range(20):
    step()
cold = timed()
with guarded_file_open("open.safetensors"):
    hot = timed()
# Then ten alternating pairs of STEPS/10 steps without and with a guarded file open: the per-pair ratio
# cancels the machine's slow drifts, which the two long phases above do not.
steps //= 10
ratios = []
for i in range(10):
    without = timed()[1]
    with guarded_file_open(f"pair{i}.safetensors"):
        ratios.append(timed()[1] / without)
ratios.sort()
print(f"step_ms={cold[0]:.3f} step_cpu_ms={cold[1]:.3f} step_open_ms={hot[0]:.3f} "
      f"step_open_cpu_ms={hot[1]:.3f} open_cpu_ratio={hot[1] / cold[1]:.4f} "
      f"paired_cpu_ratio={(ratios[4] + ratios[5]) / 2:.4f}")
