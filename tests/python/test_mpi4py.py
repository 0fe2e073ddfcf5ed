"""Collectives on numpy arrays through mpi4py, checked against numpy.

Run on 2 or more ranks (tests/mpi/mpi4py.test runs it with and without
collar, on the sim device with jitter):

    mpirun -np 3 /usr/bin/python3 tests/python/test_mpi4py.py [--quick]

For every dtype that mpi4py maps to an MPI datatype (bool, the signed and
unsigned integers of 8 to 64 bits, float16 when mapped, float32, float64,
long double, complex64, complex128, complex long double), for message sizes
of 0, 1 and 1001 elements and about 1 MiB, in place and not:

  - Allreduce with every op MPI defines for the type (SUM, PROD, MAX, MIN;
    BAND, BOR, BXOR for integers; LAND, LOR, LXOR for bool), the first two
    of them only at about 1 MiB;
  - Iallreduce, all of a dtype's operations outstanding at once, completed
    by one Waitall;
  - Bcast from every root;
  - Allgather.

Every rank builds the inputs of all ranks from fixed seeds and checks its own
result: integers and bool bit-exact against the same reduction in numpy;
floating types against a reference computed in float64 (complex128 for the
complex types), within a bound of a few units in the last place of the
summands' magnitude.  Bcast and Allgather results are compared bit for bit.

Rank 0 prints one line per dtype and the last lines
    mpi4py: calls per rank: allreduce A empty A0 bcast B empty B0 allgather G empty G0
    mpi4py: N failures in M checks
which the shell test reads (A counts MPI_Allreduce and MPI_Iallreduce, the
final verdict's included; A0, B0, G0 the calls of count 0); the exit status
is 1 on any failure.
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
nranks = comm.Get_size()
quick = "--quick" in sys.argv

MIB = 1 << 20

failures = 0
checks = 0
allreduce_calls = 0          # MPI_Allreduce + MPI_Iallreduce, this rank
bcast_calls = 0
allgather_calls = 0
empty_calls = {"allreduce": 0, "bcast": 0, "allgather": 0}   # count 0


def fail(what):
    global failures
    failures += 1
    if failures <= 20:
        print("mpi4py: rank %d: FAIL %s" % (rank, what), flush=True)


def dtype_name(dt):
    return np.dtype(dt).name


def mapped(dt):
    """Whether mpi4py has an MPI datatype for this numpy dtype."""
    try:
        MPI._typedict[np.dtype(dt).char]
    except KeyError:
        return False
    return True


def sizes_for(dt):
    """Element counts: 0, 1, an odd count, about 1 MiB (odd too)."""
    itemsize = np.dtype(dt).itemsize
    big = MIB // itemsize + 3
    if quick:
        return [0, 1, 1001]
    return [0, 1, 1001, big]


def kind(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "bool"
    if dt.kind in "iu":
        return "int"
    if dt.kind == "f":
        return "float"
    return "complex"


def ops_for(dt):
    k = kind(dt)
    if k == "bool":
        return [("LAND", MPI.LAND), ("LOR", MPI.LOR), ("LXOR", MPI.LXOR)]
    if k == "int":
        return [("SUM", MPI.SUM), ("PROD", MPI.PROD), ("MAX", MPI.MAX),
                ("MIN", MPI.MIN), ("BAND", MPI.BAND), ("BOR", MPI.BOR),
                ("BXOR", MPI.BXOR)]
    if k == "float":
        return [("SUM", MPI.SUM), ("PROD", MPI.PROD), ("MAX", MPI.MAX),
                ("MIN", MPI.MIN)]
    return [("SUM", MPI.SUM), ("PROD", MPI.PROD)]


def seed_of(*parts):
    h = 1469598103934665603
    for p in parts:
        for ch in str(p):
            h = ((h ^ ord(ch)) * 1099511628211) & 0xFFFFFFFF
    return h


def contribution(dt, opname, n, r):
    """Rank r's input for one op: values chosen so that no integer result
    overflows the type on any number of ranks up to 8 (products of up to 8
    factors of 1 or 2 fit in int8 only up to 2^6, so PROD uses mostly ones),
    and floating products stay near 1."""
    dt = np.dtype(dt)
    rng = np.random.RandomState(seed_of(dt.name, opname, n, r))
    k = kind(dt)
    if k == "bool":
        return rng.randint(0, 2, size=n).astype(dt)
    if k == "int":
        signed = dt.kind == "i"
        if opname == "PROD":
            v = np.where(rng.randint(0, 4, size=n) == 0, 2, 1)
            if signed:
                v = v * np.where(rng.randint(0, 2, size=n) == 0, -1, 1)
            return v.astype(dt)
        if opname == "SUM":
            lo, hi = (-15, 16) if signed else (0, 31)
            return rng.randint(lo, hi, size=n).astype(dt)
        if opname in ("BAND", "BOR", "BXOR"):
            # Random bits in the low and the high 16 bits of the type.
            bits = 8 * dt.itemsize
            v = rng.randint(0, 1 << 16, size=n).astype(np.uint64)
            if bits > 16:
                v = v | (rng.randint(0, 1 << 16, size=n).astype(np.uint64) << np.uint64(bits - 16))
            return v.astype(np.dtype("u%d" % dt.itemsize)).view(dt)
        info = np.iinfo(dt)
        lo = max(int(info.min), -(1 << 62))
        hi = min(int(info.max), (1 << 62))
        return rng.randint(lo, hi, size=n, dtype=np.int64).astype(dt) if signed else \
            rng.randint(0, hi, size=n, dtype=np.int64).astype(dt)
    if k == "float":
        if opname == "PROD":
            return rng.uniform(0.5, 2.0, size=n).astype(dt)
        return rng.uniform(-1.0, 1.0, size=n).astype(dt)
    # complex
    if opname == "PROD":
        mag = rng.uniform(0.5, 2.0, size=n)
        ang = rng.uniform(-np.pi, np.pi, size=n)
        return (mag * np.exp(1j * ang)).astype(dt)
    return (rng.uniform(-1, 1, size=n) + 1j * rng.uniform(-1, 1, size=n)).astype(dt)


def reference(dt, opname, inputs):
    """The expected result and, for floating types, the error bound."""
    dt = np.dtype(dt)
    k = kind(dt)
    if k == "bool":
        fn = {"LAND": np.logical_and, "LOR": np.logical_or,
              "LXOR": np.logical_xor}[opname]
        out = inputs[0].copy()
        for x in inputs[1:]:
            out = fn(out, x)
        return out, None
    if k == "int":
        fn = {"SUM": np.add, "PROD": np.multiply, "MAX": np.maximum,
              "MIN": np.minimum, "BAND": np.bitwise_and,
              "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[opname]
        out = inputs[0].copy()
        for x in inputs[1:]:
            out = fn(out, x)
        return out, None
    wide = np.complex128 if k == "complex" else np.float64
    if dt.itemsize > np.dtype(wide).itemsize:     # long double types
        wide = dt
    xs = [x.astype(wide) for x in inputs]
    if opname in ("MAX", "MIN"):
        fn = np.maximum if opname == "MAX" else np.minimum
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out, np.zeros(out.shape)
    if opname == "SUM":
        out = sum(xs[1:], xs[0])
        mag = sum((np.abs(x) for x in xs[1:]), np.abs(xs[0]))
    else:
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        mag = np.abs(out)
    eps = np.finfo(dt).eps
    # Each of the nranks - 1 roundings (and the rounding of the result to
    # dt) costs at most eps relative to the magnitude; complex products
    # round twice per multiplication.
    bound = (2 * nranks + 2) * eps * mag
    return out, bound


def compare(what, got, want, bound):
    global checks
    checks += 1
    if got.shape != want.shape:
        fail("%s: shape %s, expected %s" % (what, got.shape, want.shape))
        return
    if bound is None:
        if not np.array_equal(got, want):
            bad = np.flatnonzero(got != want)
            i = bad[0]
            fail("%s: %d elements differ, first [%d] = %r, expected %r"
                 % (what, bad.size, i, got[i], want[i]))
        return
    wide = want.dtype
    err = np.abs(got.astype(wide) - want)
    bad = np.flatnonzero(~(err <= bound))
    if bad.size:
        i = bad[0]
        fail("%s: %d elements off, first [%d] = %r, expected %r (error %g > bound %g)"
             % (what, bad.size, i, got[i], want[i], float(err[i]), float(bound[i])))


def ops_at(dt, n):
    """Every op on the small sizes; the first two (SUM and PROD, LAND and
    LOR) at about 1 MiB, which costs the time."""
    ops = ops_for(dt)
    return ops if n * np.dtype(dt).itemsize < MIB else ops[:2]


def test_allreduce(dt):
    global allreduce_calls
    for n in sizes_for(dt):
        for opname, op in ops_at(dt, n):
            inputs = [contribution(dt, opname, n, r) for r in range(nranks)]
            want, bound = reference(dt, opname, inputs)
            what = "Allreduce %s %s n=%d" % (dtype_name(dt), opname, n)
            mine = inputs[rank].copy()
            recv = np.full(n, 7, dtype=dt) if n else np.empty(0, dtype=dt)
            comm.Allreduce(mine, recv, op=op)
            allreduce_calls += 1
            empty_calls["allreduce"] += n == 0
            compare(what, recv, want, bound)
            compare(what + " (send buffer unchanged)", mine, inputs[rank], None)
            buf = inputs[rank].copy()
            comm.Allreduce(MPI.IN_PLACE, buf, op=op)
            allreduce_calls += 1
            empty_calls["allreduce"] += n == 0
            compare(what + " in place", buf, want, bound)


def test_iallreduce(dt):
    """All ops of one size outstanding at once, in place and not."""
    global allreduce_calls
    for n in sizes_for(dt):
        reqs, pending, keep = [], [], []
        for opname, op in ops_at(dt, n):
            inputs = [contribution(dt, opname, n, r) for r in range(nranks)]
            want, bound = reference(dt, opname, inputs)
            what = "Iallreduce %s %s n=%d" % (dtype_name(dt), opname, n)
            mine = inputs[rank].copy()
            recv = np.zeros(n, dtype=dt)
            reqs.append(comm.Iallreduce(mine, recv, op=op))
            # The send buffer must live until the operation completes.
            keep.append((what, mine, inputs[rank]))
            pending.append((what, recv, want, bound))
            buf = inputs[rank].copy()
            reqs.append(comm.Iallreduce(MPI.IN_PLACE, buf, op=op))
            pending.append((what + " in place", buf, want, bound))
            allreduce_calls += 2
            empty_calls["allreduce"] += 2 * (n == 0)
        MPI.Request.Waitall(reqs)
        for what, got, want, bound in pending:
            compare(what, got, want, bound)
        for what, mine, original in keep:
            compare(what + " (send buffer unchanged)", mine, original, None)


def test_bcast(dt):
    global bcast_calls
    for n in sizes_for(dt):
        for root in range(nranks):
            data = contribution(dt, "BCAST", n, root)
            buf = data.copy() if rank == root else np.zeros(n, dtype=dt)
            comm.Bcast(buf, root=root)
            bcast_calls += 1
            empty_calls["bcast"] += n == 0
            compare("Bcast %s n=%d root=%d" % (dtype_name(dt), n, root), buf, data, None)


def test_allgather(dt):
    global allgather_calls
    for n in sizes_for(dt):
        inputs = [contribution(dt, "ALLGATHER", n, r) for r in range(nranks)]
        want = np.concatenate(inputs)
        what = "Allgather %s n=%d" % (dtype_name(dt), n)
        mine = inputs[rank].copy()
        recv = np.zeros(n * nranks, dtype=dt)
        comm.Allgather(mine, recv)
        allgather_calls += 1
        empty_calls["allgather"] += n == 0
        compare(what, recv, want, None)
        compare(what + " (send buffer unchanged)", mine, inputs[rank], None)
        buf = np.zeros(n * nranks, dtype=dt)
        buf[rank * n:(rank + 1) * n] = inputs[rank]
        comm.Allgather(MPI.IN_PLACE, buf)
        allgather_calls += 1
        empty_calls["allgather"] += n == 0
        compare(what + " in place", buf, want, None)


DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64, np.longdouble,
          np.complex64, np.complex128, np.clongdouble]


def main():
    global failures, allreduce_calls
    if nranks < 2:
        if rank == 0:
            print("mpi4py: FAIL needs at least 2 ranks, got %d" % nranks)
        return 1
    if rank == 0:
        print("mpi4py: %d ranks, mpi4py %s, numpy %s, %s" % (
            nranks, __import__("mpi4py").__version__, np.__version__,
            MPI.Get_library_version().splitlines()[0]), flush=True)
    for dt in DTYPES:
        if not mapped(dt):
            if rank == 0:
                print("mpi4py: skip %s: mpi4py %s maps it to no MPI datatype"
                      % (dtype_name(dt), __import__("mpi4py").__version__), flush=True)
            continue
        before = (failures, checks)
        test_allreduce(dt)
        test_iallreduce(dt)
        test_bcast(dt)
        test_allgather(dt)
        if rank == 0:
            print("mpi4py: %-12s %4d checks, %d failures on rank 0" % (
                dtype_name(dt), checks - before[1], failures - before[0]), flush=True)
    # The verdict of all ranks.
    counts = np.array([failures, checks], dtype=np.int64)
    total = np.zeros(2, dtype=np.int64)
    comm.Allreduce(counts, total, op=MPI.SUM)
    allreduce_calls += 1
    if rank == 0:
        print("mpi4py: calls per rank: allreduce %d empty %d bcast %d empty %d allgather %d empty %d"
              % (allreduce_calls, empty_calls["allreduce"], bcast_calls, empty_calls["bcast"],
                 allgather_calls, empty_calls["allgather"]))
        print("mpi4py: %d failures in %d checks" % (total[0], total[1]), flush=True)
    return 1 if total[0] else 0


if __name__ == "__main__":
    try:
        rc = main()
    except Exception:
        import traceback
        traceback.print_exc()
        sys.stdout.flush()
        comm.Abort(1)
    sys.exit(rc)
