"""Every collective collar handles, from mpi4py, checked and counted.

Run on 3 ranks under collar (LD_PRELOAD=libcollar.so) with COLLAR_DEVICE=sim
(every buffer counts as device memory, so every call takes collar's device
paths), COLLAR_STATS=1, COLLAR_STATS_FORMAT=json and COLLAR_STATS_FILE set:

    mpirun -np 3 env LD_PRELOAD=.../libcollar.so COLLAR_DEVICE=sim \\
        COLLAR_STATS=1 COLLAR_STATS_FORMAT=json COLLAR_STATS_FILE=/tmp/s.json \\
        python3 tests/python/test_clients.py

Each rank calls, on numpy arrays of int32, float64 and uint8:
  - MPI_Allreduce (sum, max), MPI_Iallreduce, and, where the MPI library has
    MPI-4 persistent collectives, MPI_Allreduce_init and MPI_Bcast_init with
    MPI_Start (twice) + MPI_Wait;
  - MPI_Bcast from every root, MPI_Allgather(v), MPI_Alltoall(v),
    MPI_Reduce_scatter(_block), MPI_Reduce, MPI_Gather(v), MPI_Scatter(v),
    and the nonblocking form of each (MPI_Ibcast, ...) + MPI_Wait;
checks every result against numpy (integers bit-exact, uint8 sums modulo
256, float64 against a float64 reference), and counts its own calls per
collective (a nonblocking call and a persistent start count with the
blocking collective, as collar's statistics count MPI_Iallreduce with
MPI_Allreduce).  No call has a count of 0 or MPI_IN_PLACE: those collar
hands to the MPI library without counting them.

After MPI_Finalize (where collar writes its report), rank 0 reads the JSON
report and compares, per collective, the calls collar counted (sum over
ranks) with the calls the ranks made.  Output: one line per collective,
"clients: COLLECTIVE made N counted M ok|MISMATCH", then
"clients: N passed, N failed" (checks of values on all ranks, then one check
per collective for the counts).  Exit status 0 only when all passed.

--no-collar: without collar (the MPI library alone): the values only.
--memory=host|device: every call collar counted must be on that memory
(host: no device backend; device: COLLAR_DEVICE=sim).
--profile=DIR: collar loaded by mpi4py.profile("collar", path=[DIR])
before mpi4py imports its MPI module, not by LD_PRELOAD (which must not
name libcollar.so then).
--array=cupy: every buffer handed to MPI is a CuPy array in device memory
(tests/gpu/run.sh, on a GPU); the references stay numpy, results are copied
back to the host to be checked.  --array=cudaemu: every buffer is a
minimal array object of this script's (CudaemuArray) with
__cuda_array_interface__ (version 3), its memory from cudaMalloc of the
CUDA runtime in the process (the emulation, tests/cudaemu/libcudaemu.so in
LD_PRELOAD), filled and read with cudaMemcpy through ctypes; with collar on
the emulation (COLLAR_DEVICE=cuda, tests/mpi/cudaemu_clients.test).
Default: numpy arrays.
"""

import json
import os
import sys

import numpy as np

# --profile=DIR: collar comes from mpi4py's hook for profiling libraries,
# not from LD_PRELOAD: mpi4py.profile("collar", path=[DIR]) loads
# DIR/libcollar.so with RTLD_GLOBAL before mpi4py loads its MPI library.
PROFILE = None
for _a in sys.argv[1:]:
    if _a.startswith("--profile="):
        PROFILE = _a.split("=", 1)[1]
if PROFILE is not None:
    import mpi4py
    if "libcollar" in os.environ.get("LD_PRELOAD", ""):
        sys.exit("test_clients.py: --profile with libcollar.so in LD_PRELOAD")
    mpi4py.profile("collar", path=[PROFILE])

from mpi4py import MPI

NO_COLLAR = "--no-collar" in sys.argv[1:]
ARRAY = "numpy"
MEMORY = None
for _a in sys.argv[1:]:
    if _a.startswith("--array="):
        ARRAY = _a.split("=", 1)[1]
    if _a.startswith("--memory="):
        MEMORY = _a.split("=", 1)[1]


class Cudaemu:
    """The part of an array module this script uses (asarray, zeros,
    asnumpy), on device memory of the process's CUDA runtime, found by
    ctypes among the loaded libraries: no CuPy, no toolkit."""

    __version__ = "cudaemu"
    H2D, D2H, D2D = 1, 2, 3

    def __init__(self):
        import ctypes
        self.ct = ctypes
        self.rt = ctypes.CDLL(None)
        try:
            self.rt.cudaMalloc
        except AttributeError:
            sys.exit("test_clients.py: --array=cudaemu: no cudaMalloc in the "
                     "process (LD_PRELOAD the CUDA emulation)")
        self.rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_int]
        self.rt.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        self.rt.cudaFree.argtypes = [ctypes.c_void_p]
        self.rt.cudaGetErrorString.restype = ctypes.c_char_p

    def call(self, name, *args):
        err = getattr(self.rt, name)(*args)
        if err != 0:
            raise RuntimeError("%s: %s" % (
                name, self.rt.cudaGetErrorString(err).decode()))

    def memcpy(self, dst, src, nbytes, kind):
        if nbytes:
            self.call("cudaMemcpy", dst, src, nbytes, kind)
            # From pageable memory the copy may still be in flight: what a
            # program does before handing the buffer to MPI.
            self.call("cudaDeviceSynchronize")

    def asarray(self, a):
        a = np.ascontiguousarray(a)
        d = CudaemuArray(self, a.size, a.dtype)
        self.memcpy(d.ptr, a.ctypes.data, a.nbytes, self.H2D)
        return d

    def zeros(self, n, dt):
        d = CudaemuArray(self, n, dt)
        self.call("cudaMemset", d.ptr, 0, d.nbytes)
        return d

    def asnumpy(self, d):
        a = np.empty(d.shape, d.dtype)
        self.memcpy(a.ctypes.data, d.ptr, a.nbytes, self.D2H)
        return a


class CudaemuArray:
    """A 1-d array in device memory that mpi4py takes as a buffer
    (__cuda_array_interface__); `a[:] = x` copies x (numpy, scalar or
    another CudaemuArray) in."""

    def __init__(self, mod, n, dt):
        self.mod = mod
        self.dtype = np.dtype(dt)
        self.shape = (int(n),)
        self.nbytes = int(n) * self.dtype.itemsize
        p = mod.ct.c_void_p()
        mod.call("cudaMalloc", mod.ct.byref(p), mod.ct.c_size_t(max(self.nbytes, 1)))
        self.ptr = p.value

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.ptr, False), "strides": None, "version": 3}

    def __len__(self):
        return self.shape[0]

    def __setitem__(self, key, value):
        if key != slice(None):
            raise IndexError("CudaemuArray: only a[:] = ...")
        if isinstance(value, CudaemuArray):
            self.mod.memcpy(self.ptr, value.ptr, self.nbytes, self.mod.D2D)
            return
        a = np.ascontiguousarray(np.broadcast_to(np.asarray(value, self.dtype), self.shape))
        self.mod.memcpy(self.ptr, a.ctypes.data, self.nbytes, self.mod.H2D)

    def __del__(self):
        if self.ptr is not None:
            self.mod.rt.cudaFree(self.ptr)
            self.ptr = None


if ARRAY == "cupy":
    import cupy as xp
elif ARRAY == "cudaemu":
    xp = Cudaemu()
elif ARRAY == "numpy":
    xp = None
else:
    sys.exit("test_clients.py: --array=%s: expected numpy, cupy or cudaemu" % ARRAY)


def dev(a):
    """a (numpy) as a buffer of the array module under test."""
    return a if xp is None else xp.asarray(a)


def zeros(n, dt):
    return np.zeros(n, dt) if xp is None else xp.zeros(n, dt)


def host(a):
    return a if xp is None else xp.asnumpy(a)

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()

COLLECTIVES = ["allreduce", "bcast", "allgather", "allgatherv", "alltoall",
               "alltoallv", "reduce_scatter", "reduce_scatter_block", "reduce",
               "gather", "gatherv", "scatter", "scatterv"]
made = {c: 0 for c in COLLECTIVES}
checks = 0
failures = []
notes = []
N = 1000
DTYPES = [np.int32, np.float64, np.uint8]


def values(dt, r, n, salt=0):
    """Rank r's n inputs: small integers, as dt (floats: quarters)."""
    i = np.arange(n, dtype=np.int64)
    v = (r * 131 + i * 7 + salt * 17) % 251
    if dt == np.float64:
        return v.astype(np.float64) * 0.25 - 3.0
    if dt == np.int32:
        return (v - 100).astype(np.int32)
    return v.astype(np.uint8)


def reduce_ref(dt, n, op, salt=0):
    """The reduction over ranks, computed wide, then as dt."""
    if dt == np.float64:
        acc = [values(dt, r, n, salt) for r in range(size)]
        return np.sum(acc, axis=0) if op == "sum" else np.max(acc, axis=0)
    acc = [values(dt, r, n, salt).astype(np.int64) for r in range(size)]
    out = np.sum(acc, axis=0) if op == "sum" else np.max(acc, axis=0)
    if dt == np.uint8:
        out = out % 256
    return out.astype(dt)


def check(what, got, want):
    global checks
    checks += 1
    got = np.asarray(host(got))
    want = np.asarray(want)
    if got.dtype == np.float64:
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=0)
    else:
        ok = got.shape == want.shape and np.array_equal(got, want)
    if not ok:
        bad = np.flatnonzero(got != want) if got.shape == want.shape else []
        first = int(bad[0]) if len(bad) else -1
        failures.append("rank %d: %s: %s" % (
            rank, what, "shape %s, want %s" % (got.shape, want.shape) if first < 0
            else "%d wrong, first at %d: %r, want %r" % (len(bad), first, got[first], want[first])))


def nb(blocking, request):
    """Run blocking() and then the nonblocking form request() + Wait."""
    blocking()
    request().Wait()


OPS = {"sum": MPI.SUM, "max": MPI.MAX}


# Debian's MPICH 4.0.2 orders MPI_UNSIGNED_CHAR (and MPI_UINT8_T) as signed
# in MPI_MAX (max(0, 131, 11) = 11), in C as from Python: a library's own
# wrong result, not collar's; that one check is left out there, with a note.
LIB_VERSION = MPI.Get_library_version()
UINT8_MAX_BROKEN = "MPICH Version:" in LIB_VERSION and \
    LIB_VERSION.split("MPICH Version:")[1].split()[0].startswith("4.0.")


def t_allreduce(dt):
    n = N
    for opname in ("sum", "max"):
        if opname == "max" and dt == np.uint8 and UINT8_MAX_BROKEN:
            note = "MPI_MAX on uint8 not checked: this MPICH orders unsigned char as signed"
            if note not in notes:
                notes.append(note)
            continue
        s = dev(values(dt, rank, n))
        r = zeros(n, dt)
        comm.Allreduce(s, r, op=OPS[opname])
        made["allreduce"] += 1
        check("Allreduce %s %s" % (opname, dt.__name__), r, reduce_ref(dt, n, opname))
    s = dev(values(dt, rank, n, salt=1))
    r = zeros(n, dt)
    comm.Iallreduce(s, r, op=MPI.SUM).Wait()
    made["allreduce"] += 1
    check("Iallreduce %s" % dt.__name__, r, reduce_ref(dt, n, "sum", salt=1))


def t_persistent(dt):
    """MPI-4 persistent collectives: two starts of one request each."""
    if not hasattr(comm, "Allreduce_init"):
        return "mpi4py %s has no persistent collectives" % MPI.__name__
    s = dev(values(dt, rank, N, salt=2))
    r = zeros(N, dt)
    try:
        req = comm.Allreduce_init(s, r, op=MPI.SUM)
    except NotImplementedError:
        return "the MPI library has no MPI_Allreduce_init"
    for k in range(2):
        r[:] = 0
        s[:] = dev(values(dt, rank, N, salt=2 + k))
        req.Start()
        req.Wait()
        made["allreduce"] += 1
        check("Allreduce_init start %d %s" % (k, dt.__name__), r, reduce_ref(dt, N, "sum", salt=2 + k))
    req.Free()
    b = dev(values(dt, 1, N)) if rank == 1 else zeros(N, dt)
    req = comm.Bcast_init(b, root=1)
    req.Start()
    req.Wait()
    made["bcast"] += 1
    check("Bcast_init %s" % dt.__name__, b, values(dt, 1, N))
    req.Free()
    return None


def t_bcast(dt):
    for root in range(size):
        b = dev(values(dt, root, N)) if rank == root else zeros(N, dt)
        comm.Bcast(b, root=root)
        made["bcast"] += 1
        check("Bcast root %d %s" % (root, dt.__name__), b, values(dt, root, N))
        b = dev(values(dt, root, N, 3)) if rank == root else zeros(N, dt)
        comm.Ibcast(b, root=root).Wait()
        made["bcast"] += 1
        check("Ibcast root %d %s" % (root, dt.__name__), b, values(dt, root, N, 3))


def t_allgather(dt):
    want = np.concatenate([values(dt, q, N) for q in range(size)])
    for name, fn in (("Allgather", comm.Allgather), ("Iallgather", comm.Iallgather)):
        r = zeros(size * N, dt)
        s = dev(values(dt, rank, N))
        req = fn(s, r)
        if req is not None:
            req.Wait()
        made["allgather"] += 1
        check("%s %s" % (name, dt.__name__), r, want)
    counts = [N + q for q in range(size)]
    displs = [sum(counts[:q]) + q for q in range(size)]   # with a gap
    want = np.zeros(displs[-1] + counts[-1] + 1, dt)
    for q in range(size):
        want[displs[q]:displs[q] + counts[q]] = values(dt, q, counts[q])
    for name, fn in (("Allgatherv", comm.Allgatherv), ("Iallgatherv", comm.Iallgatherv)):
        r = zeros(len(want), dt)
        s = dev(values(dt, rank, counts[rank]))
        req = fn(s, [r, counts, displs, None])
        if req is not None:
            req.Wait()
        made["allgatherv"] += 1
        check("%s %s" % (name, dt.__name__), r, want)


def block(dt, src, dst, n):
    """What rank src sends to rank dst in the all-to-alls."""
    return values(dt, src * size + dst, n)


def t_alltoall(dt):
    s = dev(np.concatenate([block(dt, rank, q, N) for q in range(size)]))
    want = np.concatenate([block(dt, q, rank, N) for q in range(size)])
    for name, fn in (("Alltoall", comm.Alltoall), ("Ialltoall", comm.Ialltoall)):
        r = zeros(size * N, dt)
        req = fn(s, r)
        if req is not None:
            req.Wait()
        made["alltoall"] += 1
        check("%s %s" % (name, dt.__name__), r, want)

    def cnt(src, dst):
        return N + src + 2 * dst

    sc = [cnt(rank, q) for q in range(size)]
    sd = [sum(sc[:q]) for q in range(size)]
    rc = [cnt(q, rank) for q in range(size)]
    rd = [sum(rc[:q]) for q in range(size)]
    s = dev(np.concatenate([block(dt, rank, q, sc[q]) for q in range(size)]))
    want = np.concatenate([block(dt, q, rank, rc[q]) for q in range(size)])
    for name, fn in (("Alltoallv", comm.Alltoallv), ("Ialltoallv", comm.Ialltoallv)):
        r = zeros(sum(rc), dt)
        req = fn([s, sc, sd, None], [r, rc, rd, None])
        if req is not None:
            req.Wait()
        made["alltoallv"] += 1
        check("%s %s" % (name, dt.__name__), r, want)


def t_reduce_scatter(dt):
    full = reduce_ref(dt, size * N, "sum")
    for name, fn in (("Reduce_scatter_block", comm.Reduce_scatter_block),
                     ("Ireduce_scatter_block", comm.Ireduce_scatter_block)):
        r = zeros(N, dt)
        s = dev(values(dt, rank, size * N))
        req = fn(s, r, op=MPI.SUM)
        if req is not None:
            req.Wait()
        made["reduce_scatter_block"] += 1
        check("%s %s" % (name, dt.__name__), r, full[rank * N:(rank + 1) * N])
    rc = [N + 3 * q for q in range(size)]
    total = sum(rc)
    full = reduce_ref(dt, total, "sum")
    lo = sum(rc[:rank])
    for name, fn in (("Reduce_scatter", comm.Reduce_scatter),
                     ("Ireduce_scatter", comm.Ireduce_scatter)):
        r = zeros(rc[rank], dt)
        s = dev(values(dt, rank, total))
        req = fn(s, r, recvcounts=rc, op=MPI.SUM)
        if req is not None:
            req.Wait()
        made["reduce_scatter"] += 1
        check("%s %s" % (name, dt.__name__), r, full[lo:lo + rc[rank]])


def t_rooted(dt):
    for root in range(size):
        for name, fn in (("Reduce", comm.Reduce), ("Ireduce", comm.Ireduce)):
            r = zeros(N, dt) if rank == root else None
            s = dev(values(dt, rank, N))
            req = fn(s, r, op=MPI.SUM, root=root)
            if req is not None:
                req.Wait()
            made["reduce"] += 1
            if rank == root:
                check("%s root %d %s" % (name, root, dt.__name__), r, reduce_ref(dt, N, "sum"))
        want = np.concatenate([values(dt, q, N) for q in range(size)])
        for name, fn in (("Gather", comm.Gather), ("Igather", comm.Igather)):
            r = zeros(size * N, dt) if rank == root else None
            s = dev(values(dt, rank, N))
            req = fn(s, r, root=root)
            if req is not None:
                req.Wait()
            made["gather"] += 1
            if rank == root:
                check("%s root %d %s" % (name, root, dt.__name__), r, want)
        counts = [N + 2 * q for q in range(size)]
        displs = [sum(counts[:q]) for q in range(size)]
        want = np.concatenate([values(dt, q, counts[q]) for q in range(size)])
        for name, fn in (("Gatherv", comm.Gatherv), ("Igatherv", comm.Igatherv)):
            r = zeros(sum(counts), dt) if rank == root else None
            s = dev(values(dt, rank, counts[rank]))
            req = fn(s, [r, counts, displs, None] if rank == root else None, root=root)
            if req is not None:
                req.Wait()
            made["gatherv"] += 1
            if rank == root:
                check("%s root %d %s" % (name, root, dt.__name__), r, want)
        s = dev(np.concatenate([block(dt, root, q, N) for q in range(size)]))
        for name, fn in (("Scatter", comm.Scatter), ("Iscatter", comm.Iscatter)):
            r = zeros(N, dt)
            req = fn(s if rank == root else None, r, root=root)
            if req is not None:
                req.Wait()
            made["scatter"] += 1
            check("%s root %d %s" % (name, root, dt.__name__), r, block(dt, root, rank, N))
        s = dev(np.concatenate([block(dt, root, q, counts[q]) for q in range(size)]))
        for name, fn in (("Scatterv", comm.Scatterv), ("Iscatterv", comm.Iscatterv)):
            r = zeros(counts[rank], dt)
            req = fn([s, counts, displs, None] if rank == root else None, r, root=root)
            if req is not None:
                req.Wait()
            made["scatterv"] += 1
            check("%s root %d %s" % (name, root, dt.__name__), r, block(dt, root, rank, counts[rank]))


def main():
    persistent_note = None
    for dt in DTYPES:
        t_allreduce(dt)
        persistent_note = t_persistent(dt)
        t_bcast(dt)
        t_allgather(dt)
        t_alltoall(dt)
        t_reduce_scatter(dt)
        t_rooted(dt)
    if persistent_note:
        notes.append("persistent collectives not run: " + persistent_note)

    # Every rank's verdict, by one more (counted) allreduce.
    nfail = dev(np.array([len(failures), checks], np.int64))
    total = zeros(2, np.int64)
    comm.Allreduce(nfail, total, op=MPI.SUM)
    total = host(total)
    made["allreduce"] += 1
    for f in failures[:20]:
        print("clients: FAIL " + f, flush=True)
    mine = dict(made)
    # Open MPI 4.1's string ends in a NUL (mpi4py 3.1 keeps it): grep
    # would take the line for binary data.
    lib = MPI.Get_library_version().splitlines()[0].replace("\0", "").strip()
    stats_file = os.environ.get("COLLAR_STATS_FILE")
    MPI.Finalize()
    if rank != 0:
        return 1 if failures else 0

    passed = int(total[1] - total[0])
    failed = int(total[0])
    print("clients: mpi4py %s, %s, %d ranks%s%s" % (
        __import__("mpi4py").__version__, lib, size,
        "" if xp is None else ", %s arrays" % (
            "cudaemu" if ARRAY == "cudaemu" else "CuPy " + xp.__version__),
        "" if PROFILE is None else ", collar by mpi4py.profile"))
    for note in notes:
        print("clients: note: " + note)
    if NO_COLLAR:
        print("clients: without collar: values only")
    else:
        counted = {}
        try:
            with open(stats_file) as f:
                report = json.load(f)
            for row in report["by_algorithm"]:
                if MEMORY is not None and row["memory"] != MEMORY:
                    print("clients: FAIL collar counted %d %s calls on %s memory, want %s" % (
                        row["calls"]["total"], row["collective"], row["memory"], MEMORY))
                    failed += 1
                    continue
                counted[row["collective"]] = counted.get(row["collective"], 0) + row["calls"]["total"]
        except (TypeError, OSError, ValueError, KeyError) as e:
            print("clients: FAIL no statistics report in COLLAR_STATS_FILE=%s: %s" % (stats_file, e))
            failed += 1
            report = None
        if report is not None:
            for c in COLLECTIVES:
                want = mine[c] * size       # every rank makes the same calls
                got = counted.get(c, 0)
                ok = got == want
                print("clients: %-20s made %5d counted %5d %s" % (c, want, got, "ok" if ok else "MISMATCH"))
                passed += ok
                failed += not ok
            for c in sorted(set(counted) - set(COLLECTIVES)):
                print("clients: FAIL collar counted %d calls of %s, which this script never made" % (counted[c], c))
                failed += 1
    print("clients: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


sys.exit(main())
