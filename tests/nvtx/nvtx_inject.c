/*
 * An NVTX injection library for the tests: what an NVTX tool such as
 * Nsight Systems sees of a program, written down.  The NVTX v3 header of
 * the program (collar's nvtx.c) loads it from NVTX_INJECTION64_PATH at its
 * first NVTX call and calls InitializeInjectionNvtx2 with its export
 * table; this fills the CORE2 module's slots (domains, registered strings,
 * categories, start/end and push/pop ranges, marks) with functions that
 * append one line per event to NVTX_TEST_OUT (%p: the process id):
 *
 *   domain D NAME                       a domain was created (D: its number)
 *   start ID TID NS D CATEGORY PAYLOAD MESSAGE
 *   end ID TID NS
 *   push TID NS D CATEGORY PAYLOAD MESSAGE
 *   pop TID NS D
 *   mark TID NS D MESSAGE
 *
 * NS: CLOCK_MONOTONIC nanoseconds; TID: the thread; PAYLOAD: the unsigned
 * 64-bit payload, or - ; MESSAGE: the ASCII or registered string, or -.
 * tests/nvtx/check_nvtx.py reads the files.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_DOMAINS 16
#define MAX_STRINGS 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static char *domain_names[MAX_DOMAINS];
static int ndomains;
static char *strings[MAX_STRINGS];
static int nstrings;
static unsigned long long next_range;

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull
           + (unsigned long long)ts.tv_nsec;
}

static long tid(void)
{
    return (long)syscall(SYS_gettid);
}

/* Domain handles are 1 + their index (NULL is the default domain: 0). */
static int domain_index(nvtxDomainHandle_t d)
{
    return (int)(intptr_t)d;
}

static const char *message(const nvtxEventAttributes_t *a)
{
    if (a == NULL) {
        return "-";
    }
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != NULL) {
        return a->message.ascii;
    }
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
        intptr_t i = (intptr_t)a->message.registered;
        return i >= 1 && i <= nstrings ? strings[i - 1] : "?";
    }
    return "-";
}

static void attributes(const nvtxEventAttributes_t *a, char *buf, size_t len)
{
    if (a == NULL) {
        snprintf(buf, len, "0 - -");
        return;
    }
    char payload[32] = "-";
    if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) {
        snprintf(payload, sizeof(payload), "%llu",
                 (unsigned long long)a->payload.ullValue);
    }
    snprintf(buf, len, "%u %s %s", a->category, payload, message(a));
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    pthread_mutex_lock(&lock);
    nvtxDomainHandle_t d = NULL;
    if (ndomains < MAX_DOMAINS) {
        domain_names[ndomains++] = strdup(name);
        d = (nvtxDomainHandle_t)(intptr_t)ndomains;
        fprintf(out, "domain %d %s\n", ndomains, name);
    }
    pthread_mutex_unlock(&lock);
    return d;
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t d)
{
    pthread_mutex_lock(&lock);
    fprintf(out, "destroy %d\n", domain_index(d));
    pthread_mutex_unlock(&lock);
}

static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d,
                                                   const char *s)
{
    (void)d;
    pthread_mutex_lock(&lock);
    nvtxStringHandle_t h = NULL;
    if (nstrings < MAX_STRINGS) {
        strings[nstrings++] = strdup(s);
        h = (nvtxStringHandle_t)(intptr_t)nstrings;
    }
    pthread_mutex_unlock(&lock);
    return h;
}

static void NVTX_API name_category(nvtxDomainHandle_t d, uint32_t c,
                                   const char *name)
{
    pthread_mutex_lock(&lock);
    fprintf(out, "category %d %u %s\n", domain_index(d), c, name);
    pthread_mutex_unlock(&lock);
}

static nvtxRangeId_t NVTX_API range_start(nvtxDomainHandle_t d,
                                          const nvtxEventAttributes_t *a)
{
    char attr[512];
    pthread_mutex_lock(&lock);
    attributes(a, attr, sizeof(attr));
    const nvtxRangeId_t id = ++next_range;
    fprintf(out, "start %llu %ld %llu %d %s\n", (unsigned long long)id, tid(),
            now_ns(), domain_index(d), attr);
    pthread_mutex_unlock(&lock);
    return id;
}

static void NVTX_API range_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    pthread_mutex_lock(&lock);
    fprintf(out, "end %llu %ld %llu\n", (unsigned long long)id, tid(), now_ns());
    pthread_mutex_unlock(&lock);
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    char attr[512];
    pthread_mutex_lock(&lock);
    attributes(a, attr, sizeof(attr));
    fprintf(out, "push %ld %llu %d %s\n", tid(), now_ns(), domain_index(d), attr);
    pthread_mutex_unlock(&lock);
    return 0;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d)
{
    pthread_mutex_lock(&lock);
    fprintf(out, "pop %ld %llu %d\n", tid(), now_ns(), domain_index(d));
    pthread_mutex_unlock(&lock);
    return 0;
}

static void NVTX_API mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&lock);
    fprintf(out, "mark %ld %llu %d %s\n", tid(), now_ns(), domain_index(d),
            message(a));
    pthread_mutex_unlock(&lock);
}

static void set(NvtxFunctionTable table, unsigned size, unsigned id,
                NvtxFunctionPointer fn)
{
    if (id < size && table[id] != NULL) {
        *table[id] = fn;
    }
}

static void close_out(void)
{
    if (out != NULL) {
        fclose(out);
        out = NULL;
    }
}

int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
    __attribute__((visibility("default")));

int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
    const char *pattern = getenv("NVTX_TEST_OUT");
    if (pattern == NULL) {
        return 0;
    }
    char path[4096];
    size_t o = 0;
    for (const char *p = pattern; *p != '\0' && o + 32 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%ld", (long)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = '\0';
    out = fopen(path, "w");
    if (out == NULL) {
        return 0;
    }
    setvbuf(out, NULL, _IOLBF, 0);
    atexit(close_out);

    const NvtxExportTableCallbacks *cb = get_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (cb == NULL || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) {
        return 0;
    }
    set(table, size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create);
    set(table, size, NVTX_CBID_CORE2_DomainDestroy, (NvtxFunctionPointer)domain_destroy);
    set(table, size, NVTX_CBID_CORE2_DomainRegisterStringA,
        (NvtxFunctionPointer)register_string);
    set(table, size, NVTX_CBID_CORE2_DomainNameCategoryA,
        (NvtxFunctionPointer)name_category);
    set(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, (NvtxFunctionPointer)range_start);
    set(table, size, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)range_end);
    set(table, size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)range_push);
    set(table, size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)range_pop);
    set(table, size, NVTX_CBID_CORE2_DomainMarkEx, (NvtxFunctionPointer)mark);
    return 1;
}
