"""safetensors 0.8's own save_file of one tensor of SIZE bytes (numpy front end: the same Rust
serialize_file as the torch one, whose temporary file is renamed with rustix's raw renameat) to PATH
(docs/benchmarks.md, "Raw system calls"). usage: safetensors_save.py PATH SIZE"""
import sys
import time

import numpy as np
from safetensors.numpy import save_file

path, size = sys.argv[1], int(sys.argv[2])
tensor = np.full(size // 4, 1.5, dtype=np.float32)
wall, cpu = time.perf_counter(), time.process_time()
save_file({"w": tensor}, path)
print(f"save_s={time.perf_counter() - wall:.4f} save_cpu_s={time.process_time() - cpu:.4f}")
