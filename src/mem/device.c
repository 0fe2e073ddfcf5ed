/* collar - choosing and opening the device backend. */
#include "config.h"
#include "mem.h"

static const collar_device_t *current = &collar_device_none;

const collar_device_t *collar_device_current(void)
{
    return current;
}

const char *collar_device_builtin(void)
{
#ifdef COLLAR_HAVE_CUDA
    return "none sim cuda";
#else
    return "none sim";
#endif
}

const collar_device_t *collar_device_open(collar_device_kind_t kind)
{
    const collar_device_t *dev = &collar_device_none;
    switch (kind) {
    case COLLAR_DEVICE_AUTO:
#ifdef COLLAR_HAVE_CUDA
        /* cuda when a driver and a GPU are there; else none, quietly. */
        if (collar_device_cuda.init() == COLLAR_OK) {
            dev = &collar_device_cuda;
            collar_debug(MEM, "device backend: cuda");
            current = dev;
            return dev;
        }
        collar_debug(MEM, "COLLAR_DEVICE=auto: no usable GPU; running without "
                     "a device (none)");
#endif
        dev = &collar_device_none;
        break;
    case COLLAR_DEVICE_CUDA:
#ifdef COLLAR_HAVE_CUDA
        dev = &collar_device_cuda;
#else
        collar_warn_lead(MEM, "COLLAR_DEVICE=cuda: the cuda backend is not built "
                         "into this library (configure found no CUDA toolkit); "
                         "running without a device (none)");
        dev = &collar_device_none;
#endif
        break;
    case COLLAR_DEVICE_SIM:
        dev = &collar_device_sim;
        break;
    case COLLAR_DEVICE_NONE:
        dev = &collar_device_none;
        break;
    }
    collar_status_t st = dev->init();
    if (st != COLLAR_OK) {
        /* Every rank would say the same: rank 0 says it, the others at
         * debug level. */
        const char *why = collar_status_string(st);
#ifdef COLLAR_HAVE_CUDA
        if (dev == &collar_device_cuda) {
            why = collar_cuda_unavailable_reason();
        }
#endif
        collar_warn_lead(MEM, "COLLAR_DEVICE=%s: no usable device (%s); running "
                         "without a device (none)", dev->name, why);
        dev = &collar_device_none;
        dev->init();
    }
    collar_debug(MEM, "device backend: %s", dev->name);
    current = dev;
    return dev;
}

int collar_device_may_open(collar_device_kind_t kind)
{
    switch (kind) {
    case COLLAR_DEVICE_SIM:
        return 1;
    case COLLAR_DEVICE_AUTO:
    case COLLAR_DEVICE_CUDA:
#ifdef COLLAR_HAVE_CUDA
        return collar_cuda_probe();
#else
        return 0;
#endif
    case COLLAR_DEVICE_NONE:
        break;
    }
    return 0;
}

collar_ranges_t *collar_mem_host_ranges(void)
{
#ifdef COLLAR_HAVE_CUDA
    if (current == &collar_device_cuda) {
        return collar_cuda_host_ranges();
    }
#endif
    return NULL;
}

void collar_device_close(void)
{
    current->finalize();
    current = &collar_device_none;
}
