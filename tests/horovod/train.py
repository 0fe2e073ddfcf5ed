"""A few steps of data-parallel training with Horovod over MPI, on the CPU.

    mpirun -np 2 python train.py [--steps 8]

A small MLP (four hidden layers of 32 units, 3,844 parameters in ten
tensors), SGD with momentum wrapped in hvd.DistributedOptimizer, so that each
step's gradients are averaged across ranks by Horovod's fused allreduce.
Every input is fixed: the weights come from one seed (and rank 0's are
broadcast with hvd.broadcast_parameters, the optimizer state with
hvd.broadcast_optimizer_state), each rank's data from a seed of its own, and
PyTorch runs on one thread, so two runs give the same losses.

Rank 0 prints, for tests/horovod/horovod.test to read:
    train: ranks N, params T tensors, B bytes, largest L bytes
    train: step S loss X ranks [x0, x1, ...]
where X is the loss averaged over ranks by hvd.allreduce and the list is
every rank's own loss gathered by hvd.allgather; and at the end
    train: done
Every rank checks that the parameters agree with rank 0's after the last
step (they would not if an allreduce returned different sums to different
ranks) and exits 1 if they do not.
"""

import argparse
import sys

import torch
import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--batch", type=int, default=64)
args = parser.parse_args()

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
hvd.init()
rank, size = hvd.rank(), hvd.size()

torch.manual_seed(1234 + rank)      # different on each rank on purpose:
model = torch.nn.Sequential(         # the broadcast below must fix it
    torch.nn.Linear(16, 32), torch.nn.Tanh(),
    torch.nn.Linear(32, 32), torch.nn.Tanh(),
    torch.nn.Linear(32, 32), torch.nn.Tanh(),
    torch.nn.Linear(32, 32), torch.nn.Tanh(),
    torch.nn.Linear(32, 4),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

# A fixed regression task: targets from a fixed random linear map of the
# inputs through a nonlinearity; each rank has its own shard.
gen = torch.Generator().manual_seed(99)
true_map = torch.randn(16, 4, generator=gen)
gen_rank = torch.Generator().manual_seed(1000 + rank)
inputs = torch.randn(args.steps, args.batch, 16, generator=gen_rank)
targets = torch.sin(inputs @ true_map)

params = [p for p in model.parameters()]
nbytes = [p.numel() * p.element_size() for p in params]
if rank == 0:
    print("train: ranks %d, params %d tensors, %d bytes, largest %d bytes"
          % (size, len(params), sum(nbytes), max(nbytes)), flush=True)

loss_fn = torch.nn.MSELoss()
for step in range(args.steps):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs[step]), targets[step])
    loss.backward()
    optimizer.step()
    mean = hvd.allreduce(loss.detach(), name="loss", op=hvd.Average)
    each = hvd.allgather(loss.detach().reshape(1), name="losses")
    if rank == 0:
        print("train: step %d loss %.9e ranks [%s]"
              % (step, mean.item(), ", ".join("%.9e" % x for x in each.tolist())),
              flush=True)

# The replicas must be identical: rank 0's parameters, broadcast, against
# each rank's own.
ok = True
for i, p in enumerate(params):
    ref = hvd.broadcast(p.detach().clone(), root_rank=0, name="check.%d" % i)
    if not torch.equal(ref, p.detach()):
        print("train: FAIL rank %d: parameter %d differs from rank 0's" % (rank, i), flush=True)
        ok = False
if rank == 0 and ok:
    print("train: done", flush=True)
hvd.shutdown()
sys.exit(0 if ok else 1)
