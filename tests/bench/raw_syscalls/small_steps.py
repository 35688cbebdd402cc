"""Short CPU PyTorch training steps (a 512-512-512 MLP, batch 64: a few milliseconds each), first with no
guarded file open, then while DIR/open.safetensors is open (docs/benchmarks.md, "Raw system calls"): the
case where APPENDGUARD_SYSCALLS=auto traps the most per unit of work, libgomp's futex at every OpenMP
barrier. raw_bench.py runs it with OMP_WAIT_POLICY=PASSIVE (threads sleep in futex instead of spinning:
the most futex calls, and CPU time that is work, not spinning on a loaded machine).
usage: small_steps.py DIR STEPS. Prints per phase the wall and CPU ms per step, and open / cold CPU."""
import os
import sys
import time

import torch
import torch.nn as nn

out, steps = sys.argv[1], int(sys.argv[2])
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


for _ in range(20):
    step()
cold = timed()
with open(os.path.join(out, "open.safetensors"), "wb") as f:
    f.write(b"x")
    hot = timed()
print(f"step_ms={cold[0]:.3f} step_cpu_ms={cold[1]:.3f} step_open_ms={hot[0]:.3f} "
      f"step_open_cpu_ms={hot[1]:.3f} open_cpu_ratio={hot[1] / cold[1]:.4f}")
