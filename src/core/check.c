/*
 * collar - the consistency check (COLLAR_CHECK=1).
 *
 * A collective library that runs different algorithms on different ranks
 * hangs the job without a word.  With the check on, every intercepted
 * allreduce first compares, over all ranks of the communicator, a fingerprint
 * of what this rank is about to do: the collective and its form, count,
 * datatype size, op, memory kind, the hash of the rules in force, whether
 * the MPI library takes device pointers, the algorithm and chunk selected
 * and the form the call's collectives take (core.h lists every input that
 * decides them).  Cost: one PMPI_Iallgather of NF int64 values per rank
 * per call (which also tells, on a mismatch, which ranks have which value,
 * without another collective), on the application's communicator, issued
 * by the call itself before anything else of it, the same collective
 * whatever the call's form: so it is ordered with the application's
 * collectives there exactly as the call is, on every rank (every allreduce
 * collar sees on the communicator is checked, on every rank: COLLAR_CHECK
 * must be set alike everywhere).
 *
 * A blocking call waits for it, advancing collar's outstanding operations
 * meanwhile, and returns the error before anything of the call is issued.
 * A nonblocking or persistent start never waits for it: the check travels
 * with the operation (collar_check_start, then the gate of its schedule),
 * nothing of collar's own schedule is issued until it has completed, and a
 * mismatch is the error of the request, returned by the completion call as
 * MPI returns a request's errors.  An operation in the MPI library's own
 * form issues its collectives in the start, after the check's but before
 * it has completed: when the check fails, those are left to the library
 * (the completion call does not wait for them) and the communicator is not
 * to be used again.  A persistent allreduce is checked once, at its init,
 * where MPI matches it; each start's schedule is gated by that check.
 *
 * On a mismatch every rank has every fingerprint: one message on every
 * rank naming what differs and which ranks have which value, and the error
 * (MPI_ERR_ARG when the call's arguments differ: collective, count,
 * datatype size, op, memory kind; MPI_ERR_OTHER when only collar's
 * configuration does: rules, device pointers, algorithm, chunk, form).
 * Every rank sees the same fingerprints, so either every rank fails the
 * call or none does.
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The fingerprint of one call. */
enum {
    F_COLL,     /* 1 MPI_Allreduce, 2 MPI_Iallreduce, 3 MPI_Allreduce_init */
    F_COUNT,
    F_TSIZE,    /* MPI_Type_size_x of the datatype, -1 if it has none */
    F_OP,       /* index of a predefined op, or OP_USER */
    F_MEM,      /* collar_mem_kind_t */
    F_HASH_HI,  /* collar_select_hash(), in two halves (no INT64_MIN) */
    F_HASH_LO,
    F_DEVPTR,   /* device calls: 2 the MPI library takes device
                 * pointers, 1 not (COLLAR_MPI_CUDA_AWARE); host calls 0 */
    F_ALG,      /* collar_alg_t after eligibility */
    F_CHUNK,    /* chunk in force for chunked and ring, else 0 */
    F_FORM,     /* collar_check_form_t */
    F_BUFS,     /* 1 + 4 x send kind + receive kind: for the message only */
    NF
};
/* Fields every rank must agree on: all but F_BUFS (a device send buffer
 * with a host receive buffer on one rank and device buffers on another
 * select alike: both are device calls). */
#define NCOMPARED F_BUFS

#define OP_USER 100

/* A check in flight: this rank's fingerprint, every rank's (gathered by
 * `req`), and what the message says. */
struct collar_check {
    collar_leftover_t left; /* freed pending: completed later */
    MPI_Comm    comm;       /* the application's */
    int         size;
    uint64_t    ncall;      /* the call's number among checked calls on comm */
    MPI_Request req;
    int64_t     fp[NF];
    int64_t    *all;        /* size x NF */
};

/* Checked calls on each communicator, for the messages: kept with collar's
 * local state of it (collar_usercomm_t); without one (collar's core used
 * on its own), counted over the process. */
static uint64_t next_call(MPI_Comm comm)
{
    static uint64_t process_calls;
    collar_usercomm_t *u = collar_usercomm_get(comm);
    const uint64_t n = u != NULL ? collar_usercomm_count_check(u)
                     : __atomic_add_fetch(&process_calls, 1, __ATOMIC_RELAXED);
    collar_usercomm_unref(u);
    return n;
}

/* Complete `req`, advancing collar's schedules meanwhile. */
static int check_wait(MPI_Request *req, collar_check_progress_fn_t progress)
{
    unsigned spins = 0;
    for (;;) {
        if (progress == NULL || !progress()) {
            return PMPI_Wait(req, MPI_STATUS_IGNORE);
        }
        int flag = 0;
        int rc = PMPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        if (++spins > 64) {
            sched_yield();
        }
    }
}

/* ------------------------------------------------------------ the message */

static const char *coll_name(int64_t v)
{
    return v == 3 ? "MPI_Allreduce_init" : v == 2 ? "MPI_Iallreduce"
                                                  : "MPI_Allreduce";
}

/* The predefined ops, in a fixed order: their handles differ between
 * processes (addresses in Open MPI), their index does not. */
static int64_t op_index(MPI_Op op)
{
    const MPI_Op ops[] = {
        MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR,
        MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE,
        MPI_NO_OP
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (op == ops[i]) {
            return (int64_t)i + 1;
        }
    }
    return OP_USER;
}

/* Names in the order of op_index. */
static const char *op_name(int64_t v)
{
    static const char *const names[] = {
        "?", "MPI_MAX", "MPI_MIN", "MPI_SUM", "MPI_PROD", "MPI_LAND",
        "MPI_BAND", "MPI_LOR", "MPI_BOR", "MPI_LXOR", "MPI_BXOR",
        "MPI_MAXLOC", "MPI_MINLOC", "MPI_REPLACE", "MPI_NO_OP"
    };
    if (v >= 1 && v < (int64_t)(sizeof(names) / sizeof(names[0]))) {
        return names[v];
    }
    return "a user-defined op";
}

/* What can differ, in the order a message names them: the first that
 * differs is the message, the others are listed after it. */
typedef struct {
    int         f0, f1;   /* fields compared (f1 == f0 for one field) */
    const char *what;     /* "the count" */
    int         config;   /* collar's configuration, not the arguments */
} aspect_t;

static const aspect_t aspects[] = {
    { F_COLL, F_COLL, "the collective (MPI_Allreduce, MPI_Iallreduce or "
      "MPI_Allreduce_init)", 0 },
    { F_COUNT, F_COUNT, "the count", 0 },
    { F_TSIZE, F_TSIZE, "the datatype size (MPI_Type_size, bytes)", 0 },
    { F_OP, F_OP, "the op", 0 },
    { F_MEM, F_MEM, "the memory kind of the buffers (COLLAR_DEVICE or the "
      "buffers differ between ranks)", 0 },
    { F_HASH_HI, F_HASH_LO, "the tuning rules in force (COLLAR_TUNING_FILE or "
      "COLLAR_ALLREDUCE_RULES differ between ranks)", 1 },
    { F_DEVPTR, F_DEVPTR, "whether the MPI library takes device pointers "
      "(COLLAR_MPI_CUDA_AWARE differs between ranks)", 1 },
    { F_ALG, F_ALG, "the algorithm selected (COLLAR_ALGORITHM or "
      "COLLAR_MPI_CUDA_AWARE differ between ranks)", 1 },
    { F_CHUNK, F_CHUNK, "the chunk size (COLLAR_CHUNK_SIZE differs between "
      "ranks)", 1 },
    { F_FORM, F_FORM, "the form of the call's collectives (collar's schedule "
      "or the MPI library's allreduce, on host copies or not, on which "
      "communicator)", 1 },
};
#define NASPECTS ((int)(sizeof(aspects) / sizeof(aspects[0])))

static const char *aspect_short[NASPECTS] = {
    "collective", "count", "datatype size", "op", "memory kind",
    "tuning rules", "device pointers", "algorithm", "chunk size", "form"
};

static const char *devptr_name(int64_t v)
{
    return v == 2 ? "yes" : v == 1 ? "no" : "a host call";
}

static const char *form_name(int64_t v)
{
    switch (v) {
    case COLLAR_CHECK_FORM_SCHEDULE:
        return "collar's schedule";
    case COLLAR_CHECK_FORM_LIBRARY:
        return "the MPI library's allreduce on the buffers";
    case COLLAR_CHECK_FORM_STAGED_APP:
        return "the MPI library's allreduce on host copies, on the "
               "application's communicator";
    case COLLAR_CHECK_FORM_STAGED_OWN:
        return "the MPI library's allreduce on host copies, on collar's "
               "communicator";
    default:
        return "not said";
    }
}

static int same(const aspect_t *a, const int64_t *x, const int64_t *y)
{
    return x[a->f0] == y[a->f0] && x[a->f1] == y[a->f1];
}

static void format_value(int a, const int64_t *fp, char *buf, size_t len)
{
    switch (aspects[a].f0) {
    case F_COLL:
        snprintf(buf, len, "%s", coll_name(fp[F_COLL]));
        break;
    case F_OP:
        snprintf(buf, len, "%s", op_name(fp[F_OP]));
        break;
    case F_MEM: {
        /* A rank that mixes kinds (e.g. a device send buffer and a host
         * receive buffer) says so: that is the usual cause. */
        const int64_t bufs = fp[F_BUFS] - 1;
        const int64_t skind = bufs / 4, rkind = bufs % 4;
        if (bufs >= 0 && skind != rkind) {
            snprintf(buf, len, "%s (send buffer %s, receive buffer %s)",
                     collar_mem_kind_name((collar_mem_kind_t)fp[F_MEM]),
                     collar_mem_kind_name((collar_mem_kind_t)skind),
                     collar_mem_kind_name((collar_mem_kind_t)rkind));
        } else {
            snprintf(buf, len, "%s",
                     collar_mem_kind_name((collar_mem_kind_t)fp[F_MEM]));
        }
        break;
    }
    case F_HASH_HI:
        snprintf(buf, len, "0x%08llx%08llx", (unsigned long long)fp[F_HASH_HI],
                 (unsigned long long)fp[F_HASH_LO]);
        break;
    case F_DEVPTR:
        snprintf(buf, len, "%s", devptr_name(fp[F_DEVPTR]));
        break;
    case F_ALG:
        snprintf(buf, len, "%s", collar_alg_name((collar_alg_t)fp[F_ALG]));
        break;
    case F_FORM:
        snprintf(buf, len, "%s", form_name(fp[F_FORM]));
        break;
    default:
        snprintf(buf, len, "%lld", (long long)fp[aspects[a].f0]);
        break;
    }
}

/* Append to buf (bounded; a full buffer ends in "..."). */
static void append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n >= len - *used) {
        *used = len;
        if (len > 4) {
            memcpy(buf + len - 4, "...", 4);
        }
        return;
    }
    *used += (size_t)n;
}

/* "rank 0,2-5: 1024; rank 1: 512": the ranks of each value, values in the
 * order of their lowest rank, consecutive ranks as ranges. */
#define MAX_GROUPS 8

static void format_groups(int a, const int64_t *all, int size, char *buf,
                          size_t len, size_t *used)
{
    char *seen = calloc((size_t)size, 1);
    if (seen == NULL) {
        return;
    }
    int groups = 0;
    for (int r = 0; r < size; r++) {
        if (seen[r]) {
            continue;
        }
        if (groups == MAX_GROUPS) {
            int rest = 0;
            for (int q = r; q < size; q++) {
                rest += !seen[q];
            }
            append(buf, len, used, "; %d more ranks with other values", rest);
            break;
        }
        const int64_t *v = all + (size_t)r * NF;
        append(buf, len, used, "%srank ", groups ? "; " : "");
        int first = 1;
        for (int q = r; q < size; q++) {
            if (seen[q] || !same(&aspects[a], v, all + (size_t)q * NF)) {
                continue;
            }
            int end = q;
            while (end + 1 < size && !seen[end + 1]
                   && same(&aspects[a], v, all + (size_t)(end + 1) * NF)) {
                end++;
            }
            for (int k = q; k <= end; k++) {
                seen[k] = 1;
            }
            if (end >= q + 2) {
                append(buf, len, used, "%s%d-%d", first ? "" : ",", q, end);
            } else {
                for (int k = q; k <= end; k++) {
                    append(buf, len, used, "%s%d", first && k == q ? "" : ",", k);
                }
            }
            first = 0;
            q = end;
        }
        char value[160];
        format_value(a, v, value, sizeof(value));
        append(buf, len, used, ": %s", value);
        groups++;
    }
    free(seen);
}

/* Every rank's fingerprint is in ck->all: MPI_SUCCESS when they agree,
 * else one message on this rank and the error to return. */
static int check_compare(const collar_check_t *ck)
{
    int first = -1, config_only = 1;
    char also[160] = "";
    size_t also_used = 0;
    for (int a = 0; a < NASPECTS; a++) {
        int differs = 0;
        for (int r = 1; r < ck->size && !differs; r++) {
            differs = !same(&aspects[a], ck->all, ck->all + (size_t)r * NF);
        }
        if (!differs) {
            continue;
        }
        if (!aspects[a].config) {
            config_only = 0;
        }
        if (first < 0) {
            first = a;
        } else {
            append(also, sizeof(also), &also_used, "%s%s",
                   also_used ? ", " : "", aspect_short[a]);
        }
    }
    if (first < 0) {
        return MPI_SUCCESS;
    }
    char msg[900];
    size_t used = 0;
    append(msg, sizeof(msg), &used, "COLLAR_CHECK: allreduce #%llu on %s %d-rank "
           "communicator: ranks disagree on %s: ",
           (unsigned long long)ck->ncall, collar_article_n(ck->size), ck->size,
           aspects[first].what);
    format_groups(first, ck->all, ck->size, msg, sizeof(msg), &used);
    if (also_used) {
        append(msg, sizeof(msg), &used, " (they also disagree on: %s)", also);
    }
    append(msg, sizeof(msg), &used, "; the call fails with %s",
           config_only ? "MPI_ERR_OTHER" : "MPI_ERR_ARG");
    collar_error(COLL, "%s", msg);
    return config_only ? MPI_ERR_OTHER : MPI_ERR_ARG;
}

static void fingerprint(const collar_check_call_t *call, int64_t *fp)
{
    MPI_Count tsize = -1;
    if (PMPI_Type_size_x(call->dtype, &tsize) != MPI_SUCCESS
        || tsize == MPI_UNDEFINED) {
        tsize = -1;
    }
    const uint64_t hash = collar_select_hash();
    fp[F_COLL] = call->persistent ? 3 : call->nonblocking ? 2 : 1;
    fp[F_COUNT] = (int64_t)call->count;
    fp[F_TSIZE] = (int64_t)tsize;
    fp[F_OP] = op_index(call->op);
    fp[F_MEM] = (int64_t)call->mem;
    fp[F_HASH_HI] = (int64_t)(hash >> 32);
    fp[F_HASH_LO] = (int64_t)(hash & 0xffffffffu);
    fp[F_DEVPTR] = call->devptr;
    fp[F_ALG] = (int64_t)call->alg;
    fp[F_CHUNK] = call->chunk > (size_t)INT64_MAX ? INT64_MAX : (int64_t)call->chunk;
    fp[F_FORM] = (int64_t)call->form;
    fp[F_BUFS] = 1 + 4 * (int64_t)call->smem + (int64_t)call->rmem;
}

int collar_check_start(MPI_Comm comm, const collar_check_call_t *call,
                       collar_check_t **out)
{
    *out = NULL;
    collar_leftover_poll();   /* checks of failed starts, now matched */
    int inter = 0, size = 1;
    int rc = PMPI_Comm_test_inter(comm, &inter);
    if (rc == MPI_SUCCESS && !inter) {
        rc = PMPI_Comm_size(comm, &size);
    }
    if (rc != MPI_SUCCESS || inter) {
        return rc;   /* an intercommunicator: not checked */
    }
    collar_check_t *ck = calloc(1, sizeof(*ck));
    int64_t *all = calloc((size_t)size, NF * sizeof(int64_t));
    if (ck == NULL || all == NULL) {
        free(ck);
        free(all);
        collar_error(COLL, "COLLAR_CHECK: no memory for the check of a call");
        return MPI_ERR_NO_MEM;
    }
    ck->comm = comm;
    ck->size = size;
    ck->ncall = next_call(comm);
    ck->all = all;
    ck->req = MPI_REQUEST_NULL;
    fingerprint(call, ck->fp);
    /* The same collective for every form of the call: ranks whose calls
     * differ in form (MPI_Allreduce_init here, MPI_Iallreduce there) still
     * match it, and learn that they differ. */
    rc = PMPI_Iallgather(ck->fp, NF, MPI_INT64_T, ck->all, NF, MPI_INT64_T,
                         comm, &ck->req);
    if (rc != MPI_SUCCESS) {
        collar_error(COLL, "COLLAR_CHECK: allreduce #%llu: the check cannot "
                     "start (MPI error %d)", (unsigned long long)ck->ncall, rc);
        free(ck->all);
        free(ck);
        return rc;
    }
    *out = ck;
    return MPI_SUCCESS;
}

MPI_Request *collar_check_request(collar_check_t *ck)
{
    return &ck->req;
}

int collar_check_result(const collar_check_t *ck)
{
    return check_compare(ck);
}

/* A check freed before its collective completed: its buffers go once it
 * has, and a disagreement is said then, as on the ranks whose operation
 * went on (theirs fails with it). */
static int check_left(collar_leftover_t *l, int wait)
{
    collar_check_t *ck = (collar_check_t *)((char *)l - offsetof(collar_check_t, left));
    int flag = 1;
    int rc = wait ? PMPI_Wait(&ck->req, MPI_STATUS_IGNORE)
                  : PMPI_Test(&ck->req, &flag, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && !flag) {
        return 0;
    }
    if (rc == MPI_SUCCESS) {
        (void)check_compare(ck);
    }
    free(ck->all);
    free(ck);
    return 1;
}

void collar_check_free(collar_check_t *ck)
{
    if (ck == NULL) {
        return;
    }
    if (ck->req != MPI_REQUEST_NULL) {
        /* Issued on every rank: it completes once every rank has made the
         * call, which this one does not wait for (a failed start returns
         * at once); its buffers go after. */
        collar_leftover_add(&ck->left, ck->comm, check_left);
        return;
    }
    free(ck->all);
    free(ck);
}

int collar_check_allreduce(MPI_Comm comm, const collar_check_call_t *call,
                           collar_check_progress_fn_t progress)
{
    collar_check_t *ck = NULL;
    int rc = collar_check_start(comm, call, &ck);
    if (rc == MPI_SUCCESS && ck == NULL) {
        return MPI_SUCCESS;   /* an intercommunicator: not checked */
    }
    if (rc == MPI_SUCCESS) {
        rc = check_wait(&ck->req, progress);
        if (rc != MPI_SUCCESS) {
            collar_error(COLL, "COLLAR_CHECK: allreduce #%llu: the check "
                         "failed (MPI error %d)", (unsigned long long)ck->ncall, rc);
        } else {
            rc = check_compare(ck);
        }
    }
    /* A mismatch that every rank saw in a blocking call of its own: a
     * barrier, so that every rank has said it before an error handler
     * ends the job (where some rank's call was nonblocking, that rank makes
     * no barrier). */
    int mismatch = ck != NULL && rc != MPI_SUCCESS && ck->req == MPI_REQUEST_NULL;
    for (int r = 0; mismatch && r < ck->size; r++) {
        mismatch = ck->all[(size_t)r * NF + F_COLL] == 1;
    }
    collar_check_free(ck);
    if (mismatch) {
        MPI_Request req = MPI_REQUEST_NULL;
        if (PMPI_Ibarrier(comm, &req) == MPI_SUCCESS) {
            check_wait(&req, progress);
        }
    }
    if (rc != MPI_SUCCESS) {
        PMPI_Comm_call_errhandler(comm, rc);
    }
    return rc;
}
