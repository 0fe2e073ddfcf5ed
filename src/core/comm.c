/*
 * collar - private communicators.
 *
 * Internal traffic never runs on the user's communicator: each communicator
 * collar works on gets a private duplicate, made on first use (collectively:
 * every rank reaches the same first call) and cached on the user's
 * communicator as an attribute, so that it is freed when the user frees the
 * communicator (or at MPI_Finalize for the predefined ones).
 */
#include "config.h"
#include "core.h"

#include <stdlib.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

static int comm_keyval = MPI_KEYVAL_INVALID;
static MPI_Comm probe_comm = MPI_COMM_NULL;

int collar_mpi_cuda_aware(void)
{
    if (collar_cfg.mpi_cuda_aware == 1) {
        return 1;
    }
    if (collar_cfg.mpi_cuda_aware == 2) {
        return 0;
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;   /* MPICH 4 */
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes;
#else
    return 0;
#endif
}

MPI_Comm collar_comm_probe(void)
{
    return probe_comm;
}

static int comm_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    collar_comm_t *state = attr;
    if (state != NULL) {
        if (state->private_comm != MPI_COMM_NULL) {
            PMPI_Comm_free(&state->private_comm);
        }
        free(state);
    }
    return MPI_SUCCESS;
}

collar_status_t collar_comm_init(void)
{
    if (comm_keyval != MPI_KEYVAL_INVALID) {
        return COLLAR_OK;
    }
    int rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn,
                                     &comm_keyval, NULL);
    if (rc != MPI_SUCCESS) {
        collar_error(INIT, "cannot create a communicator attribute key (MPI error %d)", rc);
        return COLLAR_ERR_MPI;
    }
    if (PMPI_Comm_dup(MPI_COMM_SELF, &probe_comm) == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN);
    } else {
        probe_comm = MPI_COMM_NULL;
    }
    return COLLAR_OK;
}

void collar_comm_finalize(void)
{
    if (comm_keyval == MPI_KEYVAL_INVALID) {
        return;
    }
    /* Free the private duplicates of the predefined communicators now, while
     * every MPI call is still allowed. */
    MPI_Comm predefined[2] = { MPI_COMM_WORLD, MPI_COMM_SELF };
    for (int i = 0; i < 2; i++) {
        void *attr;
        int flag = 0;
        if (PMPI_Comm_get_attr(predefined[i], comm_keyval, &attr, &flag) == MPI_SUCCESS
            && flag) {
            PMPI_Comm_delete_attr(predefined[i], comm_keyval);
        }
    }
    PMPI_Comm_free_keyval(&comm_keyval);
    comm_keyval = MPI_KEYVAL_INVALID;
    if (probe_comm != MPI_COMM_NULL) {
        PMPI_Comm_free(&probe_comm);
    }
}

collar_status_t collar_comm_get(MPI_Comm comm, collar_comm_t **state)
{
    void *attr = NULL;
    int flag = 0;
    if (comm_keyval == MPI_KEYVAL_INVALID) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    int rc = PMPI_Comm_get_attr(comm, comm_keyval, &attr, &flag);
    if (rc != MPI_SUCCESS) {
        return COLLAR_ERR_MPI;
    }
    if (flag) {
        *state = attr;
        return COLLAR_OK;
    }

    collar_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    rc = PMPI_Comm_dup(comm, &c->private_comm);
    if (rc != MPI_SUCCESS) {
        collar_error(COLL, "cannot duplicate the communicator for internal "
                     "traffic (MPI error %d)", rc);
        free(c);
        return COLLAR_ERR_MPI;
    }
    /* Errors of internal traffic come back to collar, which reports them
     * through the user's communicator. */
    PMPI_Comm_set_errhandler(c->private_comm, MPI_ERRORS_RETURN);
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_rank(comm, &c->rank);
    int *ub = NULL;
    c->tag_ub = 32767;
    if (PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS
        && flag && *ub > 0) {
        c->tag_ub = *ub;
    }
    rc = PMPI_Comm_set_attr(comm, comm_keyval, c);
    if (rc != MPI_SUCCESS) {
        PMPI_Comm_free(&c->private_comm);
        free(c);
        return COLLAR_ERR_MPI;
    }
    collar_debug(COLL, "new private communicator: %d ranks, this is rank %d",
                 c->size, c->rank);
    *state = c;
    return COLLAR_OK;
}
