"""Short CPU PyTorch training steps (a 512-512-512 MLP, batch 64: a few milliseconds each), first with no
guarded file open, then while DIR/open.safetensors is open (docs/benchmarks.md, "Raw system calls"): the
case where APPENDGUARD_SYSCALLS=auto traps the most per unit of work, libgomp's futex at every OpenMP
barrier. raw_bench.py runs it with OMP_WAIT_POLICY=PASSIVE (threads sleep in futex instead of spinning:
the most futex calls, and CPU time that is work, not spinning on a loaded machine).
usage: small_steps.py DIR STEPS. Prints per phase the wall and CPU ms per step, open / cold CPU, and the
median over ten alternating pairs of STEPS/10 steps of the same ratio."""
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
# Then ten alternating pairs of STEPS/10 steps without and with a guarded file open: the per-pair ratio
# cancels the machine's slow drifts, which the two long phases above do not.
steps //= 10
ratios = []
for i in range(10):
    without = timed()[1]
    with open(os.path.join(out, f"pair{i}.safetensors"), "wb") as f:
        f.write(b"x")
        ratios.append(timed()[1] / without)
ratios.sort()
print(f"step_ms={cold[0]:.3f} step_cpu_ms={cold[1]:.3f} step_open_ms={hot[0]:.3f} "
      f"step_open_cpu_ms={hot[1]:.3f} open_cpu_ratio={hot[1] / cold[1]:.4f} "
      f"paired_cpu_ratio={(ratios[4] + ratios[5]) / 2:.4f}")
