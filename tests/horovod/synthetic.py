"""Horovod training throughput on synthetic data, on the CPU.

    mpirun -np 2 python synthetic.py [--warmup 5] [--iters 10] [--rounds 3]

The shape of Horovod's own PyTorch synthetic benchmark, small enough for two
CPU cores: an MLP of 1024-wide layers (about 2.1 million parameters, 8.4 MB
of gradients per step, fused into Horovod's allreduces), random inputs and
labels made once, SGD under hvd.DistributedOptimizer.  After --warmup steps,
--rounds rounds of --iters steps are timed; each round gives samples per
second on one rank.  Rank 0 prints

    synthetic: ranks N, batch B, params P, gradient bytes G
    synthetic: round R: X samples/s per rank
    synthetic: X +- Y samples/s per rank, Z samples/s on N ranks

(X the mean of the rounds, Y twice their standard deviation, Z = X times N).
"""

import argparse
import statistics
import time

import torch
import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--width", type=int, default=1024)
parser.add_argument("--warmup", type=int, default=5)
parser.add_argument("--iters", type=int, default=10)
parser.add_argument("--rounds", type=int, default=3)
args = parser.parse_args()

torch.set_num_threads(1)
hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(42)

w = args.width
model = torch.nn.Sequential(
    torch.nn.Linear(w, w), torch.nn.ReLU(),
    torch.nn.Linear(w, w), torch.nn.ReLU(),
    torch.nn.Linear(w, 10),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

data = torch.randn(args.batch, w)
target = torch.randint(0, 10, (args.batch,))
loss_fn = torch.nn.CrossEntropyLoss()

nparams = sum(p.numel() for p in model.parameters())
if rank == 0:
    print("synthetic: ranks %d, batch %d, params %d, gradient bytes %d"
          % (size, args.batch, nparams, 4 * nparams), flush=True)


def step():
    optimizer.zero_grad()
    loss = loss_fn(model(data), target)
    loss.backward()
    optimizer.step()


for _ in range(args.warmup):
    step()

rates = []
for r in range(args.rounds):
    t0 = time.perf_counter()
    for _ in range(args.iters):
        step()
    dt = time.perf_counter() - t0
    rates.append(args.batch * args.iters / dt)
    if rank == 0:
        print("synthetic: round %d: %.1f samples/s per rank" % (r, rates[-1]), flush=True)

mean = statistics.mean(rates)
spread = 2 * statistics.stdev(rates) if len(rates) > 1 else 0.0
if rank == 0:
    print("synthetic: %.1f +- %.1f samples/s per rank, %.1f samples/s on %d ranks"
          % (mean, spread, mean * size, size), flush=True)
hvd.shutdown()
