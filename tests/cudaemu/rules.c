/*
 * collar - the CUDA emulation's rules (tests only): every documented rule
 * the emulation enforces, with where it is documented and what is checked,
 * and the abort that reports a broken one.  A program that breaks a rule
 * dies with SIGABRT and the line
 *   cudaemu: RULE <name>: <what> (<source>) [pid P, device D]
 * on stderr.  docs/cuda.md ("The CUDA emulation (tests)") lists the same
 * table.
 */
#include "emu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    const char *name;
    const char *source;   /* where the rule is documented, a few words of it */
    const char *check;    /* what the emulation checks */
} emu_rule_t;

static const emu_rule_t rules[EMU_R_COUNT] = {
    [EMU_R_IPC_OWN_PROCESS] = {
        "ipc-open-in-own-process",
        "CUDA Runtime API, cudaIpcOpenMemHandle: \"may only be opened by one "
        "context per device per other process\"",
        "cudaIpcOpenMemHandle of a handle this process exported" },
    [EMU_R_IPC_FREE_WHILE_OPEN] = {
        "ipc-free-while-open",
        "CUDA Runtime API, cudaIpcOpenMemHandle: \"Calling cudaFree on an "
        "exported memory region before calling cudaIpcCloseMemHandle in the "
        "importing context will result in undefined behavior\"",
        "cudaFree of an allocation a live peer process still has open" },
    [EMU_R_STREAM_DESTROYED] = {
        "stream-used-after-destroy",
        "CUDA Runtime API, cudaStreamDestroy: \"Destroys and cleans up the "
        "asynchronous stream\"",
        "a stream handle passed to any call after cudaStreamDestroy" },
    [EMU_R_EVENT_DESTROYED] = {
        "event-used-after-destroy",
        "CUDA Runtime API, cudaEventDestroy: \"Destroys the event\"",
        "an event handle passed to any call after cudaEventDestroy" },
    [EMU_R_UNUSED_DEVICE] = {
        "context-on-unused-device",
        "CUDA Programming Guide, Compute Modes: \"exclusive-process compute "
        "mode: only one context is created on the device for all processes\"",
        "a context made (explicitly or implicitly) on a device outside "
        "CUDAEMU_STRICT_DEVICES" },
    [EMU_R_HOST_ACCESS] = {
        "host-access-to-device-memory",
        "CUDA Runtime API, cudaPointerAttributes::hostPointer: \"The address "
        "which may be dereferenced on the host ... or NULL if no such address "
        "exists\" (NULL for device memory)",
        "a load or store of the host at a device address (SIGSEGV on the "
        "host's PROT_NONE view of device memory)" },
    [EMU_R_CALL_IN_HOST_FUNC] = {
        "cuda-call-in-host-function",
        "CUDA Runtime API, cudaLaunchHostFunc: \"Host functions must not make "
        "any CUDA API calls\"",
        "a runtime or driver call from a function run by cudaLaunchHostFunc "
        "or cudaStreamAddCallback" },
};

static void vrule(const char *name, const char *source, const char *fmt,
                  va_list ap) __attribute__((noreturn, format(printf, 3, 0)));

static void vrule(const char *name, const char *source, const char *fmt,
                  va_list ap)
{
    char what[512];
    vsnprintf(what, sizeof(what), fmt, ap);
    /* The device without making a context: a rule may break before any. */
    CUcontext c = emu_current_ctx();
    fprintf(stderr, "cudaemu: RULE %s: %s (%s) [pid %ld, device %d]\n", name,
            what, source, (long)getpid(), c != NULL ? emu_ctx_ordinal(c) : -1);
    fflush(stderr);
    abort();
}

void cudaemu_rule(const char *rule, const char *source, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrule(rule, source, fmt, ap);
}

void emu_break(enum emu_rule r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrule(rules[r].name, rules[r].source, fmt, ap);
}
