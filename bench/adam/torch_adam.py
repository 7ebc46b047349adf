#!/usr/bin/python3
"""torch_adam.py N THREADS STEPS — times torch.optim.Adam (default, foreach=True)
and AdamW on one fp32 tensor of N parameters with THREADS threads; prints one
JSON object {variant: [seconds per step, ...]} (after one warm-up step each).
Run by bench/adam/bench-adam.mjs with Debian's /usr/bin/python3 (python3-torch)."""
import json
import sys
import time

import torch

n, threads, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
out = {'torch': torch.__version__, 'threads': torch.get_num_threads()}
p = torch.nn.Parameter(torch.rand(n) * 2 - 1)
p.grad = (torch.rand(n) * 2 - 1) * 0.1
for name, make in [
    ('torch Adam', lambda: torch.optim.Adam([p], lr=1e-3)),
    ('torch Adam foreach', lambda: torch.optim.Adam([p], lr=1e-3, foreach=True)),
    ('torch AdamW', lambda: torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01)),
]:
    opt = make()
    opt.step()  # warm-up: allocates exp_avg, exp_avg_sq
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    out[name] = times
    del opt
print(json.dumps(out))
