/*
 * collar - collar's own API (include/collar.h), for programs and tools
 * that ask what collar does (collar-tune sets the algorithm through it).
 */
#include "config.h"
#include "interpose.h"
#include "collar.h"

COLLAR_EXPORT const char *collar_version(void)
{
    return PACKAGE_VERSION;
}

COLLAR_EXPORT int collar_active(void)
{
    return collar_engine_active();
}

COLLAR_EXPORT const char *collar_device_name(void)
{
    return collar_engine_device_name();
}

COLLAR_EXPORT int collar_set_algorithm(const char *name, size_t chunk)
{
    return collar_engine_set_algorithm(name, chunk);
}

COLLAR_EXPORT int collar_communicators(void)
{
    return collar_engine_communicators();
}

COLLAR_EXPORT const char *collar_last_algorithm(void)
{
    return collar_engine_last_algorithm();
}
