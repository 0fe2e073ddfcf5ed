/*
 * Unit test of the configuration table and its parsers: good values are
 * taken, bad ones warned about once with the default kept, unknown COLLAR_*
 * names warned about.  No MPI.
 */
#include "config.h"
#include "core/core.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_sizes(void)
{
    static const struct { const char *s; size_t v; } good[] = {
        { "0", 0 }, { "4096", 4096 }, { "64K", 65536 }, { "64k", 65536 },
        { "1M", 1u << 20 }, { "1MiB", 1u << 20 }, { "2G", (size_t)2 << 30 },
        { "3KB", 3072 }, { "1T", (size_t)1 << 40 },
        /* as people write sizes (collar-info --explain 4 MiB) */
        { "4 MiB", (size_t)4 << 20 }, { "4 M", (size_t)4 << 20 },
        { "4MiB", (size_t)4 << 20 }, { "12 B", 12 }, { "64 kb", 65536 },
    };
    static const char *const bad[] = {
        "", "-1", "K", "1X", "1.5M", " 1", "1 ", "1MM", "99999999999999999999",
        "17179869184G", "0x10", "4  MiB", "4 MiB ", "4 X", " 4 MiB", "4 ",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 12345;
        collar_status_t st = collar_parse_size(good[i].s, &v);
        UNIT_CHECK(st == COLLAR_OK && v == good[i].v, "'%s' -> %zu (st %d)",
                   good[i].s, v, st);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 12345;
        collar_status_t st = collar_parse_size(bad[i], &v);
        UNIT_CHECK(st == COLLAR_ERR_INVALID && v == 12345, "'%s' accepted", bad[i]);
    }
}

/* The words of the info line that says what ran. */
static void test_words(void)
{
    static const struct { size_t v; const char *exact, *range; } cases[] = {
        { 0, "0 B", "0 B" },
        { 1, "1 B", "1 B" },
        { 3, "3 B", "2 B to under 4 B" },
        { 1100, "1100 B", "1 KiB to under 2 KiB" },
        { 1536, "1536 B", "1 KiB to under 2 KiB" },
        { 65536, "64 KiB", "64 KiB to under 128 KiB" },
        { (size_t)16 << 20, "16 MiB", "16 MiB to under 32 MiB" },
        { ((size_t)4 << 20) + 1, "4194305 B", "4 MiB to under 8 MiB" },
        { (size_t)3 << 30, "3 GiB", "2 GiB to under 4 GiB" },
    };
    char buf[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        collar_format_bytes_exact(cases[i].v, buf, sizeof(buf));
        UNIT_CHECK(strcmp(buf, cases[i].exact) == 0, "%zu: '%s'", cases[i].v, buf);
        collar_format_range(cases[i].v, buf, sizeof(buf));
        UNIT_CHECK(strcmp(buf, cases[i].range) == 0, "%zu: '%s'", cases[i].v, buf);
    }
    collar_format_range(SIZE_MAX, buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "8 EiB and up") == 0, "SIZE_MAX: '%s'", buf);
    collar_format_call(COLLAR_COLL_ALLREDUCE, 2, (size_t)16 << 20,
                       COLLAR_MEM_DEVICE, buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "allreduce on 2 ranks, 16 MiB to under 32 MiB, "
                      "device memory") == 0, "'%s'", buf);
    collar_format_call(COLLAR_COLL_BCAST, 1, 8, COLLAR_MEM_HOST, buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "bcast on 1 rank, 8 B to under 16 B, host memory") == 0,
               "'%s'", buf);
}

/* Words in messages: "1 rank", "an ipc rule", "an 8-rank communicator". */
static void test_grammar(void)
{
    UNIT_CHECK(strcmp(collar_article("ipc"), "an") == 0, "an ipc");
    UNIT_CHECK(strcmp(collar_article("staged"), "a") == 0, "a staged");
    static const struct { long n; const char *a; } nums[] = {
        { 1, "a" }, { 2, "a" }, { 8, "an" }, { 11, "an" }, { 18, "an" },
        { 80, "an" }, { 86, "an" }, { 100, "a" }, { 800, "an" }, { 8000, "an" },
        { 11000, "an" }, { 1100, "a" }, { 28, "a" },
    };
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        UNIT_CHECK(strcmp(collar_article_n(nums[i].n), nums[i].a) == 0,
                   "%s %ld", collar_article_n(nums[i].n), nums[i].n);
    }
    UNIT_CHECK(strcmp(collar_plural(1), "") == 0 && strcmp(collar_plural(2), "s") == 0,
               "1 rank, 2 ranks");
}

static void test_scalars(void)
{
    int b = -1;
    UNIT_CHECK(collar_parse_bool("YES", &b) == COLLAR_OK && b == 1, "YES");
    UNIT_CHECK(collar_parse_bool("off", &b) == COLLAR_OK && b == 0, "off");
    UNIT_CHECK(collar_parse_bool("2", &b) == COLLAR_ERR_INVALID, "2");
    UNIT_CHECK(collar_parse_bool("", &b) == COLLAR_ERR_INVALID, "empty");
    long l = 7;
    UNIT_CHECK(collar_parse_long("42", 0, 100, &l) == COLLAR_OK && l == 42, "42");
    UNIT_CHECK(collar_parse_long("-1", 0, 100, &l) == COLLAR_ERR_INVALID, "-1");
    UNIT_CHECK(collar_parse_long("101", 0, 100, &l) == COLLAR_ERR_INVALID, "101");
    UNIT_CHECK(collar_parse_long("99999999999999999999999", 0, 100, &l)
               == COLLAR_ERR_INVALID, "overflow");
    UNIT_CHECK(collar_parse_long("4a", 0, 100, &l) == COLLAR_ERR_INVALID, "4a");
    UNIT_CHECK(l == 42, "value kept after errors: %ld", l);
}

static void test_pattern(void)
{
    char out[256];
    collar_expand_pattern("log.%r.%p.%%.txt", 3, out, sizeof(out));
    char want[256];
    snprintf(want, sizeof(want), "log.3.%ld.%%.txt", (long)getpid());
    UNIT_CHECK(strcmp(out, want) == 0, "'%s' != '%s'", out, want);
    collar_expand_pattern("abcdefgh", 0, out, 4);
    UNIT_CHECK(strcmp(out, "abc") == 0, "truncation gave '%s'", out);
}

static void test_first(void)
{
    UNIT_CHECK(collar_log_first("key one") == 1, "first time");
    UNIT_CHECK(collar_log_first("key one") == 0, "second time");
    UNIT_CHECK(collar_log_first("key two") == 1, "another key");
}

/* The known name an unknown COLLAR_* name was meant to be: typos of it,
 * it cut short, it with a part too many; nothing where nothing is close,
 * and never a name merely a few letters away from a short one. */
static void test_suggest(void)
{
    static const struct { const char *name, *meant; } cases[] = {
        /* cut short */
        { "COLLAR_CHUNK", "COLLAR_CHUNK_SIZE" },      /* not COLLAR_CHECK */
        { "COLLAR_ALGO", "COLLAR_ALGORITHM" },        /* not COLLAR_LOG */
        { "COLLAR_IPC", "COLLAR_IPC_MAPS" },          /* the shortest IPC_ */
        { "COLLAR_NCCL", "COLLAR_NCCL_LIBRARY" },     /* not COLLAR_NVTX */
        { "COLLAR_LOG_SUB", "COLLAR_LOG_SUBSYS" },
        { "COLLAR_GDR", "COLLAR_GDRCOPY" },
        /* a part too many */
        { "COLLAR_LOG_LEVEL", "COLLAR_LOG" },
        { "COLLAR_STATS_OUTPUT", "COLLAR_STATS" },
        { "COLLAR_LOG_SUBSYS_MEM", "COLLAR_LOG_SUBSYS" },  /* the longest */
        /* typos */
        { "COLLAR_ALGORTIHM", "COLLAR_ALGORITHM" },   /* a transposition */
        { "COLLAR_ALGORTHM", "COLLAR_ALGORITHM" },
        { "COLLAR_DEVIC", "COLLAR_DEVICE" },
        { "COLLAR_STAT", "COLLAR_STATS" },
        { "COLLAR_PROGRES", "COLLAR_PROGRESS" },
        { "COLLAR_CHUNKSIZE", "COLLAR_CHUNK_SIZE" },
        { "COLLAR_DISABLED", "COLLAR_DISABLE" },
        { "COLLAR_LOG_SUBSYTEM", "COLLAR_LOG_SUBSYS" },
        { "COLLAR_STAGINGPOOL", "COLLAR_STAGING_POOL" },
        { "COLLAR_log", "COLLAR_LOG" },               /* the case */
        { "COLLAR_Device", "COLLAR_DEVICE" },
        /* nothing meant */
        { "COLLAR_NO_SUCH_THING", NULL },
        { "COLLAR_FOO", NULL },
        { "COLLAR_X", NULL },
        { "COLLAR_", NULL },
        { "COLLAR_LO_G", "COLLAR_LOG" },
        { "COLLAR_SPEED", NULL },
        { "COLLAR_AB", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = collar_config_suggest(cases[i].name, strlen(cases[i].name));
        const int ok = cases[i].meant == NULL ? got == NULL
                       : got != NULL && strcmp(got, cases[i].meant) == 0;
        UNIT_CHECK(ok, "%s: suggested %s, expected %s", cases[i].name,
                   got ? got : "nothing", cases[i].meant ? cases[i].meant : "nothing");
    }
    /* Only the name before '=' counts (environ's entries). */
    const char *e = "COLLAR_ALGO=ring";
    const char *got = collar_config_suggest(e, 11);
    UNIT_CHECK(got != NULL && strcmp(got, "COLLAR_ALGORITHM") == 0,
               "COLLAR_ALGO=ring: %s", got ? got : "nothing");
}

/* Load a configuration with good, bad and unknown variables; the warnings
 * go to a file that is read back. */
static void test_load(void)
{
    char path[] = "/tmp/collar-test-config-XXXXXX";
    int fd = mkstemp(path);
    UNIT_CHECK(fd >= 0, "mkstemp");
    if (fd < 0) {
        return;
    }
    close(fd);
    setenv("COLLAR_DEVICE", "SIM", 1);             /* good, any case */
    setenv("COLLAR_SIM_JITTER", "-5", 1);          /* below its range */
    setenv("COLLAR_STAGING_POOL", "12Q", 1);       /* bad suffix */
    setenv("COLLAR_ALGORITHM", "ring-of-fire", 1); /* not an algorithm */
    setenv("COLLAR_LOG_SUBSYS", "coll,,mem", 1);   /* malformed list */
    setenv("COLLAR_SIM_STREAMS", "4", 1);          /* good */
    setenv("COLLAR_DISABLED", "1", 1);             /* a typo */
    setenv("COLLAR_NO_SUCH_THING", "1", 1);        /* close to nothing */
    setenv("COLLAR_CHUNK_SIZE", "8G", 1);          /* above 1G, as tables */
    setenv("COLLAR_LOG", "warn", 1);

    collar_log_open(path);
    collar_config_load();
    collar_config_load();  /* idempotent: no second round of warnings */
    collar_log_close();

    UNIT_CHECK(collar_cfg.device == COLLAR_DEVICE_SIM, "device %d", collar_cfg.device);
    UNIT_CHECK(collar_cfg.sim_jitter_us == 0, "jitter %ld", collar_cfg.sim_jitter_us);
    UNIT_CHECK(collar_cfg.staging_pool == (size_t)256 << 20, "pool %zu",
               collar_cfg.staging_pool);
    UNIT_CHECK(collar_cfg.algorithm == COLLAR_ALG_AUTO, "algorithm %d",
               collar_cfg.algorithm);
    UNIT_CHECK(collar_cfg.log_subsys == COLLAR_SUB_ALL, "subsys %#x",
               collar_cfg.log_subsys);
    UNIT_CHECK(collar_cfg.sim_streams == 4, "streams %ld", collar_cfg.sim_streams);
    UNIT_CHECK(collar_cfg.disable == 0, "disable %d", collar_cfg.disable);
    UNIT_CHECK(collar_cfg.chunk_size == 0, "chunk %zu", collar_cfg.chunk_size);

    FILE *f = fopen(path, "r");
    char line[2048];
    int warnings = 0, jitter = 0, pool = 0, alg = 0, subsys = 0, typo = 0;
    int chunk = 0, located = 0, unknown = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, " WARN ") == NULL) {
            continue;
        }
        warnings++;
        /* About the user's environment: no "(config.c:123)" of collar's. */
        located += strstr(line, ".c:") != NULL;
        jitter += strstr(line, "COLLAR_SIM_JITTER='-5' is invalid: expected an "
                         "integer from 0 to 1000000; using the default '0'") != NULL;
        pool += strstr(line, "COLLAR_STAGING_POOL='12Q' is invalid") != NULL;
        alg += strstr(line, "COLLAR_ALGORITHM='ring-of-fire' is invalid: expected "
                      "one of: auto, native, staged") != NULL;
        subsys += strstr(line, "COLLAR_LOG_SUBSYS='coll,,mem' is invalid") != NULL;
        typo += strstr(line, "unknown variable COLLAR_DISABLED is ignored (did "
                       "you mean COLLAR_DISABLE? collar-info lists the known "
                       "ones)") != NULL;
        unknown += strstr(line, "unknown variable COLLAR_NO_SUCH_THING is "
                          "ignored (collar-info lists the known ones)") != NULL;
        chunk += strstr(line, "COLLAR_CHUNK_SIZE='8G' is invalid: expected a size "
                        "in bytes from 0 to 1G") != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    UNIT_CHECK(warnings == 7, "%d warnings, expected 7", warnings);
    UNIT_CHECK(located == 0, "%d warnings about the environment carry a "
               "source location", located);
    UNIT_CHECK(jitter == 1 && pool == 1 && alg == 1 && subsys == 1 && typo == 1
               && chunk == 1 && unknown == 1,
               "each warning once: jitter %d pool %d alg %d subsys %d typo %d "
               "chunk %d unknown %d", jitter, pool, alg, subsys, typo, chunk,
               unknown);
    unlink(path);
}

int main(void)
{
    test_sizes();
    test_grammar();
    test_words();
    test_scalars();
    test_pattern();
    test_first();
    test_suggest();
    test_load();
    return unit_finish("test_config");
}
