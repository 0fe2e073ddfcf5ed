/*
 * Unit test of the tuning table: every error message (exact text, line and
 * column), valid tables in their forms (file, inline, CR LF, comments, tabs,
 * inf bounds, zero rules), matching at the range boundaries, the canonical
 * writer and the hash, and loading files (missing, a directory, too large,
 * empty, binary, one huge line).  No MPI run, no GPU.
 */
#include "config.h"
#include "core/core.h"
#include "unit.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ERRLEN 1024

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static const char example[] =
    "# collar tuning table \xc2\xb7 system: 1x H200, Open MPI 5.0 \xc2\xb7 made by collar-tune\n"
    "version 1\n"
    "# collective memory ranks bytes      algorithm options\n"
    "allreduce    device  2-8   0-64K      staged\n"
    "allreduce    device  2-8   64K-16M    chunked   chunk=1M\n"
    "allreduce    any     1-inf 16M-inf    chunked   chunk=4M\n";

/* The same rules, written differently. */
static const char example_crlf[] =
    "# collar tuning table \xc2\xb7 system: 1x H200, Open MPI 5.0 \xc2\xb7 made by collar-tune\r\n"
    "version 1\r\n"
    "# collective memory ranks bytes      algorithm options\r\n"
    "allreduce    device  2-8   0-64K      staged\r\n"
    "allreduce    device  2-8   64K-16M    chunked   chunk=1M\r\n"
    "allreduce    any     1-inf 16M-inf    chunked   chunk=4M\r\n";

static const char example_tabs[] =
    "\n\n   # leading blank lines and an indented comment\n"
    "\tversion\t1   # the version\n"
    "allreduce\tdevice\t2-8\t0-65536\tstaged#no space before the comment\n"
    "\n"
    "  allreduce device 2-8 64KiB-16m chunked chunk=1024K   \n"
    "allreduce any 1-inf 16384K-inf chunked chunk=4MB";   /* no final newline */

static const char example_inline[] =
    "allreduce device 2-8 0-64K staged; allreduce device 2-8 64K-16M chunked "
    "chunk=1M;allreduce any 1-inf 16M-inf chunked chunk=4M;";

static const char canonical[] =
    "# collar tuning table \xc2\xb7 system: 1x H200, Open MPI 5.0\n"
    "version 1\n"
    "# collective memory ranks bytes algorithm options\n"
    "allreduce device 2-8 0-64K staged\n"
    "allreduce device 2-8 64K-16M chunked chunk=1M\n"
    "allreduce any 1-inf 16M-inf chunked chunk=4M\n";

static int table_is_empty(const collar_table_t *t)
{
    return t->rules == NULL && t->nrules == 0 && t->version == 0
        && t->system[0] == '\0' && t->hash == 0;
}

/* Parse `len` bytes of `text`; expect exactly the message `want`. */
static void check_error_len(int line, const char *text, size_t len, int inl,
                            const char *name, const char *want)
{
    collar_table_t t;
    char err[ERRLEN];
    memset(&t, 0x5a, sizeof(t));
    collar_status_t st = collar_table_parse(text, len, name, inl, &t, err,
                                            sizeof(err));
    UNIT_CHECK(st == COLLAR_ERR_INVALID, "line %d: status %d", line, st);
    UNIT_CHECK(strcmp(err, want) == 0, "line %d:\n  got  '%s'\n  want '%s'",
               line, err, want);
    UNIT_CHECK(table_is_empty(&t), "line %d: table not left empty", line);
    collar_table_free(&t);
}

#define ERR(text, want) \
    check_error_len(__LINE__, text, strlen(text), 0, "x.table", want)
#define ERR_INLINE(text, want) \
    check_error_len(__LINE__, text, strlen(text), 1, "COLLAR_ALLREDUCE_RULES", want)

static int parse_ok(int line, const char *text, size_t len, int inl,
                    collar_table_t *t)
{
    char err[ERRLEN];
    collar_status_t st = collar_table_parse(text, len, "ok.table", inl, t, err,
                                            sizeof(err));
    UNIT_CHECK(st == COLLAR_OK, "line %d: status %d: %s", line, st, err);
    return st == COLLAR_OK;
}

#define OK(text, inl, t) parse_ok(__LINE__, text, strlen(text), inl, t)

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
    const char *algs = "expected one of native, staged, chunked, ring, ipc, hier, nccl";
    char want[ERRLEN];

    /* Algorithm. */
    snprintf(want, sizeof(want), "x.table:2:28: unknown algorithm 'rign': %s", algs);
    ERR("version 1\nallreduce device 2-8 0-64K rign\n", want);
    snprintf(want, sizeof(want), "x.table:2:28: algorithm 'auto' is not allowed "
             "in a table: %s", algs);
    ERR("version 1\nallreduce device 2-8 0-64K auto\n", want);
    snprintf(want, sizeof(want), "x.table:2:28: unknown algorithm 'Staged': %s", algs);
    ERR("version 1\nallreduce device 2-8 0-64K Staged\n", want);

    /* Collective and memory kind. */
    ERR("version 1\nbcast device 2-8 0-64K staged\n",
        "x.table:2:1: unknown collective 'bcast': expected allreduce");
    ERR("version 1\nallreduce gpu 2-8 0-64K staged\n",
        "x.table:2:11: unknown memory kind 'gpu': expected one of host, device, any");
    ERR("version 1\nallreduce managed 2-8 0-64K staged\n",
        "x.table:2:11: unknown memory kind 'managed': expected one of host, "
        "device, any");

    /* Missing fields: the column just after the last token. */
    ERR("version 1\nallreduce\n",
        "x.table:2:10: expected a memory kind (host, device, any) after 'allreduce'");
    ERR("version 1\nallreduce device\n",
        "x.table:2:17: expected a rank range (N, N-M or N-inf) after 'device'");
    ERR("version 1\nallreduce device 2-8   \n",
        "x.table:2:21: expected a byte range (A-B or A-inf) after '2-8'");
    ERR("version 1\nallreduce device 2-8 0-64K   # no algorithm\n",
        "x.table:2:27: expected an algorithm (native, staged, chunked, ring, ipc, hier, nccl) after '0-64K'");

    /* Rank ranges. */
    ERR("version 1\n\nallreduce device 8-2 0-64K staged\n",
        "x.table:3:18: bad rank range '8-2': the lower bound exceeds the upper");
    ERR("version 1\nallreduce device 0-8 0-64K staged\n",
        "x.table:2:18: bad rank range '0-8': ranks start at 1");
    ERR("version 1\nallreduce device 0 0-64K staged\n",
        "x.table:2:18: bad rank range '0': ranks start at 1");
    ERR("version 1\nallreduce device two 0-64K staged\n",
        "x.table:2:18: bad rank range 'two': expected N, N-M or N-inf with whole "
        "numbers 1 <= N <= M");
    ERR("version 1\nallreduce device 2- 0-64K staged\n",
        "x.table:2:18: bad rank range '2-': expected N, N-M or N-inf with whole "
        "numbers 1 <= N <= M");
    ERR("version 1\nallreduce device -2 0-64K staged\n",
        "x.table:2:18: bad rank range '-2': expected N, N-M or N-inf with whole "
        "numbers 1 <= N <= M");
    ERR("version 1\nallreduce device 1-2-3 0-64K staged\n",
        "x.table:2:18: bad rank range '1-2-3': expected N, N-M or N-inf with whole "
        "numbers 1 <= N <= M");
    ERR("version 1\nallreduce device 2-99999999999 0-64K staged\n",
        "x.table:2:18: bad rank range '2-99999999999': a bound exceeds 2147483647 "
        "(use inf)");
    ERR("version 1\nallreduce device inf 0-64K staged\n",
        "x.table:2:18: bad rank range 'inf': inf is only allowed as the upper bound");
    ERR("version 1\nallreduce device inf-inf 0-64K staged\n",
        "x.table:2:18: bad rank range 'inf-inf': inf is only allowed as the upper "
        "bound");

    /* Byte ranges and sizes. */
    ERR("version 1\nallreduce device 2-8 64K-64K staged\n",
        "x.table:2:22: bad byte range '64K-64K': empty range (the upper bound is "
        "exclusive)");
    ERR("version 1\nallreduce device 2-8 1M-64K staged",
        "x.table:2:22: bad byte range '1M-64K': the lower bound exceeds the upper");
    ERR("version 1\nallreduce device 2-8 64K staged\n",
        "x.table:2:22: bad byte range '64K': expected A-B or A-inf (from A "
        "included to B excluded)");
    ERR("version 1\nallreduce device 2-8 -64K staged\n",
        "x.table:2:22: bad byte range '-64K': expected A-B or A-inf (from A "
        "included to B excluded)");
    ERR("version 1\nallreduce device 2-8 64K- staged\n",
        "x.table:2:22: bad byte range '64K-': expected A-B or A-inf (from A "
        "included to B excluded)");
    ERR("version 1\nallreduce device 2-8 inf-inf staged\n",
        "x.table:2:22: bad byte range 'inf-inf': inf is only allowed as the upper "
        "bound");
    ERR("version 1\nallreduce device 2-8 0-64Q staged\n",
        "x.table:2:24: bad size '64Q': expected digits with an optional K, M, G or "
        "T suffix, e.g. 4096, 64K or 1M");
    ERR("version 1\nallreduce device 2-8 1.5K-2K staged\n",
        "x.table:2:22: bad size '1.5K': expected digits with an optional K, M, G "
        "or T suffix, e.g. 4096, 64K or 1M");
    ERR("version 1\nallreduce device 2-8 0-99999999999999999999 staged\n",
        "x.table:2:24: bad size '99999999999999999999': too large for a byte count");
    ERR("version 1\nallreduce device 2-8 0-17179869184G staged\n",
        "x.table:2:24: bad size '17179869184G': too large for a byte count");

    /* Options. */
    ERR("version 1\nallreduce device 2-8 64K-16M chunked x=y\n",
        "x.table:2:38: unknown option 'x=y': expected chunk=SIZE, oneshot=SIZE or gdrcopy=SIZE");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked chunk\n",
        "x.table:2:38: unknown option 'chunk': expected chunk=SIZE, oneshot=SIZE or gdrcopy=SIZE");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked Chunk=1M\n",
        "x.table:2:38: unknown option 'Chunk=1M': expected chunk=SIZE, oneshot=SIZE or gdrcopy=SIZE");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked chunk=1M chunk=2M\n",
        "x.table:2:47: option 'chunk' is given twice");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked chunk=0\n",
        "x.table:2:44: bad chunk size '0': expected a size from 1 to 1G, e.g. "
        "chunk=1M");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked chunk=2G\n",
        "x.table:2:44: bad chunk size '2G': expected a size from 1 to 1G, e.g. "
        "chunk=1M");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked chunk=\n",
        "x.table:2:44: bad chunk size '': expected a size from 1 to 1G, e.g. "
        "chunk=1M");
    ERR("version 1\nallreduce device 2-8 64K-16M chunked chunk=1M;\n",
        "x.table:2:44: bad chunk size '1M;': expected a size from 1 to 1G, e.g. "
        "chunk=1M");

    ERR("version 1\nallreduce device 2-8 64K-16M ipc oneshot=1M oneshot=2M\n",
        "x.table:2:45: option 'oneshot' is given twice");
    ERR("version 1\nallreduce device 2-8 64K-16M ipc oneshot=0\n",
        "x.table:2:42: bad oneshot size '0': expected a size from 1 to 1G, e.g. "
        "oneshot=1M");
    ERR("version 1\nallreduce device 2-8 0-64K staged gdrcopy=8K gdrcopy=4K\n",
        "x.table:2:46: option 'gdrcopy' is given twice");
    ERR("version 1\nallreduce device 2-8 0-64K staged gdrcopy=2G\n",
        "x.table:2:43: bad gdrcopy size '2G': expected a size from 0 to 1G, e.g. "
        "gdrcopy=8K");

    /* Overlaps: same collective, intersecting memory kinds and ranges. */
    ERR("version 1\n"
        "# comment\n"
        "\n"
        "allreduce device 2-8 0-64K staged\n"
        "allreduce host 2-8 0-64K staged\n"
        "allreduce device 8-16 32K-1M chunked\n",
        "x.table:6:1: rule overlaps the rule on line 4 (allreduce device 2-8 "
        "0-64K): ranges of one collective and memory kind must not overlap");
    ERR("version 1\n"
        "allreduce host 1-inf 0-inf native\n"
        "  allreduce any 4 1M-2M staged\n",
        "x.table:3:3: rule overlaps the rule on line 2 (allreduce host 1-inf "
        "0-inf): ranges of one collective and memory kind must not overlap");
    ERR("version 1\n"
        "allreduce any 4 1M-2M staged\n"
        "allreduce device 1-4 0-1M staged\n"
        "allreduce device 1-4 2M-inf staged\n"
        "allreduce device 4-5 1048575-1048577 staged\n",
        "x.table:5:1: rule overlaps the rule on line 2 (allreduce any 4 "
        "1M-2M): ranges of one collective and memory kind must not overlap");
    ERR("version 1\n"
        "allreduce device 2-8 0-64K staged\n"
        "allreduce device 2-8 0-64K staged\n",
        "x.table:3:1: rule overlaps the rule on line 2 (allreduce device 2-8 "
        "0-64K): ranges of one collective and memory kind must not overlap");

    /* The version line. */
    ERR("allreduce device 2-8 0-64K staged\n",
        "x.table:1:1: expected 'version 1' or 'version 2' as the first line, got 'allreduce'");
    ERR("# header\n  Version 1\n",
        "x.table:2:3: expected 'version 1' or 'version 2' as the first line, got 'Version'");
    ERR("# header\nversion 3\n", "x.table:2:9: unsupported version 3, expected 1 or 2");
    ERR("version 10\n", "x.table:1:9: unsupported version 10, expected 1 or 2");
    ERR("version 0\n", "x.table:1:9: unsupported version 0, expected 1 or 2");
    ERR("version\n",
        "x.table:1:8: expected a version number after 'version': 1 or 2");
    ERR("version one\n", "x.table:1:9: bad version 'one': expected 'version 1' or 'version 2'");
    ERR("version 1.0\n", "x.table:1:9: bad version '1.0': expected 'version 1' or 'version 2'");
    ERR("version 1 extra\n", "x.table:1:11: unexpected 'extra' after 'version 1'");
    ERR("version 1\nversion 1\n",
        "x.table:2:1: unexpected 'version': the version line must come first, and "
        "only once");
    ERR("version 1\nallreduce device 2-8 0-64K staged\nversion 1\n",
        "x.table:3:1: unexpected 'version': the version line must come first, and "
        "only once");
    ERR("version 1; allreduce device 2-8 0-64K staged\n",
        "x.table:1:9: bad version '1;': expected 'version 1' or 'version 2'");

    /* Inline form: ';' separates lines, the version line is optional. */
    ERR_INLINE("allreduce device 1-inf 0-1M staged; allreduce device 1-inf 1M-inf "
               "chunked chunk=0",
               "COLLAR_ALLREDUCE_RULES:2:46: bad chunk size '0': expected a size "
               "from 1 to 1G, e.g. chunk=1M");
    ERR_INLINE("allreduce device 1-inf 0-1M staged; version 1",
               "COLLAR_ALLREDUCE_RULES:2:2: unexpected 'version': the version "
               "line must come first, and only once");
    ERR_INLINE("version 1;allreduce device 1-inf 0-1M staged;"
               "allreduce any 2 0-1K native",
               "COLLAR_ALLREDUCE_RULES:3:1: rule overlaps the rule on line 2 "
               "(allreduce device 1-inf 0-1M): ranges of one collective and "
               "memory kind must not overlap");
    ERR_INLINE("allreduce device 1-inf 0-1M staged # a comment ends here; bcast",
               "COLLAR_ALLREDUCE_RULES:2:2: unknown collective 'bcast': "
               "expected allreduce");

    /* Tokens in messages: at most 40 bytes, non-printable bytes escaped. */
    ERR("version 1\nallreduce aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1 0-1 native\n",
        "x.table:2:11: unknown memory kind 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...': "
        "expected one of host, device, any");
    ERR("version 1\nallreduce d\xc3\xa9vice 1 0-1 native\n",
        "x.table:2:11: unknown memory kind 'd\\xc3\\xa9vice': expected one of host, "
        "device, any");

    /* Binary data: NUL or control bytes anywhere, before any other check. */
    check_error_len(__LINE__, "version 1\nall\0reduce", 20, 0, "x.table",
                    "x.table:2:4: binary data: this is not a tuning table");
    check_error_len(__LINE__, "\0", 1, 0, "x.table",
                    "x.table:1:1: binary data: this is not a tuning table");
    ERR("bogus\nversion 1\n# \x01\n",
        "x.table:3:3: binary data: this is not a tuning table");
    ERR("version 1\nallreduce device 2-8 0-64K staged\x7f\n",
        "x.table:2:34: binary data: this is not a tuning table");
    ERR("version 1\f\n", "x.table:1:10: binary data: this is not a tuning table");
    ERR("\x7f" "ELF\x02\x01\x01", "x.table:1:1: binary data: this is not a tuning table");

    /* Lines: at most 4096 bytes without the line ending, CR LF or LF. */
    {
        size_t n = 5000;
        char *text = malloc(n + 32);
        if (text == NULL) {
            printf("FAIL: out of memory\n");
            exit(1);
        }
        memcpy(text, "version 1\n# ", 12);
        memset(text + 12, 'x', n);
        strcpy(text + 12 + n, "\n");
        ERR(text, "x.table:2:4097: line is longer than 4096 bytes");
        /* Exactly 4096 bytes is fine, with LF or CR LF. */
        memset(text + 10, 'x', 4096);
        text[10] = '#';
        strcpy(text + 10 + 4096, "\r\n");
        collar_table_t t;
        if (OK(text, 0, &t)) {
            UNIT_CHECK(t.nrules == 0, "%d rules", t.nrules);
            collar_table_free(&t);
        }
        strcpy(text + 10 + 4096, "x\r\n");
        ERR(text, "x.table:2:4097: line is longer than 4096 bytes");
        free(text);
    }

    /* Too many rules: 4096 is the limit. */
    {
        size_t cap = 4100 * 48;
        char *text = malloc(cap);
        size_t o = (size_t)snprintf(text, cap, "version 1\n");
        for (int i = 1; i <= 4096; i++) {
            o += (size_t)snprintf(text + o, cap - o, "allreduce host %d 0-inf native\n", i);
        }
        collar_table_t t;
        if (OK(text, 0, &t)) {
            UNIT_CHECK(t.nrules == 4096, "%d rules", t.nrules);
            const collar_rule_t *r = collar_table_match(&t, COLLAR_COLL_ALLREDUCE,
                                                        COLLAR_MEM_HOST, 4096, 1);
            UNIT_CHECK(r != NULL && r->line == 4097, "last rule");
            collar_table_free(&t);
        }
        snprintf(text + o, cap - o, "\n  allreduce host 4097 0-inf native\n");
        ERR(text, "x.table:4099:3: too many rules: the limit is 4096");
        free(text);
    }

    /* A message larger than err is cut, never overrun; no err at all is fine. */
    {
        collar_table_t t;
        char small[12];
        memset(small, 'Z', sizeof(small));
        collar_status_t st = collar_table_parse("bogus", 5, "x.table", 0, &t,
                                                small, 8);
        UNIT_CHECK(st == COLLAR_ERR_INVALID && strcmp(small, "x.table") == 0
                   && small[8] == 'Z', "small err '%.8s'", small);
        st = collar_table_parse("bogus", 5, "x.table", 0, &t, NULL, 0);
        UNIT_CHECK(st == COLLAR_ERR_INVALID && table_is_empty(&t), "no err");
        st = collar_table_parse(NULL, 3, "x.table", 0, &t, small, sizeof(small));
        UNIT_CHECK(st == COLLAR_ERR_INVALID && table_is_empty(&t), "NULL text");
        st = collar_table_parse("bogus", 5, NULL, 0, &t, small, sizeof(small));
        UNIT_CHECK(st == COLLAR_ERR_INVALID, "NULL name");
    }
}

/* ------------------------------------------------------------ valid tables */

static void test_valid(void)
{
    collar_table_t t, u;
    if (!OK(example, 0, &t)) {
        return;
    }
    UNIT_CHECK(t.nrules == 3, "%d rules", t.nrules);
    UNIT_CHECK(t.version == 1, "version %d", t.version);
    UNIT_CHECK(strcmp(t.system, "1x H200, Open MPI 5.0") == 0, "system '%s'", t.system);
    const collar_rule_t *r = t.rules;
    UNIT_CHECK(r[0].coll == COLLAR_COLL_ALLREDUCE && r[0].mem == COLLAR_MEM_DEVICE
               && r[0].ranks_lo == 2 && r[0].ranks_hi == 8 && r[0].bytes_lo == 0
               && r[0].bytes_hi == 65536 && r[0].alg == COLLAR_ALG_STAGED
               && r[0].chunk == 0 && r[0].line == 4, "rule 0");
    UNIT_CHECK(r[1].mem == COLLAR_MEM_DEVICE && r[1].bytes_lo == 65536
               && r[1].bytes_hi == (size_t)16 << 20 && r[1].alg == COLLAR_ALG_CHUNKED
               && r[1].chunk == (size_t)1 << 20 && r[1].line == 5, "rule 1");
    UNIT_CHECK(r[2].mem == COLLAR_MEM_ANY && r[2].ranks_lo == 1
               && r[2].ranks_hi == INT_MAX && r[2].bytes_lo == (size_t)16 << 20
               && r[2].bytes_hi == SIZE_MAX && r[2].chunk == (size_t)4 << 20
               && r[2].line == 6, "rule 2 (inf bounds)");

    /* CR LF, tabs, comments, other spellings of the same sizes: same rules,
     * same hash. */
    if (OK(example_crlf, 0, &u)) {
        UNIT_CHECK(collar_table_same_rules(&t, &u) && u.hash == t.hash, "CR LF differs");
        UNIT_CHECK(strcmp(u.system, t.system) == 0, "CR LF system '%s'", u.system);
        collar_table_free(&u);
    }
    if (OK(example_tabs, 0, &u)) {
        UNIT_CHECK(collar_table_same_rules(&t, &u) && u.hash == t.hash, "tabs differ");
        UNIT_CHECK(u.system[0] == '\0' && u.version == 1, "tabs: system '%s'",
                   u.system);
        collar_table_free(&u);
    }
    if (OK(example_inline, 1, &u)) {
        UNIT_CHECK(collar_table_same_rules(&t, &u) && u.hash == t.hash, "inline differs");
        UNIT_CHECK(u.version == 0, "inline version %d", u.version);
        UNIT_CHECK(u.rules[1].line == 2 && u.rules[2].line == 3, "inline lines");
        collar_table_free(&u);
    }
    if (OK("version 1 ; allreduce device 2-8 0-64K staged;;\n"
           "allreduce device 2-8 64K-16M chunked chunk=1M ;"
           "allreduce any 1-inf 16M-inf chunked chunk=4M # system: inline", 1, &u)) {
        UNIT_CHECK(collar_table_same_rules(&t, &u) && u.hash == t.hash, "inline with version");
        UNIT_CHECK(u.version == 1 && strcmp(u.system, "inline") == 0,
                   "inline version %d system '%s'", u.version, u.system);
        collar_table_free(&u);
    }
    /* A different chunk is a different table. */
    if (OK("version 1\nallreduce device 2-8 0-64K staged\n"
           "allreduce device 2-8 64K-16M chunked chunk=2M\n"
           "allreduce any 1-inf 16M-inf chunked chunk=4M\n", 0, &u)) {
        UNIT_CHECK(u.hash != t.hash, "hash ignores the chunk");
        collar_table_free(&u);
    }
    collar_table_free(&t);
    UNIT_CHECK(table_is_empty(&t), "free zeroes");
    collar_table_free(&t);  /* twice is harmless */

    /* Zero rules. */
    static const char *const empty[] = {
        "", "version 1", "version 1\n", "version 001\r\n# nothing else\n\n",
        "# only a comment\n", "\n\n  \t \n", "version 1\n# system: \n",
    };
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        if (OK(empty[i], 0, &u)) {
            UNIT_CHECK(u.nrules == 0 && u.rules == NULL && u.version == 1
                       && u.system[0] == '\0', "empty %zu", i);
            UNIT_CHECK(u.hash == 0xcbf29ce484222325ull, "empty hash %zu", i);
            collar_table_free(&u);
        }
    }
    static const char *const empty_inline[] = { "", ";", " ; ;\t;", "# x;# y" };
    for (size_t i = 0; i < sizeof(empty_inline) / sizeof(empty_inline[0]); i++) {
        if (OK(empty_inline[i], 1, &u)) {
            UNIT_CHECK(u.nrules == 0 && u.version == 0, "empty inline %zu", i);
            collar_table_free(&u);
        }
    }
    UNIT_CHECK(collar_table_parse(NULL, 0, "null", 0, &u, NULL, 0) == COLLAR_OK
               && u.nrules == 0, "NULL text, length 0");
    collar_table_free(&u);

    /* Single rank, adjacent ranges, size spellings. */
    if (OK("version 1\n"
           "allreduce host 4 0-1 native\n"
           "allreduce host 5-5 0-1 native\n"
           "allreduce host 4-5 1-1k native\n"
           "allreduce host 4-5 1KiB-1mb native\n"
           "allreduce host 4-5 1M-1T native\n"
           "allreduce host 4-5 1T-18446744073709551615 native\n"
           "allreduce host 6-2147483647 0-inf native\n", 0, &u)) {
        UNIT_CHECK(u.nrules == 7, "%d rules", u.nrules);
        UNIT_CHECK(u.rules[0].ranks_lo == 4 && u.rules[0].ranks_hi == 4, "single");
        UNIT_CHECK(u.rules[2].bytes_hi == 1024 && u.rules[3].bytes_hi == 1 << 20,
                   "suffixes");
        UNIT_CHECK(u.rules[4].bytes_hi == (size_t)1 << 40, "T");
        UNIT_CHECK(u.rules[5].bytes_hi == SIZE_MAX, "max size");
        UNIT_CHECK(u.rules[6].ranks_hi == INT_MAX, "max ranks");
        collar_table_free(&u);
    }

    /* System: the first non-empty one, trimmed, up to a middle dot, cut to fit
     * at a character boundary. */
    if (OK("# system:   \n#system:\tA  B \xc2\xb7 C\n# system: second\nversion 1\n", 0, &u)) {
        UNIT_CHECK(strcmp(u.system, "A  B") == 0, "system '%s'", u.system);
        collar_table_free(&u);
    }
    if (OK("version 1 # system: a\tb\r\n", 0, &u)) {
        UNIT_CHECK(strcmp(u.system, "a b") == 0, "tab in system '%s'", u.system);
        collar_table_free(&u);
    }
    {
        char text[600];
        size_t o = (size_t)snprintf(text, sizeof(text), "# system: x");
        for (int i = 0; i < 200; i++) {
            o += (size_t)snprintf(text + o, sizeof(text) - o, "\xc3\xa9");
        }
        snprintf(text + o, sizeof(text) - o, "\nversion 1\n");
        if (OK(text, 0, &u)) {
            /* "x" + 127 two-byte characters = 255 bytes. */
            size_t n = strlen(u.system);
            UNIT_CHECK(n == 255 && u.system[0] == 'x'
                       && (unsigned char)u.system[253] == 0xc3, "cut at %zu", n);
            collar_table_free(&u);
        }
        text[10] = 'y';  /* "x" -> "xy": 256 bytes fit no longer */
        memmove(text + 11, text + 10, strlen(text + 10) + 1);
        text[10] = 'x';
        if (OK(text, 0, &u)) {
            size_t n = strlen(u.system);
            UNIT_CHECK(n == 254 && (unsigned char)u.system[252] == 0xc3,
                       "cut at %zu", n);
            collar_table_free(&u);
        }
    }

    /* The shipped default table parses ($srcdir is the tests directory
     * under make check; from the top of the tree it is found too). */
    char path[1024];
    const char *srcdir = getenv("srcdir");
    snprintf(path, sizeof(path), "%s/../tuning/default.table",
             srcdir != NULL ? srcdir : "tests");
    if (access(path, R_OK) == 0) {
        char err[ERRLEN];
        collar_status_t st = collar_table_load(path, &u, err, sizeof(err));
        UNIT_CHECK(st == COLLAR_OK && u.nrules > 0, "default.table: %s", err);
        collar_table_free(&u);
    } else {
        printf("%s not found: not checked\n", path);
    }
}

/* ---------------------------------------------------------------- matching */

static const collar_rule_t *match(const collar_table_t *t, int mem, int ranks,
                                  size_t bytes)
{
    return collar_table_match(t, COLLAR_COLL_ALLREDUCE, (collar_mem_kind_t)mem,
                              ranks, bytes);
}

static void test_match(void)
{
    collar_table_t t;
    if (!OK(example, 0, &t)) {
        return;
    }
    const collar_rule_t *r0 = &t.rules[0], *r1 = &t.rules[1], *r2 = &t.rules[2];
    const size_t M16 = (size_t)16 << 20;

    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 2, 0) == r0, "lowest corner");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 8, 65535) == r0, "ranks_hi inclusive");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 8, 65536) == r1, "bytes_hi exclusive");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 2, M16 - 1) == r1, "below 16M");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 2, M16) == r2, "16M: any");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 1, 0) == NULL, "1 rank, small");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 9, 100) == NULL, "9 ranks, small");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 0, M16) == NULL, "0 ranks");
    UNIT_CHECK(match(&t, COLLAR_MEM_HOST, 4, 100) == NULL, "host, small");
    UNIT_CHECK(match(&t, COLLAR_MEM_HOST, 4, M16) == r2, "host, any rule");
    UNIT_CHECK(match(&t, COLLAR_MEM_MANAGED, 4, M16) == r2, "managed, any rule");
    UNIT_CHECK(match(&t, COLLAR_MEM_MANAGED, 4, 100) == NULL, "managed, small");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, INT_MAX, SIZE_MAX) == r2, "inf ends");
    UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 1, SIZE_MAX - 1) == r2, "large");
    UNIT_CHECK(collar_table_match(&t, (collar_coll_t)7, COLLAR_MEM_DEVICE, 2, 0)
               == NULL, "other collective");

    collar_table_free(&t);

    /* Speed: a linear scan of ten rules, most calls matching late or not. */
    if (OK("version 1\n"
           "allreduce host 1-inf 0-inf native\n"
           "allreduce device 1 0-inf native\n"
           "allreduce device 2-8 0-64K staged\n"
           "allreduce device 2-8 64K-1M chunked chunk=256K\n"
           "allreduce device 2-8 1M-16M chunked chunk=1M\n"
           "allreduce device 2-8 16M-inf chunked chunk=4M\n"
           "allreduce device 9-64 0-64K staged\n"
           "allreduce device 9-64 64K-1M chunked chunk=256K\n"
           "allreduce device 9-64 1M-inf chunked chunk=1M\n"
           "allreduce device 65-inf 0-inf chunked chunk=1M\n", 0, &t)) {
        const int iters = 1000000;
        uintptr_t sink = 0;
        double ns = 1e9;
        for (int round = 0; round < 3; round++) {  /* the best of three */
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            for (int i = 0; i < iters; i++) {
                sink += (uintptr_t)match(&t, COLLAR_MEM_DEVICE, 1 + (i & 127),
                                         (size_t)i << 4);
            }
            clock_gettime(CLOCK_MONOTONIC, &b);
            double d = ((double)(b.tv_sec - a.tv_sec) * 1e9
                        + (double)(b.tv_nsec - a.tv_nsec)) / iters;
            ns = d < ns ? d : ns;
        }
        /* Sanitizers slow it down several times; valgrind, fifty. */
        const char *pre = getenv("LD_PRELOAD");
        int valgrind = pre != NULL && strstr(pre, "vgpreload") != NULL;
        double limit = SANITIZED ? 1000.0 : 100.0;
        printf("match: %.1f ns per call (10 rules)%s\n", ns,
               valgrind ? ", under valgrind: not checked" : "");
        UNIT_CHECK(valgrind || ns < limit, "match takes %.1f ns (%lu)", ns,
                   (unsigned long)(sink & 1));
        collar_table_free(&t);
    }

    /* First rule wins (a table built by hand: parse rejects overlaps). */
    collar_rule_t rules[2];
    memset(rules, 0, sizeof(rules));
    rules[0] = (collar_rule_t){ .coll = COLLAR_COLL_ALLREDUCE,
                                .mem = COLLAR_MEM_ANY, .ranks_lo = 1,
                                .ranks_hi = 4, .bytes_hi = 100,
                                .alg = COLLAR_ALG_NATIVE, .line = 1 };
    rules[1] = (collar_rule_t){ .coll = COLLAR_COLL_ALLREDUCE,
                                .mem = COLLAR_MEM_DEVICE, .ranks_lo = 1,
                                .ranks_hi = 4, .bytes_hi = 100,
                                .alg = COLLAR_ALG_STAGED, .line = 2 };
    collar_table_t h = { rules, 2, 1, "", 0 };
    UNIT_CHECK(match(&h, COLLAR_MEM_DEVICE, 2, 5) == &rules[0], "first wins");
    rules[0].mem = COLLAR_MEM_HOST;
    UNIT_CHECK(match(&h, COLLAR_MEM_DEVICE, 2, 5) == &rules[1], "host skipped");
    UNIT_CHECK(match(&h, COLLAR_MEM_HOST, 2, 5) == &rules[0], "host first");

    collar_table_t none;
    memset(&none, 0, sizeof(none));
    UNIT_CHECK(match(&none, COLLAR_MEM_DEVICE, 2, 5) == NULL, "empty table");
    UNIT_CHECK(match(NULL, COLLAR_MEM_DEVICE, 2, 5) == NULL, "NULL table");
}

/* ------------------------------------------------------------ write, hash */

static char *write_table(const collar_table_t *t, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f == NULL) {
        return NULL;
    }
    collar_table_write(t, f);
    fclose(f);
    return buf;
}

/* ipc's oneshot= option: parsed, in the canonical form (after chunk=), in
 * the hash and in the comparison of rules. */
static void test_oneshot(void)
{
    collar_table_t t, u;
    if (!OK("version 1\nallreduce device 2-8 0-inf ipc oneshot=256KiB chunk=1m\n",
            0, &t)) {
        return;
    }
    UNIT_CHECK(t.nrules == 1 && t.rules[0].alg == COLLAR_ALG_IPC
               && t.rules[0].oneshot == 256 * 1024 && t.rules[0].chunk == 1 << 20,
               "ipc rule with oneshot=256K");
    char buf[160];
    collar_rule_format(&t.rules[0], buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "allreduce device 2-8 0-inf ipc chunk=1M oneshot=256K") == 0,
               "canonical: %s", buf);
    if (OK("version 1\nallreduce device 2-8 0-inf ipc oneshot=512K chunk=1M\n",
           0, &u)) {
        UNIT_CHECK(!collar_table_same_rules(&t, &u) && t.hash != u.hash,
                   "oneshot= counts in the identity of a table");
        collar_table_free(&u);
    }
    collar_table_free(&t);
}

/* staged's gdrcopy= option: a size, or 0 for never; in the canonical
 * form (after chunk= and oneshot=), in the hash and in the comparison of
 * rules; absent, 0 in the rule (the default applies). */
static void test_gdrcopy(void)
{
    collar_table_t t, u;
    if (!OK("version 1\nallreduce device 2-8 0-64K staged gdrcopy=4KiB\n"
            "allreduce device 2-8 64K-1M chunked gdrcopy=0 chunk=64K\n"
            "allreduce device 2-8 1M-inf chunked\n", 0, &t)) {
        return;
    }
    UNIT_CHECK(t.nrules == 3 && t.rules[0].gdrcopy == 4096
               && t.rules[1].gdrcopy == COLLAR_GDRCOPY_NEVER
               && t.rules[2].gdrcopy == 0, "gdrcopy=4K, gdrcopy=0, absent");
    char buf[160];
    collar_rule_format(&t.rules[1], buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "allreduce device 2-8 64K-1M chunked chunk=64K gdrcopy=0") == 0,
               "canonical: %s", buf);
    collar_rule_format(&t.rules[0], buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "allreduce device 2-8 0-64K staged gdrcopy=4K") == 0,
               "canonical: %s", buf);
    if (OK("version 1\nallreduce device 2-8 0-64K staged gdrcopy=8K\n"
           "allreduce device 2-8 64K-1M chunked gdrcopy=0 chunk=64K\n"
           "allreduce device 2-8 1M-inf chunked\n", 0, &u)) {
        UNIT_CHECK(!collar_table_same_rules(&t, &u) && t.hash != u.hash,
                   "gdrcopy= counts in the identity of a table");
        collar_table_free(&u);
    }
    collar_table_free(&t);
}

static void test_write(void)
{
    collar_table_t t, u;
    if (!OK(example_tabs, 0, &t)) {
        return;
    }
    snprintf(t.system, sizeof(t.system), "1x H200, Open MPI 5.0");
    size_t len = 0;
    char *text = write_table(&t, &len);
    UNIT_CHECK(text != NULL && strcmp(text, canonical) == 0, "canonical:\n%s",
               text ? text : "(null)");
    if (text != NULL && OK(text, 0, &u)) {
        UNIT_CHECK(collar_table_same_rules(&t, &u) && u.hash == t.hash
                   && strcmp(u.system, t.system) == 0, "round trip");
        collar_table_free(&u);
    }
    free(text);
    collar_table_free(&t);

    /* Every size suffix, single ranks, inf ends, odd sizes. */
    static const char odd[] =
        "version 1\n"
        "allreduce host 1 0-1 native\n"
        "allreduce host 1 1-1023 native\n"
        "allreduce host 1 1023-1025 native\n"
        "allreduce host 1 1025-3K native\n"
        "allreduce host 1 3K-1536K native\n"
        "allreduce host 1 1536K-3072M native\n"
        "allreduce host 1 3072M-2048G chunked chunk=1073741824\n"
        "allreduce host 1 2048G-18446744073709551615 chunked chunk=1023\n"
        "allreduce host 2-2147483647 0-inf staged chunk=1025K\n"
        "allreduce device 2147483647 0-1 native\n";
    static const char odd_canonical[] =
        "# collar tuning table\n"
        "version 1\n"
        "# collective memory ranks bytes algorithm options\n"
        "allreduce host 1 0-1 native\n"
        "allreduce host 1 1-1023 native\n"
        "allreduce host 1 1023-1025 native\n"
        "allreduce host 1 1025-3K native\n"
        "allreduce host 1 3K-1536K native\n"
        "allreduce host 1 1536K-3G native\n"
        "allreduce host 1 3G-2T chunked chunk=1G\n"
        "allreduce host 1 2T-inf chunked chunk=1023\n"
        "allreduce host 2-inf 0-inf staged chunk=1025K\n"
        "allreduce device 2147483647 0-1 native\n";
    if (OK(odd, 0, &t)) {
        text = write_table(&t, &len);
        UNIT_CHECK(text != NULL && strcmp(text, odd_canonical) == 0,
                   "odd canonical:\n%s", text ? text : "(null)");
        if (text != NULL && OK(text, 0, &u)) {
            UNIT_CHECK(collar_table_same_rules(&t, &u) && u.hash == t.hash, "odd round trip");
            collar_table_free(&u);
        }
        free(text);
        collar_table_free(&t);
    }

    /* An empty table writes a header that parses to an empty table. */
    memset(&t, 0, sizeof(t));
    text = write_table(&t, &len);
    if (text != NULL && OK(text, 0, &u)) {
        UNIT_CHECK(u.nrules == 0 && u.hash == 0xcbf29ce484222325ull, "empty");
        collar_table_free(&u);
    }
    free(text);
    collar_table_write(NULL, stdout);  /* no-op */
}

/* ------------------------------------------------------------------- load */

static char tmpdir[64];

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    UNIT_CHECK(f != NULL, "cannot create %s", path);
    if (f != NULL) {
        UNIT_CHECK(fwrite(data, 1, len, f) == len, "short write");
        fclose(f);
    }
}

static void check_load(int line, const char *path, collar_status_t want_st,
                       const char *want)
{
    collar_table_t t;
    char err[ERRLEN];
    memset(&t, 0x5a, sizeof(t));
    collar_status_t st = collar_table_load(path, &t, err, sizeof(err));
    UNIT_CHECK(st == want_st, "line %d: status %d", line, st);
    UNIT_CHECK(strcmp(err, want) == 0, "line %d:\n  got  '%s'\n  want '%s'", line,
               err, want);
    if (st != COLLAR_OK) {
        UNIT_CHECK(table_is_empty(&t), "line %d: not empty", line);
    }
    collar_table_free(&t);
}

static void test_load(void)
{
    char path[256], want[512];
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/collar-test-tuning-XXXXXX");
    UNIT_CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");

    check_load(__LINE__, "/nonexistent/collar/x.table", COLLAR_ERR_INVALID,
               "/nonexistent/collar/x.table: cannot read: No such file or directory");
    snprintf(want, sizeof(want), "%s: cannot read: Is a directory", tmpdir);
    check_load(__LINE__, tmpdir, COLLAR_ERR_INVALID, want);

    /* A valid file; an empty one. */
    snprintf(path, sizeof(path), "%s/good.table", tmpdir);
    write_file(path, example, strlen(example));
    collar_table_t t;
    char err[ERRLEN];
    UNIT_CHECK(collar_table_load(path, &t, err, sizeof(err)) == COLLAR_OK
               && t.nrules == 3 && strcmp(t.system, "1x H200, Open MPI 5.0") == 0,
               "good.table: %s", err);
    collar_table_free(&t);
    snprintf(path, sizeof(path), "%s/empty.table", tmpdir);
    write_file(path, "", 0);
    check_load(__LINE__, path, COLLAR_OK, "");

    /* Errors carry the path. */
    snprintf(path, sizeof(path), "%s/bad.table", tmpdir);
    write_file(path, "version 1\nallreduce device 2-8 0-64K rign\n", 41);
    snprintf(want, sizeof(want), "%s:2:28: unknown algorithm 'rign': expected "
             "one of native, staged, chunked, ring, ipc, hier, nccl", path);
    check_load(__LINE__, path, COLLAR_ERR_INVALID, want);

    /* A NUL byte. */
    snprintf(path, sizeof(path), "%s/nul.table", tmpdir);
    write_file(path, "version 1\nall\0reduce device 2-8 0-64K staged\n", 45);
    snprintf(want, sizeof(want), "%s:2:4: binary data: this is not a tuning table",
             path);
    check_load(__LINE__, path, COLLAR_ERR_INVALID, want);

    /* Exactly 1 MiB of comments is fine; one byte more is not. */
    size_t big = COLLAR_TABLE_MAX_BYTES + 1;
    char *data = malloc(big);
    memcpy(data, "version 1\n", 10);
    for (size_t i = 10; i < big; i++) {
        data[i] = (i % 64 == 63) ? '\n' : (i % 64 == 0 || i == 10 ? '#' : 'c');
    }
    data[COLLAR_TABLE_MAX_BYTES - 1] = '\n';
    snprintf(path, sizeof(path), "%s/1mib.table", tmpdir);
    write_file(path, data, COLLAR_TABLE_MAX_BYTES);
    check_load(__LINE__, path, COLLAR_OK, "");
    snprintf(path, sizeof(path), "%s/big.table", tmpdir);
    write_file(path, data, big);
    snprintf(want, sizeof(want), "%s: file is larger than 1 MiB", path);
    check_load(__LINE__, path, COLLAR_ERR_INVALID, want);

    /* One line of a million bytes. */
    memcpy(data, "version 1\n# ", 12);
    memset(data + 12, 'x', 1000000);
    data[12 + 1000000] = '\n';
    snprintf(path, sizeof(path), "%s/longline.table", tmpdir);
    write_file(path, data, 12 + 1000000 + 1);
    snprintf(want, sizeof(want), "%s:2:4097: line is longer than 4096 bytes", path);
    check_load(__LINE__, path, COLLAR_ERR_INVALID, want);
    free(data);

    /* Unreadable (root reads anything: skipped then). */
    if (geteuid() != 0) {
        snprintf(path, sizeof(path), "%s/unreadable.table", tmpdir);
        write_file(path, example, strlen(example));
        chmod(path, 0);
        snprintf(want, sizeof(want), "%s: cannot read: Permission denied", path);
        check_load(__LINE__, path, COLLAR_ERR_INVALID, want);
        unlink(path);
    }

    UNIT_CHECK(collar_table_load(NULL, &t, err, sizeof(err)) == COLLAR_ERR_INVALID,
               "NULL path");
    static const char *const names[] = {
        "good.table", "empty.table", "bad.table", "nul.table", "1mib.table",
        "big.table", "longline.table",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}


/* ------------------------------------------------------------- node shape */

/* Copies of the tables of version 1 as they were before version 2 (the
 * built-in rules and the test fixtures): they load with the same rules and
 * the same hash as the version 1 parser gave them. */
static void test_version1_tables(void)
{
    static const struct {
        const char *name;
        int         nrules;
        uint64_t    hash;
    } v1[] = {
        { "default.table", 3, 0x72e4b51f4ce2f50full },
        { "chunked_1k.table", 3, 0x6ab5be65569dd026ull },
        { "site_default.table", 1, 0x74d4e0c73ce4bd04ull },
    };
    const char *srcdir = getenv("srcdir");
    for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++) {
        char path[1024], err[ERRLEN];
        snprintf(path, sizeof(path), "%s/tables/v1/%s",
                 srcdir != NULL ? srcdir : "tests", v1[i].name);
        collar_table_t t;
        collar_status_t st = collar_table_load(path, &t, err, sizeof(err));
        UNIT_CHECK(st == COLLAR_OK && t.version == 1 && t.nrules == v1[i].nrules
                   && t.hash == v1[i].hash, "%s: %s, version %d, %d rules, "
                   "hash %016llx", path, err, t.version, t.nrules,
                   (unsigned long long)t.hash);
        for (int r = 0; st == COLLAR_OK && r < t.nrules; r++) {
            UNIT_CHECK(!collar_rule_shaped(&t.rules[r]), "%s: rule %d shaped",
                       path, r);
        }
        collar_table_free(&t);
    }
}

static const char shaped[] =
    "version 2\n"
    "allreduce device 1-inf 0-inf   nodes=1   ipc\n"
    "allreduce device 1-inf 0-inf   nodes=2-inf ppn=2-inf hier chunk=2M\n"
    "allreduce device 1-inf 0-256K  staged\n"
    "allreduce device 1-inf 256K-inf chunked chunk=1M\n";

static const collar_rule_t *match_shape(const collar_table_t *t, int ranks,
                                        int nodes, int ppn_min, int ppn_max)
{
    const collar_select_key_t key = {
        .coll = COLLAR_COLL_ALLREDUCE, .mem = COLLAR_MEM_DEVICE,
        .comm_size = ranks, .bytes = 1 << 20, .nodes = nodes,
        .ppn_min = ppn_min, .ppn_max = ppn_max,
    };
    return collar_table_match_key(t, &key, COLLAR_MEM_DEVICE);
}

static void test_shape(void)
{
    collar_table_t t;
    if (OK(shaped, 0, &t)) {
        const collar_rule_t *ipc = &t.rules[0], *hier = &t.rules[1];
        const collar_rule_t *chunked = &t.rules[3];
        UNIT_CHECK(t.version == 2 && ipc->nodes_lo == 1 && ipc->nodes_hi == 1
                   && ipc->ppn_lo == 0 && hier->nodes_lo == 2
                   && hier->nodes_hi == INT_MAX && hier->ppn_lo == 2
                   && hier->ppn_hi == INT_MAX, "shape keys parsed");
        UNIT_CHECK(match_shape(&t, 4, 1, 4, 4) == ipc, "one node: ipc");
        UNIT_CHECK(match_shape(&t, 4, 2, 2, 2) == hier, "two nodes: hier");
        UNIT_CHECK(match_shape(&t, 5, 2, 2, 3) == hier, "uneven nodes: hier");
        UNIT_CHECK(match_shape(&t, 3, 2, 1, 2) == chunked,
                   "a node of one rank is outside ppn=2-inf");
        UNIT_CHECK(match_shape(&t, 4, 0, 0, 0) == chunked,
                   "unknown nodes: only rules without a shape");
        UNIT_CHECK(match(&t, COLLAR_MEM_DEVICE, 4, 1 << 20) == chunked,
                   "collar_table_match: shape unknown");
        char buf[256];
        collar_rule_format(hier, buf, sizeof(buf));
        UNIT_CHECK(strcmp(buf, "allreduce device 1-inf 0-inf nodes=2-inf "
                          "ppn=2-inf hier chunk=2M") == 0, "canonical: %s", buf);

        /* Written back: version 2, same rules and hash. */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        collar_table_write(&t, f);
        fclose(f);
        collar_table_t u;
        if (OK(text, 0, &u)) {
            UNIT_CHECK(u.version == 2 && u.hash == t.hash
                       && collar_table_same_rules(&t, &u), "written back");
            collar_table_free(&u);
        }
        UNIT_CHECK(strstr(text, "\nversion 2\n") != NULL, "writes version 2");
        free(text);
        collar_table_free(&t);
    }
    /* A table without shapes is written as version 1. */
    if (OK("version 2\nallreduce host 1-inf 0-inf native\n", 0, &t)) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        collar_table_write(&t, f);
        fclose(f);
        UNIT_CHECK(strstr(text, "\nversion 1\n") != NULL, "no shape: version 1");
        free(text);
        collar_table_free(&t);
    }
    /* Inline rules: shapes without a version line. */
    if (OK("allreduce device 1-inf 0-inf nodes=1 ppn=4 ipc", 1, &t)) {
        UNIT_CHECK(t.nrules == 1 && t.rules[0].ppn_lo == 4
                   && match_shape(&t, 4, 1, 4, 4) == &t.rules[0]
                   && match_shape(&t, 8, 1, 8, 8) == NULL, "inline shape");
        collar_table_free(&t);
    }

    /* Errors: file:line:column and what, like the other keys. */
    ERR("version 1\nallreduce device 1-inf 0-inf nodes=1 ipc\n",
        "x.table:2:30: node shape 'nodes=1' needs 'version 2' (a version 1 "
        "table has no node shapes)");
    ERR_INLINE("version 1; allreduce device 1-inf 0-inf ppn=2 ipc",
               "COLLAR_ALLREDUCE_RULES:2:31: node shape 'ppn=2' needs 'version "
               "2' (a version 1 table has no node shapes)");
    ERR("version 2\nallreduce device 1-inf 0-inf nodes=0 ipc\n",
        "x.table:2:36: bad node range '0': nodes start at 1");
    ERR("version 2\nallreduce device 1-inf 0-inf nodes=2+ ipc\n",
        "x.table:2:36: bad node range '2+': expected N, N-M or N-inf with whole "
        "numbers 1 <= N <= M");
    ERR("version 2\nallreduce device 1-inf 0-inf nodes= ipc\n",
        "x.table:2:36: bad node range '': expected N, N-M or N-inf with whole "
        "numbers 1 <= N <= M");
    ERR("version 2\nallreduce device 1-inf 0-inf ppn=8-2 ipc\n",
        "x.table:2:34: bad ranks-per-node range '8-2': the lower bound exceeds "
        "the upper");
    ERR("version 2\nallreduce device 1-inf 0-inf ppn=inf ipc\n",
        "x.table:2:34: bad ranks-per-node range 'inf': inf is only allowed as "
        "the upper bound");
    ERR("version 2\nallreduce device 1-inf 0-inf nodes=1 nodes=2 ipc\n",
        "x.table:2:38: key 'nodes' is given twice");
    ERR("version 2\nallreduce device 1-inf 0-inf nodes=1\n",
        "x.table:2:37: expected an algorithm (native, staged, chunked, ring, "
        "ipc, hier, nccl) after 'nodes=1'");
    ERR("version 2\nallreduce device 1-inf 0-inf ipc nodes=1\n",
        "x.table:2:34: node shape 'nodes=1' after the algorithm: it comes "
        "between the byte range and the algorithm");
    /* Shaped rules overlap shaped ones; a rule without a shape overlaps
     * neither. */
    ERR("version 2\n"
        "allreduce device 1-inf 0-inf nodes=1-2 ipc\n"
        "allreduce device 1-inf 0-inf nodes=2-inf hier\n",
        "x.table:3:1: rule overlaps the rule on line 2 (allreduce device 1-inf "
        "0-inf nodes=1-2): ranges of one collective and memory kind must not "
        "overlap");
    ERR("version 2\n"
        "allreduce device 1-inf 0-inf nodes=1 ipc\n"
        "allreduce any 1-inf 0-inf ppn=4 hier\n",
        "x.table:3:1: rule overlaps the rule on line 2 (allreduce device 1-inf "
        "0-inf nodes=1): ranges of one collective and memory kind must not "
        "overlap");
    if (OK("version 2\n"
           "allreduce device 1-inf 0-inf nodes=1 ppn=1-4 ipc\n"
           "allreduce device 1-inf 0-inf nodes=1 ppn=5-inf staged\n", 0, &t)) {
        UNIT_CHECK(match_shape(&t, 8, 1, 8, 8) == &t.rules[1], "ppn 8");
        collar_table_free(&t);
    }
}

int main(void)
{
    test_errors();
    test_valid();
    test_match();
    test_oneshot();
    test_gdrcopy();
    test_write();
    test_load();
    test_version1_tables();
    test_shape();
    return unit_finish("test_tuning");
}
