/* collar tests - one call of a collective in any of its bindings (colls_forms.h). */
#include "config.h"
#include "colls_forms.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static tf_form_t form = TF_BLOCKING;
static unsigned completions;

void tf_set_form(tf_form_t f)
{
    form = f;
}

tf_form_t tf_form(void)
{
    return form;
}

static const char *const form_names[TF_FORMS] = {
    "blocking", "nonblocking", "persistent", "large"
};

const char *tf_form_name(tf_form_t f)
{
    return f < TF_FORMS ? form_names[f] : "unknown";
}

int tf_form_from_name(const char *name)
{
    for (int f = 0; f < TF_FORMS; f++) {
        if (strcmp(name, form_names[f]) == 0) {
            return f;
        }
    }
    return -1;
}

int tf_form_available(tf_form_t f)
{
#if !defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (f == TF_PERSISTENT) {
        return 0;
    }
#endif
#if !defined(HAVE_PMPI_ALLREDUCE_C)
    if (f == TF_LARGE) {
        return 0;
    }
#endif
    (void)f;
    return 1;
}

/* Complete a nonblocking or started persistent request, each completion
 * call in turn. */
int tf_complete(MPI_Request *req)
{
    int flag = 0, rc;
    /* Persistent requests of collar's are not completed by PMPI_Wait in
     * one thread while collar's progress thread finishes them under
     * MPICH 4.0 (docs/collectives.md): the three C completion calls.
     * PMPI_Wait, which collar does not see, completes collar's nonblocking
     * operations through the progress thread, which runs where the MPI
     * library gives MPI_THREAD_MULTIPLE (COLLAR_PROGRESS, README). */
    static int lib_level = -1;
    if (lib_level < 0) {
        PMPI_Query_thread(&lib_level);
    }
    const int pmpi_wait = form != TF_PERSISTENT
                          && lib_level >= MPI_THREAD_MULTIPLE;
    switch (completions++ % (pmpi_wait ? 4 : 3)) {
    case 0:
        return MPI_Wait(req, MPI_STATUS_IGNORE);
    case 1:
        do {
            rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        } while (rc == MPI_SUCCESS && !flag);
        return rc;
    case 2:
        return MPI_Waitall(1, req, tu_statuses_ignore());
    default:
        /* As a Fortran binding would: collar's progress thread finishes it. */
        return PMPI_Wait(req, MPI_STATUS_IGNORE);
    }
}

#if defined(HAVE_PMPI_ALLREDUCE_C)
static MPI_Count *to_count_array(const int *c, int n)
{
    if (c == NULL) {
        return NULL;
    }
    MPI_Count *out = malloc((size_t)(n > 0 ? n : 1) * sizeof(*out));
    for (int i = 0; out != NULL && i < n; i++) {
        out[i] = c[i];
    }
    return out;
}

static MPI_Aint *to_aint_array(const int *d, int n)
{
    if (d == NULL) {
        return NULL;
    }
    MPI_Aint *out = malloc((size_t)(n > 0 ? n : 1) * sizeof(*out));
    for (int i = 0; out != NULL && i < n; i++) {
        out[i] = d[i];
    }
    return out;
}

static int comm_size(MPI_Comm comm)
{
    int n = 0;
    MPI_Comm_size(comm, &n);
    return n;
}
#endif

int tf_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Bcast(buffer, count, datatype, root, comm);
    case TF_NONBLOCKING:
        rc = MPI_Ibcast(buffer, count, datatype, root, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Bcast_init(buffer, count, datatype, root, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Bcast_c(buffer, count, datatype, root, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    case TF_NONBLOCKING:
        rc = MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    case TF_NONBLOCKING:
        rc = MPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        const int n = comm_size(comm);
        MPI_Count *recvcounts_c = to_count_array(recvcounts, n);
        MPI_Aint *displs_c = to_aint_array(displs, n);
        rc = MPI_Allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts_c, displs_c, recvtype, comm);
        free(recvcounts_c);
        free(displs_c);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    case TF_NONBLOCKING:
        rc = MPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    case TF_NONBLOCKING:
        rc = MPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Alltoallv_init(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        const int n = comm_size(comm);
        MPI_Count *sendcounts_c = to_count_array(sendcounts, n);
        MPI_Aint *sdispls_c = to_aint_array(sdispls, n);
        MPI_Count *recvcounts_c = to_count_array(recvcounts, n);
        MPI_Aint *rdispls_c = to_aint_array(rdispls, n);
        rc = MPI_Alltoallv_c(sendbuf, sendcounts_c, sdispls_c, sendtype, recvbuf, recvcounts_c, rdispls_c, recvtype, comm);
        free(sendcounts_c);
        free(sdispls_c);
        free(recvcounts_c);
        free(rdispls_c);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_reduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    case TF_NONBLOCKING:
        rc = MPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Reduce_scatter_init(sendbuf, recvbuf, recvcounts, datatype, op, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        const int n = comm_size(comm);
        MPI_Count *recvcounts_c = to_count_array(recvcounts, n);
        rc = MPI_Reduce_scatter_c(sendbuf, recvbuf, recvcounts_c, datatype, op, comm);
        free(recvcounts_c);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    case TF_NONBLOCKING:
        rc = MPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount, datatype, op, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Reduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, op, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    case TF_NONBLOCKING:
        rc = MPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Reduce_init(sendbuf, recvbuf, count, datatype, op, root, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Reduce_c(sendbuf, recvbuf, count, datatype, op, root, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    case TF_NONBLOCKING:
        rc = MPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Gather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Gather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    case TF_NONBLOCKING:
        rc = MPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Gatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        const int n = comm_size(comm);
        MPI_Count *recvcounts_c = to_count_array(recvcounts, n);
        MPI_Aint *displs_c = to_aint_array(displs, n);
        rc = MPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts_c, displs_c, recvtype, root, comm);
        free(recvcounts_c);
        free(displs_c);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    case TF_NONBLOCKING:
        rc = MPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Scatter_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Scatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_scatterv(const void *sendbuf, const int *sendcounts, const int *displs, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    case TF_NONBLOCKING:
        rc = MPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Scatterv_init(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        const int n = comm_size(comm);
        MPI_Count *sendcounts_c = to_count_array(sendcounts, n);
        MPI_Aint *displs_c = to_aint_array(displs, n);
        rc = MPI_Scatterv_c(sendbuf, sendcounts_c, displs_c, sendtype, recvbuf, recvcount, recvtype, root, comm);
        free(sendcounts_c);
        free(displs_c);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

int tf_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    switch (form) {
    case TF_BLOCKING:
        return MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    case TF_NONBLOCKING:
        rc = MPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, &req);
        return rc != MPI_SUCCESS ? rc : tf_complete(&req);
    case TF_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        rc = MPI_Allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, MPI_INFO_NULL, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) {
                rc = tf_complete(&req);
            }
            int frc = MPI_Request_free(&req);
            if (rc == MPI_SUCCESS) {
                rc = frc;
            }
        }
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    case TF_LARGE: {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = MPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
        return rc;
#else
        return MPI_ERR_UNSUPPORTED_OPERATION;
#endif
    }
    default:
        break;
    }
    (void)req;
    (void)rc;
    return MPI_ERR_OTHER;
}

