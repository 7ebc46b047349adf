"""Full (materialised) attention in PyTorch, the baseline of bench/ring.

usage: /usr/bin/python3 bench/ring/torch_attention.py SEQ HEADS DIM CAUSAL(0|1) THREADS
Prints one JSON line: {"seconds", "maxRssBytes", "torch"}. Inputs are float32
[1, heads, seq, dim]; out = softmax(q k^T / sqrt(dim) [+ causal mask]) v, the
scores materialised as PyTorch 1.13 does without a fused kernel.
"""
import json
import math
import resource
import sys
import time

import torch

S, H, D, causal, threads = (int(a) for a in sys.argv[1:6])
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
q = torch.rand(1, H, S, D, generator=g) * 2 - 1
k = torch.rand(1, H, S, D, generator=g) * 2 - 1
v = torch.rand(1, H, S, D, generator=g) * 2 - 1
with torch.no_grad():
    t0 = time.perf_counter()
    scores = (q @ k.transpose(-1, -2)).mul_(1.0 / math.sqrt(D))
    if causal:
        scores.masked_fill_(torch.ones(S, S, dtype=torch.bool).triu_(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "maxRssBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "torch": torch.__version__, "checksum": float(out.double().sum())}))
