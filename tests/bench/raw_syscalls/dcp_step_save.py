"""CPU PyTorch training steps and dcp.save (docs/benchmarks.md, "Raw system calls"), run by raw_bench.py
without and with the library and APPENDGUARD_SYSCALLS=off|auto|always. usage: dcp_step_save.py OUT [STEPS]
Prints per phase the wall and the process's CPU time (all threads): STEPS training steps with no guarded
file open, the best of three dcp.save into OUT/ckptN, and STEPS steps while OUT/open.safetensors is open
(APPENDGUARD_SYSCALLS=auto traps then, as during an asynchronous checkpoint)."""
import os
import sys
import time

import torch
import torch.distributed.checkpoint as dcp
import torch.nn as nn

out = sys.argv[1]
steps_per_phase = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 1024)


def step():
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()


def timed(work):
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def steps():
    for _ in range(steps_per_phase):
        step()


for _ in range(3):
    step()
cold = timed(steps)
saves = [timed(lambda i=i: dcp.save({"model": model.state_dict()}, checkpoint_id=os.path.join(out, f"ckpt{i}")))
         for i in range(3)]
save = min(saves)
with open(os.path.join(out, "open.safetensors"), "wb") as f:
    f.write(b"x")
    hot = timed(steps)
n = steps_per_phase
print(f"step_ms={cold[0] / n * 1000:.2f} step_cpu_ms={cold[1] / n * 1000:.2f} "
      f"step_open_ms={hot[0] / n * 1000:.2f} step_open_cpu_ms={hot[1] / n * 1000:.2f} "
      f"dcp_save_ms={save[0] * 1000:.1f} dcp_save_cpu_ms={save[1] * 1000:.1f} threads={torch.get_num_threads()}")
