/*
 * collar - the completion calls: MPI_Wait, MPI_Waitall, MPI_Waitany,
 * MPI_Waitsome, their MPI_Test* forms and MPI_Request_get_status, handed
 * to the engine (src/engine/complete.c), which progresses collar's
 * operations while they wait and reports the errors of collar's requests;
 * and MPI_Start, MPI_Startall and MPI_Request_free, which start and free
 * collar's persistent requests (src/engine/persist.c).
 */
#include "config.h"
#include "interpose.h"

COLLAR_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    return collar_complete_wait(request, status);
}

COLLAR_EXPORT int MPI_Waitall(int count, MPI_Request requests[],
                              MPI_Status statuses[])
{
    return collar_complete_waitall(count, requests, statuses);
}

COLLAR_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index,
                              MPI_Status *status)
{
    return collar_complete_waitany(count, requests, index, status);
}

COLLAR_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[],
                               int *outcount, int indices[],
                               MPI_Status statuses[])
{
    return collar_complete_waitsome(incount, requests, outcount, indices,
                                    statuses);
}

COLLAR_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    return collar_complete_test(request, flag, status);
}

COLLAR_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag,
                              MPI_Status statuses[])
{
    return collar_complete_testall(count, requests, flag, statuses);
}

COLLAR_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index,
                              int *flag, MPI_Status *status)
{
    return collar_complete_testany(count, requests, index, flag, status);
}

COLLAR_EXPORT int MPI_Testsome(int incount, MPI_Request requests[],
                               int *outcount, int indices[],
                               MPI_Status statuses[])
{
    return collar_complete_testsome(incount, requests, outcount, indices,
                                    statuses);
}

COLLAR_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag,
                                         MPI_Status *status)
{
    return collar_complete_get_status(request, flag, status);
}

COLLAR_EXPORT int MPI_Start(MPI_Request *request)
{
    return collar_persist_start(request);
}

COLLAR_EXPORT int MPI_Startall(int count, MPI_Request requests[])
{
    return collar_persist_startall(count, requests);
}

COLLAR_EXPORT int MPI_Request_free(MPI_Request *request)
{
    return collar_persist_request_free(request);
}
