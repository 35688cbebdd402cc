"""CPU PyTorch training steps and a dcp.save (docs/benchmarks.md, "Raw system calls"): run with and
without the library and APPENDGUARD_SYSCALLS=off|auto|always; argv[1] is the output directory."""
import os, sys, time, shutil
import torch, torch.nn as nn
import torch.distributed.checkpoint as dcp
out = sys.argv[1]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 1024)
def step():
    opt.zero_grad(); loss = model(x).pow(2).mean(); loss.backward(); opt.step()
for _ in range(3): step()
t = time.perf_counter()
for _ in range(20): step()
steps = (time.perf_counter() - t) / 20
saves = []
for i in range(3):
    d = os.path.join(out, f"ckpt{i}")
    t = time.perf_counter(); dcp.save({"model": model.state_dict()}, checkpoint_id=d); saves.append(time.perf_counter() - t)
# a training step while a guarded file is open (auto traps then)
f = open(os.path.join(out, "open.safetensors"), "wb"); f.write(b"x")
t = time.perf_counter()
for _ in range(20): step()
steps_open = (time.perf_counter() - t) / 20
f.close()
print(f"step_ms={steps*1000:.2f} step_open_ms={steps_open*1000:.2f} dcp_save_ms={min(saves)*1000:.1f}")
