/* collar - status codes. */
#include "core.h"

const char *collar_status_string(collar_status_t status)
{
    switch (status) {
    case COLLAR_OK:              return "success";
    case COLLAR_INPROGRESS:      return "operation in progress";
    case COLLAR_ERR_NO_MEMORY:   return "out of memory";
    case COLLAR_ERR_INVALID:     return "invalid argument";
    case COLLAR_ERR_MPI:         return "MPI library error";
    case COLLAR_ERR_DEVICE:      return "device error";
    case COLLAR_ERR_UNSUPPORTED: return "not supported";
    case COLLAR_ERR_UNAVAILABLE: return "not available";
    }
    return "unknown status";
}

const char *collar_mem_kind_name(collar_mem_kind_t kind)
{
    switch (kind) {
    case COLLAR_MEM_HOST:    return "host";
    case COLLAR_MEM_DEVICE:  return "device";
    case COLLAR_MEM_MANAGED: return "managed";
    }
    return "unknown";
}
