/*
 * collar - the consistency check (COLLAR_CHECK=1).
 *
 * A collective library that runs different algorithms on different ranks
 * hangs the job without a word.  With the check on, every intercepted
 * allreduce first compares, over all ranks of the communicator, a fingerprint
 * of what this rank is about to do: the collective, count, datatype size, op,
 * memory kind, the hash of the rules in force and the algorithm and chunk
 * selected.  Cost: one small allreduce per call, PMPI_Iallreduce of 2 x 9
 * int64 values (MPI_MAX over the values and their negations gives the
 * maximum and the minimum of each at once), then a wait.  Only on a
 * mismatch: one PMPI_Iallgather of the fingerprints (to name which ranks
 * have which value), one message on every rank, one
 * barrier (so that every rank has said it before an error handler aborts the
 * job), and the error through the user communicator's error handler:
 * MPI_ERR_ARG when the call's arguments differ (collective, count, datatype
 * size, op, memory kind), MPI_ERR_OTHER when only collar's configuration
 * does (rules, algorithm, chunk).  Every rank sees the same result of the
 * check, so either every rank fails the call or none does.
 *
 * The check runs on a second duplicate of the user's communicator, made on
 * the first checked call and cached in an attribute of its own: it never
 * shares a communicator with the schedules' internal collectives, whose
 * issue order is collar's business, nor with the user's traffic.  The
 * check's collectives are nonblocking and the wait for them advances
 * collar's schedules, so that a rank waiting in the check still does its
 * part of its earlier, outstanding operations (a blocking PMPI_Allreduce
 * here would deadlock against a rank that waits for one of them).
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The fingerprint of one call. */
enum {
    F_COLL,     /* 1 MPI_Allreduce, 2 MPI_Iallreduce */
    F_COUNT,
    F_TSIZE,    /* MPI_Type_size of the datatype, -1 if it has none */
    F_OP,       /* index of a predefined op, or OP_USER */
    F_MEM,      /* collar_mem_kind_t */
    F_HASH_HI,  /* collar_select_hash(), in two halves (no INT64_MIN) */
    F_HASH_LO,
    F_ALG,      /* collar_alg_t after eligibility */
    F_CHUNK,    /* chunk in force for chunked and ring, else 0 */
    F_BUFS,     /* 1 + 4 x send kind + receive kind: for the message only */
    NF
};
/* Fields every rank must agree on: all but F_BUFS (a device send buffer
 * with a host receive buffer on one rank and device buffers on another
 * select alike: both are device calls). */
#define NCOMPARED F_BUFS

#define OP_USER 100

/* The state of the check for one user communicator. */
typedef struct {
    MPI_Comm comm;    /* the check's duplicate; MPI_COMM_NULL: not checked */
    int      size;
    uint64_t ncalls;  /* checked calls so far */
} check_state_t;

static int check_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t check_once = PTHREAD_ONCE_INIT;

static int check_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    check_state_t *st = attr;
    if (st != NULL) {
        if (st->comm != MPI_COMM_NULL) {
            PMPI_Comm_free(&st->comm);
        }
        free(st);
    }
    return MPI_SUCCESS;
}

static void check_keyval_create(void)
{
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, check_delete_fn,
                                &check_keyval, NULL) != MPI_SUCCESS) {
        check_keyval = MPI_KEYVAL_INVALID;
    }
}

void collar_check_finalize(void)
{
    if (check_keyval == MPI_KEYVAL_INVALID) {
        return;
    }
    MPI_Comm predefined[2] = { MPI_COMM_WORLD, MPI_COMM_SELF };
    for (int i = 0; i < 2; i++) {
        void *attr;
        int flag = 0;
        if (PMPI_Comm_get_attr(predefined[i], check_keyval, &attr, &flag) == MPI_SUCCESS
            && flag) {
            PMPI_Comm_delete_attr(predefined[i], check_keyval);
        }
    }
    PMPI_Comm_free_keyval(&check_keyval);
    check_keyval = MPI_KEYVAL_INVALID;
}

/* The check's state of `comm`, made on first use (collective over comm:
 * every rank reaches the check of the same first call). */
static int check_state(MPI_Comm comm, check_state_t **out)
{
    pthread_once(&check_once, check_keyval_create);
    if (check_keyval == MPI_KEYVAL_INVALID) {
        return MPI_ERR_OTHER;
    }
    void *attr = NULL;
    int flag = 0;
    int rc = PMPI_Comm_get_attr(comm, check_keyval, &attr, &flag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (flag) {
        *out = attr;
        return MPI_SUCCESS;
    }
    check_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return MPI_ERR_NO_MEM;
    }
    st->comm = MPI_COMM_NULL;
    int inter = 0;
    rc = PMPI_Comm_test_inter(comm, &inter);
    if (rc == MPI_SUCCESS && !inter) {
        /* No PMPI_Comm_dup: it would run the user's attribute copy
         * callbacks. */
        rc = collar_comm_dup_private(comm, &st->comm) == COLLAR_OK
             ? MPI_SUCCESS : MPI_ERR_OTHER;
        if (rc == MPI_SUCCESS) {
            PMPI_Comm_size(comm, &st->size);
        }
    }
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_set_attr(comm, check_keyval, st);
    }
    if (rc != MPI_SUCCESS) {
        if (st->comm != MPI_COMM_NULL) {
            PMPI_Comm_free(&st->comm);
        }
        free(st);
        return rc;
    }
    *out = st;
    return MPI_SUCCESS;
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
    return v == 2 ? "MPI_Iallreduce" : "MPI_Allreduce";
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
    { F_COLL, F_COLL, "the collective (MPI_Allreduce or MPI_Iallreduce)", 0 },
    { F_COUNT, F_COUNT, "the count", 0 },
    { F_TSIZE, F_TSIZE, "the datatype size (MPI_Type_size, bytes)", 0 },
    { F_OP, F_OP, "the op", 0 },
    { F_MEM, F_MEM, "the memory kind of the buffers (COLLAR_DEVICE or the "
      "buffers differ between ranks)", 0 },
    { F_HASH_HI, F_HASH_LO, "the tuning rules in force (COLLAR_TUNING_FILE or "
      "COLLAR_ALLREDUCE_RULES differ between ranks)", 1 },
    { F_ALG, F_ALG, "the algorithm selected (COLLAR_ALGORITHM or "
      "COLLAR_MPI_CUDA_AWARE differ between ranks)", 1 },
    { F_CHUNK, F_CHUNK, "the chunk size (COLLAR_CHUNK_SIZE differs between "
      "ranks)", 1 },
};
#define NASPECTS ((int)(sizeof(aspects) / sizeof(aspects[0])))

static const char *aspect_short[NASPECTS] = {
    "collective", "count", "datatype size", "op", "memory kind",
    "tuning rules", "algorithm", "chunk size"
};

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
    case F_ALG:
        snprintf(buf, len, "%s", collar_alg_name((collar_alg_t)fp[F_ALG]));
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
        char value[64];
        format_value(a, v, value, sizeof(value));
        append(buf, len, used, ": %s", value);
        groups++;
    }
    free(seen);
}

/* The error path: who has what, one message on every rank. */
static int check_report(MPI_Comm comm, check_state_t *st, const int64_t *fp,
                        const int64_t *minmax,
                        collar_check_progress_fn_t progress)
{
    const int64_t *max = minmax, *negmin = minmax + NF;
    int first = -1, config_only = 1;
    char also[160] = "";
    size_t also_used = 0;
    for (int a = 0; a < NASPECTS; a++) {
        if (max[aspects[a].f0] == -negmin[aspects[a].f0]
            && max[aspects[a].f1] == -negmin[aspects[a].f1]) {
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
    const int code = config_only ? MPI_ERR_OTHER : MPI_ERR_ARG;

    int64_t *all = malloc((size_t)st->size * NF * sizeof(int64_t));
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = all == NULL ? MPI_ERR_NO_MEM
             : PMPI_Iallgather(fp, NF, MPI_INT64_T, all, NF, MPI_INT64_T,
                               st->comm, &req);
    if (rc == MPI_SUCCESS) {
        rc = check_wait(&req, progress);
    }
    char msg[900];
    size_t used = 0;
    append(msg, sizeof(msg), &used, "COLLAR_CHECK: allreduce #%llu on a %d-rank "
           "communicator: ranks disagree on %s: ",
           (unsigned long long)st->ncalls, st->size, aspects[first].what);
    if (rc == MPI_SUCCESS) {
        format_groups(first, all, st->size, msg, sizeof(msg), &used);
    } else {
        char value[64];
        format_value(first, fp, value, sizeof(value));
        append(msg, sizeof(msg), &used, "this rank: %s (the other values "
               "could not be gathered: MPI error %d)", value, rc);
    }
    if (also_used) {
        append(msg, sizeof(msg), &used, " (they also disagree on: %s)", also);
    }
    append(msg, sizeof(msg), &used, "; the call fails with %s",
           config_only ? "MPI_ERR_OTHER" : "MPI_ERR_ARG");
    collar_error(COLL, "%s", msg);
    free(all);

    /* Every rank has said it before any error handler ends the job. */
    req = MPI_REQUEST_NULL;
    if (PMPI_Ibarrier(st->comm, &req) == MPI_SUCCESS) {
        check_wait(&req, progress);
    }
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

int collar_check_allreduce(MPI_Comm comm, const collar_check_call_t *call,
                           collar_check_progress_fn_t progress)
{
    check_state_t *st = NULL;
    int rc = check_state(comm, &st);
    if (rc != MPI_SUCCESS) {
        collar_error(COLL, "COLLAR_CHECK: cannot set up the check of a "
                     "communicator (MPI error %d)", rc);
        PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    if (st->comm == MPI_COMM_NULL) {
        return MPI_SUCCESS;  /* an intercommunicator: not checked */
    }
    st->ncalls++;
    if (st->size < 2) {
        return MPI_SUCCESS;
    }

    int tsize = -1;
    if (PMPI_Type_size(call->dtype, &tsize) != MPI_SUCCESS) {
        tsize = -1;
    }
    const uint64_t hash = collar_select_hash();
    int64_t fp[NF], in[2 * NF], out[2 * NF];
    fp[F_COLL] = call->nonblocking ? 2 : 1;
    fp[F_COUNT] = call->count;
    fp[F_TSIZE] = tsize;
    fp[F_OP] = op_index(call->op);
    fp[F_MEM] = (int64_t)call->mem;
    fp[F_HASH_HI] = (int64_t)(hash >> 32);
    fp[F_HASH_LO] = (int64_t)(hash & 0xffffffffu);
    fp[F_ALG] = (int64_t)call->alg;
    fp[F_CHUNK] = call->chunk > (size_t)INT64_MAX ? INT64_MAX : (int64_t)call->chunk;
    fp[F_BUFS] = 1 + 4 * (int64_t)call->smem + (int64_t)call->rmem;
    for (int i = 0; i < NF; i++) {
        in[i] = fp[i];
        in[NF + i] = -fp[i];
    }

    /* Nonblocking on every rank (a blocking collective would not match a
     * nonblocking one on another rank): the wait advances collar's
     * outstanding schedules, or is PMPI_Wait when there are none. */
    MPI_Request req = MPI_REQUEST_NULL;
    rc = PMPI_Iallreduce(in, out, 2 * NF, MPI_INT64_T, MPI_MAX, st->comm, &req);
    if (rc == MPI_SUCCESS) {
        rc = check_wait(&req, progress);
    }
    if (rc != MPI_SUCCESS) {
        collar_error(COLL, "COLLAR_CHECK: allreduce #%llu: the check failed "
                     "(MPI error %d)", (unsigned long long)st->ncalls, rc);
        PMPI_Comm_call_errhandler(comm, rc);
        return rc;
    }
    for (int i = 0; i < NCOMPARED; i++) {
        if (out[i] != -out[NF + i]) {
            return check_report(comm, st, fp, out, progress);
        }
    }
    return MPI_SUCCESS;
}
