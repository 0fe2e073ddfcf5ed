/*
 * collar - core layer: status codes, as every layer returns them
 * (collar_status_string in status.c).  Included by core.h.
 */
#ifndef COLLAR_STATUS_H
#define COLLAR_STATUS_H

typedef enum {
    COLLAR_OK              =  0,
    COLLAR_INPROGRESS      =  1,  /* not an error: try again later */
    COLLAR_ERR_NO_MEMORY   = -1,
    COLLAR_ERR_INVALID     = -2,
    COLLAR_ERR_MPI         = -3,  /* the MPI library returned an error */
    COLLAR_ERR_DEVICE      = -4,  /* a device operation failed */
    COLLAR_ERR_UNSUPPORTED = -5,  /* not possible with this algorithm */
    COLLAR_ERR_UNAVAILABLE = -6   /* a backend or feature is absent */
} collar_status_t;

const char *collar_status_string(collar_status_t status);

/* Evaluate `call`; on error return its status. */
#define COLLAR_CHECK(call)                                                    \
    do {                                                                      \
        collar_status_t collar_check_st_ = (call);                            \
        if (collar_check_st_ < 0) {                                           \
            return collar_check_st_;                                          \
        }                                                                     \
    } while (0)

/* Evaluate `call` into `status`; on error jump to `label`. */
#define COLLAR_CHECK_GOTO(call, status, label)                                \
    do {                                                                      \
        (status) = (call);                                                    \
        if ((status) < 0) {                                                   \
            goto label;                                                       \
        }                                                                     \
    } while (0)

#endif /* COLLAR_STATUS_H */
