/*
 * collar - the conductor of one allreduce: classify its buffers, select
 * the algorithm (the tuning rules, then what the call and the communicator
 * make eligible), agree (COLLAR_CHECK), build the schedule, then run it
 * (blocking), hand it to progress behind a request (nonblocking) or keep
 * it for each MPI_Start (persistent), and record the call's statistics.
 * A small blocking schedule is kept for the next identical call (kept_t).
 * Calls collar does not take over go to the MPI library as they are, so
 * that its errors are its own.  The six entry points (src/interpose/
 * allreduce.c) come here past their short ways (collar_paths).
 */
#include "config.h"
#include "engine_int.h"

#include <stdlib.h>

/* The algorithm of the thread's last selected allreduce (-1: none yet). */
static _Thread_local int last_alg = -1;

const char *collar_engine_last_algorithm(void)
{
    return last_alg < 0 ? NULL : collar_alg_name((collar_alg_t)last_alg);
}

int collar_engine_communicators(void)
{
    return collar_comm_count();
}

static int comm_rank(MPI_Comm comm)
{
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return rank;
}

/* What the MPI library would do: for calls collar does not take over, and
 * for bad arguments, so that errors are the MPI library's own. */
static int pass_through(const collar_allreduce_args_t *a)
{
#if defined(HAVE_PMPI_ALLREDUCE_C)
    if (a->large) {
        if (a->persistent) {
            return PMPI_Allreduce_init_c(a->sbuf, a->rbuf, a->count, a->dtype,
                                         a->op, a->comm, a->info, a->request);
        }
        if (a->request != NULL) {
            return PMPI_Iallreduce_c(a->sbuf, a->rbuf, a->count, a->dtype,
                                     a->op, a->comm, a->request);
        }
        return PMPI_Allreduce_c(a->sbuf, a->rbuf, a->count, a->dtype, a->op,
                                a->comm);
    }
#endif
    const int count = (int)a->count;
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (a->persistent) {
        return PMPI_Allreduce_init(a->sbuf, a->rbuf, count, a->dtype, a->op,
                                   a->comm, a->info, a->request);
    }
#endif
    if (a->request != NULL) {
        return PMPI_Iallreduce(a->sbuf, a->rbuf, count, a->dtype, a->op, a->comm,
                               a->request);
    }
    return PMPI_Allreduce(a->sbuf, a->rbuf, count, a->dtype, a->op, a->comm);
}

static void stats_done(collar_stats_call_t *stat, double t0)
{
    stat->seconds = PMPI_Wtime() - t0;
    collar_stats_record(stat);
}

/* COLLAR_CHECK=1: what every rank must agree on for this call (plan NULL:
 * native on host memory), `form` as far as it is decided (core.h lists
 * the inputs). */
static collar_check_call_t check_call(const collar_allreduce_args_t *a,
                                      collar_mem_kind_t mem,
                                      collar_mem_kind_t smem,
                                      collar_mem_kind_t rmem,
                                      const collar_plan_t *plan,
                                      collar_check_form_t form)
{
    collar_check_call_t c = {
        .nonblocking = a->request != NULL && !a->persistent,
        .persistent = a->persistent,
        .count = a->count, .dtype = a->dtype,
        .op = a->op, .mem = mem, .smem = smem, .rmem = rmem,
        .alg = plan ? plan->alg : COLLAR_ALG_NATIVE,
        .devptr = mem == COLLAR_MEM_HOST ? 0 : collar_engine.mpi_cuda_aware ? 2 : 1,
        .form = form,
    };
    if (plan != NULL
        && (plan->alg == COLLAR_ALG_CHUNKED || plan->alg == COLLAR_ALG_RING)) {
        c.chunk = plan->chunk ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    }
    return c;
}

/* A blocking call: all ranks agree before anything of it is issued. */
static int check_agree(const collar_allreduce_args_t *a, collar_mem_kind_t mem,
                       collar_mem_kind_t smem, collar_mem_kind_t rmem,
                       const collar_plan_t *plan, collar_check_form_t form)
{
    const collar_check_call_t c = check_call(a, mem, smem, rmem, plan, form);
    return collar_check_allreduce(a->comm, &c, collar_progress_all);
}

/* A nonblocking or persistent start: the check is issued now, before
 * anything else of the call, and travels with the operation (*ck), which
 * issues nothing of collar's own schedule before it has completed on
 * every rank; an error starting it is raised. */
static int check_begin(const collar_allreduce_args_t *a, collar_mem_kind_t mem,
                       collar_mem_kind_t smem, collar_mem_kind_t rmem,
                       const collar_plan_t *plan, collar_check_form_t form,
                       collar_check_t **ck)
{
    const collar_check_call_t c = check_call(a, mem, smem, rmem, plan, form);
    int rc = collar_check_start(a->comm, &c, ck);
    if (rc != MPI_SUCCESS) {
        *a->request = MPI_REQUEST_NULL;
        PMPI_Comm_call_errhandler(a->comm, rc);
    }
    return rc;
}

/* The form of a call that collar_colls_allreduce runs (`on`: collar's
 * communicator it is given, or NULL), as that function decides it. */
static collar_check_form_t library_form(const collar_allreduce_args_t *a,
                                        collar_mem_kind_t mem,
                                        const collar_comm_t *on)
{
    if (!collar_colls_allreduce_stages(mem)) {
        return COLLAR_CHECK_FORM_LIBRARY;
    }
    /* (A blocking call runs on the application's communicator.) */
    return a->request != NULL && on != NULL && on->setup == COLLAR_COMM_READY
           ? COLLAR_CHECK_FORM_STAGED_OWN : COLLAR_CHECK_FORM_STAGED_APP;
}

/* Host buffers only (pass_all, host_direct) with statistics on: the MPI
 * library's call, timed from t0 and recorded as native on host memory,
 * without selection. */
static int native_recorded(const collar_allreduce_args_t *a,
                           collar_stats_call_t *stat, double t0)
{
    int rc = pass_through(a);
    MPI_Count size = 0;
    if (rc == MPI_SUCCESS && a->count >= 0 && !a->persistent
        && PMPI_Type_size_x(a->dtype, &size) == MPI_SUCCESS) {
        stat->alg = COLLAR_ALG_NATIVE;
        stat->mem = COLLAR_MEM_HOST;
        stat->bytes = (size_t)a->count * (size_t)size;
        stats_done(stat, t0);
    }
    return rc;
}

/* A call collar does not take over (nothing to move, an intercommunicator,
 * bad arguments): the MPI library's own, counted as native. */
static int pass_counted(const collar_allreduce_args_t *a,
                        collar_stats_call_t *stat, double t0)
{
    const MPI_Count count = a->count;
    if (count == 0 && collar_cfg.check && a->comm != MPI_COMM_NULL
        && a->dtype != MPI_DATATYPE_NULL && a->op != MPI_OP_NULL
        && a->rbuf != MPI_IN_PLACE) {
        /* Count 0 is checked too (intercommunicators are not). */
        if (a->request != NULL) {
            collar_check_t *ck = NULL;
            int rc = check_begin(a, COLLAR_MEM_HOST, COLLAR_MEM_HOST,
                                 COLLAR_MEM_HOST, NULL,
                                 COLLAR_CHECK_FORM_LIBRARY, &ck);
            if (rc != MPI_SUCCESS || ck != NULL) {
                return rc != MPI_SUCCESS ? rc : collar_colls_allreduce(a, ck, stat, NULL);
            }
        } else {
            int rc = check_agree(a, COLLAR_MEM_HOST, COLLAR_MEM_HOST,
                                 COLLAR_MEM_HOST, NULL,
                                 COLLAR_CHECK_FORM_LIBRARY);
            if (rc != MPI_SUCCESS) {
                return rc;
            }
        }
    }
    int rc = pass_through(a);
    if (stat != NULL && rc == MPI_SUCCESS && count >= 0 && !a->persistent) {
        stat->alg = COLLAR_ALG_NATIVE;
        stat->mem = COLLAR_MEM_HOST;
        if (a->rbuf != MPI_IN_PLACE) {
            collar_mem_classify(collar_engine.dev, a->rbuf, &stat->mem);
        }
        MPI_Count size = 0;
        PMPI_Type_size_x(a->dtype, &size);
        stat->bytes = (size_t)count * (size_t)size;
        stats_done(stat, t0);
    }
    return rc;
}

/* The plan of a call is known: said (ipc and hier say it from their
 * schedule, once their IPC memory is known to work or not:
 * collar_ipc_start), kept for collar_last_algorithm, and in the call's
 * statistics record. */
static void plan_chosen(MPI_Comm comm, const collar_select_key_t *key,
                        const collar_plan_t *plan, const collar_call_t *call,
                        collar_stats_call_t *stat)
{
    if (plan->alg != COLLAR_ALG_IPC && plan->alg != COLLAR_ALG_HIER) {
        collar_algo_log_choice(comm_rank(comm), key, plan, NULL);
    }
    last_alg = (int)plan->alg;
    if (stat != NULL) {
        stat->alg = plan->alg;
        stat->mem = call->mem;
        stat->bytes = call->bytes;
        if (plan->fallback != NULL) {
            collar_stats_fallback(plan->fallback);
        }
    }
}

/*
 * The last small blocking schedule run on a communicator, kept on collar's
 * state of it (cstate->kept) for the next call with the same arguments and
 * plan: rewound and run again (collar_sched_rewind) instead of built and
 * freed, its staging held meanwhile.  A program that repeats one small
 * allreduce (an optimizer step's scalar, a loss) pays neither the
 * schedule's allocations nor the staging pool's lock per call.  Only a
 * staged or chunked schedule whose collectives block (one chunk), of at
 * most KEEP_MAX bytes, that ran through on its own
 * staging; not with the staging pool off (COLLAR_STAGING_POOL=0 asks for
 * an allocation per call) nor under observation (which notes each call's
 * buffers).  A kept schedule holds no reference on the state (it would
 * never be freed): it is released with it.
 */
enum { KEEP_MAX = 64 * 1024 };

typedef struct {
    collar_sched_t *s;      /* NULL: taken by the call running it */
    collar_call_t   call;
    collar_alg_t    alg;
    size_t          chunk;
} kept_t;

/* The same call as far as its schedule goes: buffers, count, the datatype's
 * layout (a handle freed and made again may name another one), op. */
static int same_call(const collar_call_t *a, const collar_call_t *b)
{
    return a->sbuf == b->sbuf && a->rbuf == b->rbuf && a->count == b->count
           && a->dtype == b->dtype && a->op == b->op && a->in_place == b->in_place
           && a->type_size == b->type_size && a->bytes == b->bytes
           && a->lo == b->lo && a->span == b->span && a->dense == b->dense
           && a->extent == b->extent && a->true_extent == b->true_extent
           && a->cdt == b->cdt && a->cop == b->cop && a->mem == b->mem
           && a->dev == b->dev && a->blocking == b->blocking;
}

static void kept_destroy(collar_sched_t *s)
{
    s->comm = NULL;   /* its reference was dropped when it was kept */
    collar_sched_destroy(s);
}

static void kept_release(void *p)
{
    kept_t *k = p;
    if (k->s != NULL) {
        kept_destroy(k->s);
    }
    free(k);
}

/* The kept schedule of this call, rewound (NULL: none fits). */
static collar_sched_t *kept_take(collar_comm_t *c, const collar_call_t *call,
                                 const collar_plan_t *plan)
{
    kept_t *k = c->kept;
    if (k == NULL || k->s == NULL || k->alg != plan->alg
        || k->chunk != plan->chunk || !same_call(&k->call, call)) {
        return NULL;
    }
    collar_sched_t *s = k->s;
    k->s = NULL;
    collar_comm_ref(c);
    collar_sched_rewind(s);
    s->seq = c->next_seq++;   /* as collar_sched_create: alike on every rank */
    return s;
}

/* After its blocking run: keep `s` for the next call (1), or not (0: the
 * caller destroys it). */
static int kept_put(collar_comm_t *c, collar_sched_t *s,
                    const collar_call_t *call, const collar_plan_t *plan)
{
    if (!s->run_here || s->status != COLLAR_OK || call->bytes > KEEP_MAX
        || collar_cfg.staging_pool == 0 || collar_observe
        || (plan->alg != COLLAR_ALG_STAGED && plan->alg != COLLAR_ALG_CHUNKED)) {
        return 0;   /* ipc's: its region is the communicator's latest */
    }
    for (int i = 0; i < s->nstaging; i++) {
        if (s->staging_kind[i] == COLLAR_SLOT_HEAP
            || s->staging_kind[i] == COLLAR_SLOT_DRAIN) {
            return 0;   /* for want of pinned memory: the next call asks again */
        }
    }
    kept_t *k = c->kept;
    if (k == NULL) {
        k = calloc(1, sizeof(*k));
        if (k == NULL) {
            return 0;
        }
        c->kept = k;
        c->kept_release = kept_release;
    }
    if (k->s != NULL) {
        kept_destroy(k->s);
    }
    k->s = s;
    k->call = *call;
    k->alg = plan->alg;
    k->chunk = plan->chunk;
    /* Not the last reference: the caller is inside a call on the
     * communicator, whose attribute holds one. */
    collar_comm_unref(c);
    return 1;
}

/*
 * The form of a call: collar's schedule on its own communicator
 * (FORM_SCHEDULE); or, for a reason, the MPI library's own collective of
 * the same form on host copies (collar_colls_allreduce: on collar's
 * communicator where nothing else of collar's issues collectives there,
 * else on the application's), or on the buffers themselves where the MPI
 * library takes device pointers or they are host memory.  The info line
 * says both the plan it replaces and what runs (form_fallback).
 *
 * MPI's progress rule by construction: once a nonblocking or persistent
 * start has returned, no other rank may depend on collar's code running
 * again on this rank before the completion call, whatever MPI call this
 * rank sits in meanwhile (a blocking collective, a probe loop, RMA, a
 * call of another library through PMPI_, another thread).  A schedule of
 * collar's issues its messages and collectives as it advances, so a
 * nonblocking call runs one only where that advance is guaranteed: every
 * rank of the communicator runs the progress thread (all_threaded, agreed
 * when collar's communicator is made).  Elsewhere its copies in are done
 * in the start, the library's nonblocking collective carries the data,
 * and the copies out wait for the completion call: nothing of it waits
 * for collar.
 *
 * A persistent allreduce is matched at its init (MPI-4.0 section 6.13):
 * the ranks may start their persistent operations in any order.  Its
 * library form is the library's persistent collective, made at the init,
 * so that everything it issues is fixed then; a schedule of collar's
 * would take its turn among the communicator's operations at each start.
 */
enum { FORM_SCHEDULE, FORM_PERSISTENT, FORM_NO_COMM, FORM_NOT_YET,
       FORM_NO_THREAD };

/* Why a call takes the library's form. */
static const char *const form_why[] = {
    [FORM_PERSISTENT] = "a persistent allreduce is matched at its init, "
        "where the MPI library's persistent collective is made",
    [FORM_NO_COMM] = "the MPI library gives collar no communicator of its own",
    [FORM_NOT_YET] = "collar's own communicator is made by the first "
        "blocking allreduce on it",
    [FORM_NO_THREAD] = "without collar's progress thread on every rank, a "
        "nonblocking allreduce is one the MPI library alone carries to the "
        "completion call (COLLAR_PROGRESS)",
};

/* The fallback of a call whose plan (`from`) the library's form replaced,
 * in buf: "ipc -> the MPI library's nonblocking allreduce on host copies,
 * on collar's communicator: why".  `staged`: on host copies (else on the
 * buffers themselves); `own`: on collar's communicator. */
static const char *form_fallback(const collar_allreduce_args_t *a, int form,
                                 collar_alg_t from, int staged, int own,
                                 collar_mem_kind_t mem, char *buf, size_t len)
{
    const char *kind = a->persistent ? "persistent " : a->request != NULL
                       ? "nonblocking " : "";
    if (staged) {
        snprintf(buf, len, "%s -> the MPI library's %sallreduce on host copies, "
                 "on %s communicator: %s", collar_alg_name(from), kind,
                 own ? "collar's" : "the application's", form_why[form]);
    } else {
        snprintf(buf, len, "%s -> the MPI library's %sallreduce on the %s "
                 "buffers: %s", collar_alg_name(from), kind,
                 mem == COLLAR_MEM_HOST ? "host" : "device", form_why[form]);
    }
    return buf;
}

static int form_of(const collar_allreduce_args_t *a, const collar_comm_t *c)
{
    if (a->persistent) {
        return FORM_PERSISTENT;
    }
    if (c->setup == COLLAR_COMM_NONE) {
        return FORM_NO_COMM;
    }
    if (a->request == NULL) {
        return FORM_SCHEDULE;
    }
    if (c->setup != COLLAR_COMM_READY) {
        return FORM_NOT_YET;
    }
    return c->all_threaded ? FORM_SCHEDULE : FORM_NO_THREAD;
}

/* An allreduce collar may take over: its buffers are classified (rkind,
 * skind), and it is not a host call that host_direct hands on.  Apart from
 * collar_allreduce so that the short ways there pay for none of this
 * frame. */
__attribute__((noinline))
static int allreduce_run(const collar_allreduce_args_t *a,
                         collar_stats_call_t *stat, double t0,
                         collar_mem_kind_t rkind, collar_mem_kind_t skind)
{
    const void *sbuf = a->sbuf;
    void *rbuf = a->rbuf;
    const MPI_Count count = a->count;
    const MPI_Datatype dtype = a->dtype;
    const MPI_Op op = a->op;
    const MPI_Comm comm = a->comm;
    MPI_Request *request = a->request;
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) {
        return pass_counted(a, stat, t0);
    }
    collar_call_t call = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .in_place = sbuf == MPI_IN_PLACE,
        .persistent = a->persistent,
    };
    if (collar_call_describe(&call) != COLLAR_OK) {
        return pass_through(a);
    }
    call.mem = (rkind != COLLAR_MEM_HOST || skind != COLLAR_MEM_HOST)
               ? COLLAR_MEM_DEVICE : COLLAR_MEM_HOST;
    call.rmem = rkind;
    call.dev = collar_engine.dev;
    call.blocking = request == NULL && !a->persistent;

    collar_select_key_t key = {
        .coll = COLLAR_COLL_ALLREDUCE,
        .mem = call.mem,
        .bytes = call.bytes,
        .reducible = call.cdt != COLLAR_DT_NONE && call.cop != COLLAR_OP_NONE
                     && collar_reduce_supported(call.cdt, call.cop),
    };
    PMPI_Comm_size(comm, &key.comm_size);
    /* The node shape, from collar's state of the communicator: made here
     * without communication if this is its first call (the private
     * communicator comes below, from a blocking call). */
    collar_comm_t *shape_of = NULL;
    if (collar_comm_get(comm, 0, &shape_of) != COLLAR_OK) {
        shape_of = NULL;
    }
    collar_comm_shape(shape_of, &key);
    collar_plan_t plan;
    collar_select(&key, &plan);
    collar_algo_eligible(&call, collar_engine.mpi_cuda_aware, &plan);
    const collar_mem_kind_t smem = call.in_place ? rkind : skind;
    collar_algo_build_fn_t build = collar_algo_builder(plan.alg);
    if (collar_cfg.check && request == NULL) {
        /* Before collar's communicator (made below, by what the ranks
         * agree on): the form as the plan has it. */
        int rc = check_agree(a, call.mem, smem, rkind, &plan,
                             build != NULL ? COLLAR_CHECK_FORM_SCHEDULE
                                           : COLLAR_CHECK_FORM_LIBRARY);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    if (build == NULL && collar_cfg.check && request != NULL) {
        /* Native, checked: the library's collective behind collar's
         * request, which returns the check's error. */
        plan_chosen(comm, &key, &plan, &call, stat);
        collar_check_t *ck = NULL;
        int rc = check_begin(a, call.mem, smem, rkind, &plan,
                             library_form(a, call.mem, NULL), &ck);
        return rc != MPI_SUCCESS ? rc : collar_colls_allreduce(a, ck, stat, NULL);
    }
    if (build == NULL) {
        plan_chosen(comm, &key, &plan, &call, stat);
        int rc = pass_through(a);
        if (stat != NULL && !a->persistent) {
            /* For a native MPI_Iallreduce this is the time to start it: the
             * MPI library completes it (docs/stats.md). */
            stats_done(stat, t0);
        }
        return rc;
    }
    if (collar_call_validate(&call) != COLLAR_OK) {
        return pass_through(a);
    }

    /* The private communicator: made by a blocking allreduce, never by a
     * nonblocking or persistent start, which would wait for the other
     * ranks (collar_comm_get).  Whether every rank runs the progress
     * thread is agreed there, so it is started first. */
    const int blocking = request == NULL;
    collar_comm_t *cstate = shape_of;
    collar_status_t st = COLLAR_OK;
    if (cstate == NULL || (blocking && cstate->setup == COLLAR_COMM_LATER)) {
        if (blocking) {
            collar_progress_thread_ready();
        }
        st = collar_comm_get(comm, blocking, &cstate);
    }
    const int form = st == COLLAR_OK ? form_of(a, cstate) : FORM_SCHEDULE;
    char fallback[400];   /* plan.fallback of the library's form */
    /* The library's form runs on collar's communicator where nothing else
     * of collar's issues collectives there meanwhile. */
    collar_comm_t *on = st == COLLAR_OK && cstate->setup == COLLAR_COMM_READY
                        && !cstate->all_threaded ? cstate : NULL;
    if (form != FORM_SCHEDULE) {
        /* The application's own collective on host copies of the device
         * buffers (collar_colls_allreduce), or on the buffers themselves
         * where the MPI library takes device pointers, which the MPI
         * library alone carries from the start to the completion call:
         * what staged does (native, on host buffers), so only another
         * plan falls back. */
        const int staged = collar_colls_allreduce_stages(call.mem);
        const collar_alg_t alg = staged ? COLLAR_ALG_STAGED : COLLAR_ALG_NATIVE;
        if (plan.alg != alg) {
            plan.fallback = form_fallback(a, form, plan.alg, staged,
                                          library_form(a, call.mem, on)
                                          == COLLAR_CHECK_FORM_STAGED_OWN,
                                          call.mem, fallback, sizeof(fallback));
            plan.alg = alg;
        }
        build = NULL;
    } else if (st == COLLAR_OK) {
        /* ipc: one node; hier: its communicators, made by a blocking
         * call.  Both known alike on every rank. */
        collar_algo_ipc_eligible(&call, cstate, &plan);
        collar_algo_hier_eligible(&call, cstate, blocking, collar_run_in_turn,
                                  &plan);
        collar_algo_nccl_eligible(&call, cstate, blocking, collar_run_in_turn,
                                  &plan);
        build = collar_algo_builder(plan.alg);
    }
    plan_chosen(comm, &key, &plan, &call, stat);
    collar_check_t *ck = NULL;
    if (st == COLLAR_OK && collar_cfg.check && request != NULL) {
        int rc = check_begin(a, call.mem, smem, rkind, &plan,
                             build == NULL ? library_form(a, call.mem, on)
                                           : COLLAR_CHECK_FORM_SCHEDULE, &ck);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    if (build == NULL && st == COLLAR_OK) {
        return collar_colls_allreduce(a, ck, stat, on);
    }

    collar_sched_t *s = NULL;
    const int reused = st == COLLAR_OK && call.blocking
                       && (s = kept_take(cstate, &call, &plan)) != NULL;
    if (st == COLLAR_OK && !reused) {
        st = collar_sched_create(cstate, collar_engine.dev, &s);
    }
    if (st == COLLAR_OK) {
        s->check = ck;   /* it gates the schedule; freed with it */
        ck = NULL;
        if (stat != NULL) {
            s->stats = *stat;
        }
        /* ipc and hier change it when their IPC memory fails (collar_ipc_start). */
        s->stats.coll = COLLAR_COLL_ALLREDUCE;
        s->stats.alg = plan.alg;
        s->stats.mem = call.mem;
        s->stats.bytes = call.bytes;
        if (collar_observe) {
            const char *send = call.in_place ? (const char *)rbuf
                                             : (const char *)sbuf;
            collar_sched_observe_buffers(s, send + call.lo, call.span,
                                         (char *)rbuf + call.lo, call.span);
        }
        if (!reused) {
            st = build(&call, &plan, s);
        }
        if (st == COLLAR_OK && stat != NULL) {
            stat->alg = s->stats.alg;
        }
        last_alg = (int)s->stats.alg;
    }
    if (st != COLLAR_OK) {
        collar_error(COLL, "cannot run allreduce with %s: %s",
                     collar_alg_name(plan.alg), collar_status_string(st));
        /* (A nonblocking start's check, issued, completes later without
         * this start waiting for it: collar_check_free.) */
        collar_check_free(ck);
        collar_sched_destroy(s);
        PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    collar_sched_start(s);

    if (request != NULL) {
        if (stat != NULL) {
            s->stats = *stat;
            s->stats_t0 = t0;
            s->stats_on = 1;
        }
        st = collar_run_nonblocking(s, comm, request);
        if (st != COLLAR_OK) {
            /* The schedule is started: it runs on, failed and with no
             * request, so that the other ranks, which issue their side,
             * are not left waiting (they learn of the failure from its
             * status agreement); the start does not wait for them. */
            collar_error(COLL, "cannot create the request of a nonblocking "
                         "allreduce: %s; the operation fails here and on "
                         "the other ranks", collar_status_string(st));
            s->stats_on = 0;
            collar_sched_fail(s, st);
            collar_run_detached(s);
            *request = MPI_REQUEST_NULL;
            PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
            return MPI_ERR_OTHER;
        }
        return MPI_SUCCESS;
    }

    collar_run_blocking(s);
    int rc = s->status == COLLAR_OK ? MPI_SUCCESS : s->mpi_error;
    if (stat != NULL) {
        stat->alg = s->stats.alg;
    }
    last_alg = (int)s->stats.alg;
    if (!kept_put(cstate, s, &call, &plan)) {
        collar_sched_destroy(s);
    }
    if (stat != NULL) {
        stats_done(stat, t0);
    }
    if (rc != MPI_SUCCESS) {
        PMPI_Comm_call_errhandler(comm, rc);
    }
    return rc;
}

/* Arguments collar looks at; the others go to the MPI library as they are
 * (pass_counted), so that it reports what is wrong with them. */
static inline int args_usable(const void *rbuf, MPI_Count count,
                              MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    return comm != MPI_COMM_NULL && count > 0 && dtype != MPI_DATATYPE_NULL
           && op != MPI_OP_NULL && rbuf != MPI_IN_PLACE;
}

/* The memory kinds of a call's buffers (sbuf MPI_IN_PLACE: host, only rbuf
 * is looked at). */
static inline collar_status_t classify_buffers(const void *sbuf,
                                               const void *rbuf,
                                               collar_mem_kind_t *rkind,
                                               collar_mem_kind_t *skind)
{
    *skind = COLLAR_MEM_HOST;
    COLLAR_CHECK(collar_mem_classify(collar_engine.dev, rbuf, rkind));
    return sbuf == MPI_IN_PLACE ? COLLAR_OK : collar_mem_classify(collar_engine.dev, sbuf,
                                                            skind);
}

int collar_allreduce(const collar_allreduce_args_t *a, collar_stats_call_t *stat)
{
    const double t0 = stat != NULL ? PMPI_Wtime() : 0.0;
    if (!args_usable(a->rbuf, a->count, a->dtype, a->op, a->comm)) {
        return pass_counted(a, stat, t0);
    }
    collar_mem_kind_t rkind, skind;
    if (classify_buffers(a->sbuf, a->rbuf, &rkind, &skind) != COLLAR_OK) {
        return pass_through(a);
    }
    if (collar_engine.host_direct && rkind == COLLAR_MEM_HOST && skind == COLLAR_MEM_HOST) {
        /* Native whatever the communicator (an intercommunicator too) and
         * the size: the MPI library's call, now, before any other
         * question about the call is asked of the MPI library. */
        return stat != NULL ? native_recorded(a, stat, t0) : pass_through(a);
    }
    return allreduce_run(a, stat, t0, rkind, skind);
}

/* Every allreduce entry point past its short way.  With statistics on, the call site
 * is taken here (frames inside libcollar.so are not the application's and
 * are skipped). */
int collar_allreduce_intercept(const collar_allreduce_args_t *a)
{
    if (!collar_stats_on) {
        return collar_allreduce(a, NULL);
    }
    collar_stats_call_t stat = { .coll = COLLAR_COLL_ALLREDUCE };
    stat.npcs = collar_stats_callsite(stat.pcs, COLLAR_STATS_MAX_DEPTH, 1);
    if (collar_engine.pass_all) {
        return native_recorded(a, &stat, PMPI_Wtime());
    }
    return collar_allreduce(a, &stat);
}

/* The blocking and nonblocking bindings past their short ways (apart, so
 * that those need no stack frame). */
int collar_allreduce_call(const void *sbuf, void *rbuf, MPI_Count count,
                          MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                          MPI_Request *request, int large)
{
    const collar_allreduce_args_t a = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .request = request, .large = large,
    };
    return collar_allreduce_intercept(&a);
}
