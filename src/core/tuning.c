/*
 * collar - tuning tables: parse, match, write.
 *
 * A table is text, one rule a line:
 *
 *   # collar tuning table · system: 1x H200, Open MPI 5.0 · made by collar-tune
 *   version 2
 *   # collective memory ranks bytes   [shape]  algorithm options
 *   allreduce    device  2-8   0-64K           staged
 *   allreduce    device  2-8   64K-inf nodes=1 ipc
 *   allreduce    device  2-8   64K-inf         chunked   chunk=1M
 *
 * Version 2 adds the node shape between the bytes and the algorithm
 * (nodes=N[-M], ppn=N[-M]: nodes spanned, ranks on each node); version 1
 * tables, which have none, read as before.  A shaped rule matches only a
 * communicator whose shape is known and within it, and is preferred over a
 * rule without a shape; rules overlap only with rules of their own kind.
 *
 * Forgiving in whitespace (spaces, tabs, CR LF), strict in meaning: every
 * token is checked, and the first bad one rejects the whole table with one
 * message "NAME:LINE:COLUMN: what was expected".  Rank ranges are inclusive,
 * byte ranges half-open; rules of one collective whose memory kinds, rank
 * ranges and byte ranges all intersect are an error, so that the order of
 * the rules never changes what matches.  docs/tuning.md is the reference
 * for users and lists every message.
 *
 * The parser reads only [text, text + len): lines are delimited by pointer
 * pairs, never by NUL, and a token is copied (bounded by the line limit)
 * only where a NUL-terminated string is needed (collar_parse_size).
 */
#include "config.h"
#include "core.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TABLE_MAX_RULES 4096
#define TABLE_MAX_LINE  4096             /* bytes, without the line ending */
#define TABLE_CHUNK_MAX ((size_t)COLLAR_CHUNK_MAX)
#define SHOW_MAX        40               /* bytes of a token in a message */
#define SHOW_BUF        (SHOW_MAX * 4 + 8)
#define RULE_BUF        256              /* one canonical rule, with margin */

/* ------------------------------------------------------------------- names */

/* Indexed by collar_coll_t. */
static const char *const coll_names[] = { "allreduce" };
#define NCOLLS ((int)(sizeof(coll_names) / sizeof(coll_names[0])))

static const struct {
    const char *name;
    int         mem;
} mem_names[] = {
    { "host",   COLLAR_MEM_HOST },
    { "device", COLLAR_MEM_DEVICE },
    { "any",    COLLAR_MEM_ANY },
};
#define NMEMS ((int)(sizeof(mem_names) / sizeof(mem_names[0])))

static const char *coll_name(collar_coll_t coll)
{
    if ((int)coll < 0 || (int)coll >= NCOLLS) {
        return "unknown";
    }
    return coll_names[coll];
}

static const char *mem_name(int mem)
{
    for (int i = 0; i < NMEMS; i++) {
        if (mem_names[i].mem == mem) {
            return mem_names[i].name;
        }
    }
    return "unknown";
}

/* "native, staged, chunked, ring, ipc, hier, nccl": the algorithms a table may name. */
static void alg_list(char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int a = COLLAR_ALG_AUTO + 1; a < COLLAR_ALG_COUNT && o < len; a++) {
        o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "",
                              collar_alg_name((collar_alg_t)a));
    }
}

/* ---------------------------------------------------------------- tokens */

typedef struct {
    const char *p;
    size_t      len;
    size_t      col;    /* 1-based column of p in its line */
} tok_t;

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static int mem_eq(const char *p, size_t len, const char *s)
{
    size_t n = strlen(s);
    return n == len && memcmp(p, s, n) == 0;
}

static int tok_eq(const tok_t *t, const char *s)
{
    return mem_eq(t->p, t->len, s);
}

/* The next blank-separated token of [*cur, end); 0 when there is none. */
static int next_token(const char **cur, const char *end, const char *line,
                      tok_t *tok)
{
    const char *p = *cur;
    while (p < end && is_blank(*p)) {
        p++;
    }
    if (p == end) {
        *cur = p;
        return 0;
    }
    const char *q = p;
    while (q < end && !is_blank(*q)) {
        q++;
    }
    tok->p = p;
    tok->len = (size_t)(q - p);
    tok->col = (size_t)(p - line) + 1;
    *cur = q;
    return 1;
}

/* Quote-ready text of [p, p + len): at most SHOW_MAX bytes, non-printable
 * ones as \xNN, "..." when cut. */
static const char *show(const char *p, size_t len, char *buf)
{
    size_t o = 0;
    for (size_t i = 0; i < len && i < SHOW_MAX; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            o += (size_t)snprintf(buf + o, SHOW_BUF - o, "\\x%02x", c);
        }
    }
    if (len > SHOW_MAX) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static const char *show_tok(const tok_t *t, char *buf)
{
    return show(t->p, t->len, buf);
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    const char     *name;
    char           *err;
    size_t          errlen;
    int             inline_rules;
    size_t          line;          /* current line, 1-based */
    collar_table_t *t;
    int             cap;           /* rules allocated */
    int             seen_content;  /* a version line or a rule so far */
    int             have_version;
    int             version;       /* 1 or 2 once have_version */
    int             have_system;
    char            scratch[TABLE_MAX_LINE + 1];  /* a token, NUL-terminated */
} parser_t;

static collar_status_t fail(parser_t *ps, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Write "NAME:LINE:COL: message" into err; returns COLLAR_ERR_INVALID. */
static collar_status_t fail(parser_t *ps, size_t col, const char *fmt, ...)
{
    if (ps->err == NULL || ps->errlen == 0) {
        return COLLAR_ERR_INVALID;
    }
    int n = snprintf(ps->err, ps->errlen, "%s:%zu:%zu: ", ps->name, ps->line,
                     col);
    if (n >= 0 && (size_t)n < ps->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return COLLAR_ERR_INVALID;
}

/* A copy of the token, NUL-terminated (tokens never exceed a line). */
static const char *token_str(parser_t *ps, const char *p, size_t len)
{
    if (len > TABLE_MAX_LINE) {
        len = TABLE_MAX_LINE;
    }
    memcpy(ps->scratch, p, len);
    ps->scratch[len] = '\0';
    return ps->scratch;
}

/* Digits only, into an int in [0, INT_MAX]: 0 ok, -1 not digits, -2 too big. */
static int parse_count(const char *p, size_t len, int *out)
{
    if (len == 0) {
        return -1;
    }
    long long v = 0;
    int big = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        if (!big) {
            v = v * 10 + (p[i] - '0');
            if (v > INT_MAX) {
                big = 1;
            }
        }
    }
    if (big) {
        return -2;
    }
    *out = (int)v;
    return 0;
}

/* The grammar of collar_parse_size: digits, then an optional K/M/G/T with
 * an optional i, then an optional B.  Tells "too large" from "malformed". */
static int size_shaped(const char *p, size_t len)
{
    size_t i = 0;
    while (i < len && p[i] >= '0' && p[i] <= '9') {
        i++;
    }
    if (i == 0) {
        return 0;
    }
    if (i < len && p[i] != '\0' && strchr("KMGTkmgt", p[i]) != NULL) {
        i++;
        if (i < len && (p[i] == 'i' || p[i] == 'I')) {
            i++;
        }
    }
    if (i < len && (p[i] == 'b' || p[i] == 'B')) {
        i++;
    }
    return i == len;
}

/* A size (collar_parse_size) or an error at column `col`. */
static collar_status_t parse_size_at(parser_t *ps, const char *p, size_t len,
                                     size_t col, size_t *out)
{
    char shown[SHOW_BUF];
    if (len <= TABLE_MAX_LINE
        && collar_parse_size(token_str(ps, p, len), out) == COLLAR_OK) {
        return COLLAR_OK;
    }
    if (size_shaped(p, len)) {
        return fail(ps, col, "bad size '%s': too large for a byte count",
                    show(p, len, shown));
    }
    return fail(ps, col, "bad size '%s': expected digits with an optional K, "
                "M, G or T suffix, e.g. 4096, 64K or 1M", show(p, len, shown));
}

static const char *find_dash(const tok_t *t)
{
    return memchr(t->p, '-', t->len);
}

/* N, N-M or N-inf; inclusive, 1 <= N <= M.  The range is [p, p + len) at
 * column col; `what` names it ("rank range") and `unit` its unit ("ranks"). */
static collar_status_t parse_range(parser_t *ps, const char *p, size_t len,
                                   size_t col, const char *what,
                                   const char *unit, int *out_lo, int *out_hi)
{
    char shown[SHOW_BUF];
    const tok_t t = { .p = p, .len = len, .col = col };
    const char *dash = find_dash(&t);
    const char *lo = p;
    size_t lolen = dash ? (size_t)(dash - p) : len;
    const char *hi = dash ? dash + 1 : NULL;
    size_t hilen = dash ? len - lolen - 1 : 0;
    int vlo = 0, vhi = 0;

    if (mem_eq(lo, lolen, "inf")) {
        return fail(ps, col, "bad %s '%s': inf is only allowed as the upper "
                    "bound", what, show_tok(&t, shown));
    }
    int rc = parse_count(lo, lolen, &vlo);
    if (rc == 0 && dash != NULL) {
        if (mem_eq(hi, hilen, "inf")) {
            vhi = INT_MAX;
        } else {
            rc = parse_count(hi, hilen, &vhi);
        }
    } else if (rc == 0) {
        vhi = vlo;
    }
    if (rc == -1) {
        return fail(ps, col, "bad %s '%s': expected N, N-M or N-inf with whole "
                    "numbers 1 <= N <= M", what, show_tok(&t, shown));
    }
    if (rc == -2) {
        return fail(ps, col, "bad %s '%s': a bound exceeds %d (use inf)", what,
                    show_tok(&t, shown), INT_MAX);
    }
    if (vlo == 0) {
        return fail(ps, col, "bad %s '%s': %s start at 1", what,
                    show_tok(&t, shown), unit);
    }
    if (vlo > vhi) {
        return fail(ps, col, "bad %s '%s': the lower bound exceeds the upper",
                    what, show_tok(&t, shown));
    }
    *out_lo = vlo;
    *out_hi = vhi;
    return COLLAR_OK;
}

static collar_status_t parse_ranks(parser_t *ps, const tok_t *t,
                                   collar_rule_t *r)
{
    return parse_range(ps, t->p, t->len, t->col, "rank range", "ranks",
                       &r->ranks_lo, &r->ranks_hi);
}

/* The keys of a node shape; 1 when the token is one of them. */
static int is_shape_key(const tok_t *t)
{
    return (t->len >= 6 && memcmp(t->p, "nodes=", 6) == 0)
        || (t->len >= 4 && memcmp(t->p, "ppn=", 4) == 0);
}

/* nodes=N[-M] or ppn=N[-M] (version 2); *have: bit 0 nodes, bit 1 ppn. */
static collar_status_t parse_shape(parser_t *ps, const tok_t *t,
                                   collar_rule_t *r, int *have)
{
    char shown[SHOW_BUF];
    if (ps->have_version && ps->version < 2) {
        return fail(ps, t->col, "node shape '%s' needs 'version 2' (a version 1 "
                    "table has no node shapes)", show_tok(t, shown));
    }
    const int is_nodes = t->p[0] == 'n';
    const size_t klen = is_nodes ? 6 : 4;
    const int bit = is_nodes ? 1 : 2;
    if (*have & bit) {
        return fail(ps, t->col, "key '%s' is given twice",
                    is_nodes ? "nodes" : "ppn");
    }
    *have |= bit;
    if (is_nodes) {
        return parse_range(ps, t->p + klen, t->len - klen, t->col + klen,
                           "node range", "nodes", &r->nodes_lo, &r->nodes_hi);
    }
    return parse_range(ps, t->p + klen, t->len - klen, t->col + klen,
                       "ranks-per-node range", "ranks per node", &r->ppn_lo,
                       &r->ppn_hi);
}

/* A-B or A-inf; half-open [A, B), A < B. */
static collar_status_t parse_bytes(parser_t *ps, const tok_t *t,
                                   collar_rule_t *r)
{
    char shown[SHOW_BUF];
    const char *dash = find_dash(t);
    if (dash == NULL || dash == t->p || dash == t->p + t->len - 1) {
        return fail(ps, t->col, "bad byte range '%s': expected A-B or A-inf "
                    "(from A included to B excluded)", show_tok(t, shown));
    }
    const char *lo = t->p;
    size_t lolen = (size_t)(dash - t->p);
    const char *hi = dash + 1;
    size_t hilen = t->len - lolen - 1;
    if (mem_eq(lo, lolen, "inf")) {
        return fail(ps, t->col, "bad byte range '%s': inf is only allowed as "
                    "the upper bound", show_tok(t, shown));
    }
    COLLAR_CHECK(parse_size_at(ps, lo, lolen, t->col, &r->bytes_lo));
    if (mem_eq(hi, hilen, "inf")) {
        r->bytes_hi = SIZE_MAX;
    } else {
        COLLAR_CHECK(parse_size_at(ps, hi, hilen, t->col + lolen + 1,
                                   &r->bytes_hi));
    }
    if (r->bytes_lo == r->bytes_hi) {
        return fail(ps, t->col, "bad byte range '%s': empty range (the upper "
                    "bound is exclusive)", show_tok(t, shown));
    }
    if (r->bytes_lo > r->bytes_hi) {
        return fail(ps, t->col, "bad byte range '%s': the lower bound exceeds "
                    "the upper", show_tok(t, shown));
    }
    return COLLAR_OK;
}

/* chunk=SIZE, oneshot=SIZE or gdrcopy=SIZE; *have: bit 0 chunk, bit 1
 * oneshot, bit 2 gdrcopy given.  gdrcopy=0 is "never" (COLLAR_GDRCOPY_NEVER). */
static collar_status_t parse_option(parser_t *ps, const tok_t *t,
                                    collar_rule_t *r, int *have)
{
    char shown[SHOW_BUF];
    const char *eq = memchr(t->p, '=', t->len);
    const size_t klen = eq != NULL ? (size_t)(eq - t->p) : 0;
    static const char *const keys[] = { "chunk", "oneshot", "gdrcopy" };
    int k = -1;
    for (int i = 0; i < 3 && eq != NULL; i++) {
        if (mem_eq(t->p, klen, keys[i])) {
            k = i;
        }
    }
    if (k < 0) {
        return fail(ps, t->col, "unknown option '%s': expected chunk=SIZE, "
                    "oneshot=SIZE or gdrcopy=SIZE", show_tok(t, shown));
    }
    const int bit = 1 << k;
    const char *key = keys[k];
    if (*have & bit) {
        return fail(ps, t->col, "option '%s' is given twice", key);
    }
    const char *v = eq + 1;
    size_t vlen = t->len - (size_t)(v - t->p);
    size_t vcol = t->col + (size_t)(v - t->p);
    size_t size = 0;
    const size_t least = k == 2 ? 0 : 1;
    if (vlen > TABLE_MAX_LINE
        || collar_parse_size(token_str(ps, v, vlen), &size) != COLLAR_OK
        || size < least || size > TABLE_CHUNK_MAX) {
        return fail(ps, vcol, "bad %s size '%s': expected a size from %zu to "
                    "1G, e.g. %s=%s", key, show(v, vlen, shown), least, key,
                    k == 2 ? "8K" : "1M");
    }
    if (k == 0) {
        r->chunk = size;
    } else if (k == 1) {
        r->oneshot = size;
    } else {
        r->gdrcopy = size == 0 ? COLLAR_GDRCOPY_NEVER : size;
    }
    *have |= bit;
    return COLLAR_OK;
}

/* --------------------------------------------------------- canonical text */

/* "N", "N-inf" or "N-M". */
static void format_range(int lo, int hi, char *buf, size_t len)
{
    if (lo == hi) {
        snprintf(buf, len, "%d", lo);
    } else if (hi == INT_MAX) {
        snprintf(buf, len, "%d-inf", lo);
    } else {
        snprintf(buf, len, "%d-%d", lo, hi);
    }
}

/* "allreduce device 2-8 0-64K", then " nodes=1 ppn=2-8" when shaped, and,
 * with_alg, " chunked chunk=1M". */
static void format_rule(const collar_rule_t *r, int with_alg, char *buf,
                        size_t len)
{
    char ranks[32], lo[32], hi[32], opts[80] = "", shape[64] = "";
    format_range(r->ranks_lo, r->ranks_hi, ranks, sizeof(ranks));
    if (r->nodes_lo != 0) {
        char n[32];
        format_range(r->nodes_lo, r->nodes_hi, n, sizeof(n));
        snprintf(shape, sizeof(shape), " nodes=%s", n);
    }
    if (r->ppn_lo != 0) {
        char n[32];
        const size_t o = strlen(shape);
        format_range(r->ppn_lo, r->ppn_hi, n, sizeof(n));
        snprintf(shape + o, sizeof(shape) - o, " ppn=%s", n);
    }
    collar_format_size(r->bytes_lo, lo, sizeof(lo));
    if (r->bytes_hi == SIZE_MAX) {
        snprintf(hi, sizeof(hi), "inf");
    } else {
        collar_format_size(r->bytes_hi, hi, sizeof(hi));
    }
    if (!with_alg) {
        snprintf(buf, len, "%s %s %s %s-%s%s", coll_name(r->coll),
                 mem_name(r->mem), ranks, lo, hi, shape);
        return;
    }
    size_t o = 0;
    if (r->chunk != 0) {
        char c[32];
        collar_format_size(r->chunk, c, sizeof(c));
        o += (size_t)snprintf(opts + o, sizeof(opts) - o, " chunk=%s", c);
    }
    if (r->oneshot != 0 && o < sizeof(opts)) {
        char c[32];
        collar_format_size(r->oneshot, c, sizeof(c));
        o += (size_t)snprintf(opts + o, sizeof(opts) - o, " oneshot=%s", c);
    }
    if (r->gdrcopy != 0 && o < sizeof(opts)) {
        char c[32] = "0";
        if (r->gdrcopy != COLLAR_GDRCOPY_NEVER) {
            collar_format_size(r->gdrcopy, c, sizeof(c));
        }
        snprintf(opts + o, sizeof(opts) - o, " gdrcopy=%s", c);
    }
    snprintf(buf, len, "%s %s %s %s-%s%s %s%s", coll_name(r->coll),
             mem_name(r->mem), ranks, lo, hi, shape, collar_alg_name(r->alg),
             opts);
}

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= FNV_PRIME;
    }
    return h;
}

/* FNV-1a 64 of the canonical rules, one a line ("...\n"), in order. */
static uint64_t table_hash(const collar_table_t *t)
{
    uint64_t h = FNV_OFFSET;
    char buf[RULE_BUF];
    for (int i = 0; i < t->nrules; i++) {
        format_rule(&t->rules[i], 1, buf, sizeof(buf));
        h = fnv1a(h, buf);
        h = fnv1a(h, "\n");
    }
    return h;
}

/* ------------------------------------------------------------ line parsing */

static collar_status_t add_rule(parser_t *ps, const collar_rule_t *r,
                                size_t col)
{
    collar_table_t *t = ps->t;
    if (t->nrules == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 16;
        if (cap > TABLE_MAX_RULES) {
            cap = TABLE_MAX_RULES;
        }
        collar_rule_t *rules = realloc(t->rules, (size_t)cap * sizeof(*rules));
        if (rules == NULL) {
            fail(ps, col, "out of memory for %d rules", cap);
            return COLLAR_ERR_NO_MEMORY;
        }
        t->rules = rules;
        ps->cap = cap;
    }
    t->rules[t->nrules++] = *r;
    return COLLAR_OK;
}

/* [lo, hi] of a shape key, all of 1-inf when absent. */
static int key_lo(int lo)
{
    return lo != 0 ? lo : 1;
}

static int key_hi(int lo, int hi)
{
    return lo != 0 ? hi : INT_MAX;
}

static int keys_intersect(int alo, int ahi, int blo, int bhi)
{
    return key_lo(alo) <= key_hi(blo, bhi) && key_lo(blo) <= key_hi(alo, ahi);
}

int collar_rule_shaped(const collar_rule_t *r)
{
    return r->nodes_lo != 0 || r->ppn_lo != 0;
}

/* A shaped rule and one without a shape never overlap: the shaped one is
 * the more specific, and wins where both match (collar_table_match_key). */
static int rules_overlap(const collar_rule_t *a, const collar_rule_t *b)
{
    return a->coll == b->coll
        && collar_rule_shaped(a) == collar_rule_shaped(b)
        && keys_intersect(a->nodes_lo, a->nodes_hi, b->nodes_lo, b->nodes_hi)
        && keys_intersect(a->ppn_lo, a->ppn_hi, b->ppn_lo, b->ppn_hi)
        && (a->mem == b->mem || a->mem == COLLAR_MEM_ANY
            || b->mem == COLLAR_MEM_ANY)
        && a->ranks_lo <= b->ranks_hi && b->ranks_lo <= a->ranks_hi
        && a->bytes_lo < b->bytes_hi && b->bytes_lo < a->bytes_hi;
}

/* "collective memory ranks bytes algorithm [key=value ...]" */
static collar_status_t parse_rule(parser_t *ps, const tok_t *first,
                                  const char **cur, const char *end,
                                  const char *line)
{
    char shown[SHOW_BUF], list[128];
    collar_rule_t r;
    memset(&r, 0, sizeof(r));
    r.line = ps->line > INT_MAX ? INT_MAX : (int)ps->line;

    if (ps->t->nrules >= TABLE_MAX_RULES) {
        return fail(ps, first->col, "too many rules: the limit is %d",
                    TABLE_MAX_RULES);
    }

    int coll = -1;
    for (int c = 0; c < NCOLLS; c++) {
        if (tok_eq(first, coll_names[c])) {
            coll = c;
        }
    }
    if (coll < 0) {
        return fail(ps, first->col, "unknown collective '%s': expected %s",
                    show_tok(first, shown), coll_names[0]);
    }
    r.coll = (collar_coll_t)coll;

    tok_t prev = *first, tok;
    if (!next_token(cur, end, line, &tok)) {
        return fail(ps, prev.col + prev.len, "expected a memory kind (host, "
                    "device, any) after '%s'", show_tok(&prev, shown));
    }
    int mem_found = 0;
    for (int m = 0; m < NMEMS; m++) {
        if (tok_eq(&tok, mem_names[m].name)) {
            r.mem = mem_names[m].mem;
            mem_found = 1;
        }
    }
    if (!mem_found) {
        return fail(ps, tok.col, "unknown memory kind '%s': expected one of "
                    "host, device, any", show_tok(&tok, shown));
    }

    prev = tok;
    if (!next_token(cur, end, line, &tok)) {
        return fail(ps, prev.col + prev.len, "expected a rank range (N, N-M or "
                    "N-inf) after '%s'", show_tok(&prev, shown));
    }
    COLLAR_CHECK(parse_ranks(ps, &tok, &r));

    prev = tok;
    if (!next_token(cur, end, line, &tok)) {
        return fail(ps, prev.col + prev.len, "expected a byte range (A-B or "
                    "A-inf) after '%s'", show_tok(&prev, shown));
    }
    COLLAR_CHECK(parse_bytes(ps, &tok, &r));

    /* The node shape, if any: keys before the algorithm. */
    int have_shape = 0;
    alg_list(list, sizeof(list));
    for (;;) {
        prev = tok;
        if (!next_token(cur, end, line, &tok)) {
            return fail(ps, prev.col + prev.len, "expected an algorithm (%s) "
                        "after '%s'", list, show_tok(&prev, shown));
        }
        if (!is_shape_key(&tok)) {
            break;
        }
        COLLAR_CHECK(parse_shape(ps, &tok, &r, &have_shape));
    }
    int alg = collar_alg_from_name(tok.p, tok.len);
    if (alg < 0 && tok_eq(&tok, collar_alg_name(COLLAR_ALG_AUTO))) {
        return fail(ps, tok.col, "algorithm 'auto' is not allowed in a table: "
                    "expected one of %s", list);
    }
    if (alg < 0) {
        return fail(ps, tok.col, "unknown algorithm '%s': expected one of %s",
                    show_tok(&tok, shown), list);
    }
    r.alg = (collar_alg_t)alg;

    int have_chunk = 0;
    while (next_token(cur, end, line, &tok)) {
        if (is_shape_key(&tok)) {
            return fail(ps, tok.col, "node shape '%s' after the algorithm: it "
                        "comes between the byte range and the algorithm",
                        show_tok(&tok, shown));
        }
        COLLAR_CHECK(parse_option(ps, &tok, &r, &have_chunk));
    }

    for (int i = 0; i < ps->t->nrules; i++) {
        const collar_rule_t *q = &ps->t->rules[i];
        if (rules_overlap(q, &r)) {
            char other[RULE_BUF];
            format_rule(q, 0, other, sizeof(other));
            return fail(ps, first->col, "rule overlaps the rule on line %d "
                        "(%s): ranges of one collective and memory kind must "
                        "not overlap", q->line, other);
        }
    }
    return add_rule(ps, &r, first->col);
}

/* "version 1", first and once. */
static collar_status_t parse_version(parser_t *ps, const tok_t *first,
                                     const char **cur, const char *end,
                                     const char *line)
{
    char shown[SHOW_BUF];
    tok_t tok;
    if (ps->seen_content) {
        return fail(ps, first->col, "unexpected 'version': the version line "
                    "must come first, and only once");
    }
    if (!next_token(cur, end, line, &tok)) {
        return fail(ps, first->col + first->len, "expected a version number "
                    "after 'version': 1 or 2");
    }
    int digits = 1;
    for (size_t i = 0; i < tok.len; i++) {
        digits &= tok.p[i] >= '0' && tok.p[i] <= '9';
    }
    if (!digits) {
        return fail(ps, tok.col, "bad version '%s': expected 'version 1' or "
                    "'version 2'", show_tok(&tok, shown));
    }
    size_t z = 0;
    while (z + 1 < tok.len && tok.p[z] == '0') {
        z++;
    }
    const int v1 = mem_eq(tok.p + z, tok.len - z, "1");
    if (!v1 && !mem_eq(tok.p + z, tok.len - z, "2")) {
        return fail(ps, tok.col, "unsupported version %s, expected 1 or 2",
                    show_tok(&tok, shown));
    }
    tok_t extra;
    if (next_token(cur, end, line, &extra)) {
        return fail(ps, extra.col, "unexpected '%s' after 'version %d'",
                    show_tok(&extra, shown), v1 ? 1 : 2);
    }
    ps->seen_content = 1;
    ps->have_version = 1;
    ps->version = v1 ? 1 : 2;
    return COLLAR_OK;
}

/* "# ... system: TEXT · ...": the first non-empty TEXT names the system
 * (trimmed, tabs as spaces, cut to fit at a character boundary). */
static void parse_comment(parser_t *ps, const char *p, const char *end)
{
    static const char key[] = "system:";
    const size_t klen = sizeof(key) - 1;
    if (ps->have_system) {
        return;
    }
    const char *s = NULL;
    for (const char *q = p; (size_t)(end - q) >= klen; q++) {
        if (memcmp(q, key, klen) == 0) {
            s = q + klen;
            break;
        }
    }
    if (s == NULL) {
        return;
    }
    const char *e = s;
    while (e < end && !(e + 1 < end && (unsigned char)e[0] == 0xc2
                        && (unsigned char)e[1] == 0xb7)) {
        e++;
    }
    while (s < e && is_blank(*s)) {
        s++;
    }
    while (e > s && is_blank(e[-1])) {
        e--;
    }
    size_t n = (size_t)(e - s);
    if (n == 0) {
        return;
    }
    char *sys = ps->t->system;
    if (n > sizeof(ps->t->system) - 1) {
        n = sizeof(ps->t->system) - 1;
        /* Cut before a whole UTF-8 character, not inside one. */
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) {
            n--;
        }
        while (n > 0 && is_blank(s[n - 1])) {
            n--;
        }
    }
    for (size_t i = 0; i < n; i++) {
        sys[i] = is_blank(s[i]) ? ' ' : s[i];  /* a tab or a CR reads as space */
    }
    sys[n] = '\0';
    ps->have_system = 1;
}

/* One line [line, end), without its line ending. */
static collar_status_t parse_line(parser_t *ps, const char *line,
                                  const char *end)
{
    size_t len = (size_t)(end - line);
    if (len > 0 && end[-1] == '\r') {
        len--;
    }
    if (len > TABLE_MAX_LINE) {
        return fail(ps, TABLE_MAX_LINE + 1, "line is longer than %d bytes",
                    TABLE_MAX_LINE);
    }
    const char *hash = memchr(line, '#', (size_t)(end - line));
    const char *content_end = hash != NULL ? hash : end;
    if (hash != NULL) {
        parse_comment(ps, hash + 1, end);
    }

    const char *cur = line;
    tok_t first;
    if (!next_token(&cur, content_end, line, &first)) {
        return COLLAR_OK;
    }
    if (tok_eq(&first, "version")) {
        return parse_version(ps, &first, &cur, content_end, line);
    }
    if (!ps->inline_rules && !ps->seen_content) {
        char shown[SHOW_BUF];
        return fail(ps, first.col, "expected 'version 1' or 'version 2' as the "
                    "first line, got '%s'", show_tok(&first, shown));
    }
    ps->seen_content = 1;
    return parse_rule(ps, &first, &cur, content_end, line);
}

static int is_line_end(const parser_t *ps, char c)
{
    return c == '\n' || (ps->inline_rules && c == ';');
}

/* Control bytes other than tab, CR and LF mean this is no text table. */
static collar_status_t check_binary(parser_t *ps, const char *text, size_t len)
{
    size_t line_start = 0;
    ps->line = 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (is_line_end(ps, (char)c)) {
            if (ps->line < SIZE_MAX) {
                ps->line++;
            }
            line_start = i + 1;
        } else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
            return fail(ps, i - line_start + 1, "binary data: this is not a "
                        "tuning table");
        }
    }
    return COLLAR_OK;
}

static collar_status_t parse_text(parser_t *ps, const char *text, size_t len)
{
    COLLAR_CHECK(check_binary(ps, text, len));
    const char *p = text, *end = text + len;
    ps->line = 0;
    while (p < end) {
        const char *q = p;
        while (q < end && !is_line_end(ps, *q)) {
            q++;
        }
        if (ps->line < SIZE_MAX) {
            ps->line++;
        }
        COLLAR_CHECK(parse_line(ps, p, q));
        p = q < end ? q + 1 : end;
    }
    return COLLAR_OK;
}

/* ---------------------------------------------------------------- the API */

collar_status_t collar_table_parse(const char *text, size_t len,
                                   const char *name, int inline_rules,
                                   collar_table_t *table, char *err,
                                   size_t errlen)
{
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (name == NULL) {
        name = "(table)";
    }
    if (table == NULL || (text == NULL && len != 0)) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: no table to parse", name);
        }
        if (table != NULL) {
            memset(table, 0, sizeof(*table));
        }
        return COLLAR_ERR_INVALID;
    }
    memset(table, 0, sizeof(*table));

    parser_t *ps = calloc(1, sizeof(*ps));
    if (ps == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: out of memory", name);
        }
        return COLLAR_ERR_NO_MEMORY;
    }
    collar_table_t t;
    memset(&t, 0, sizeof(t));
    ps->name = name;
    ps->err = err;
    ps->errlen = errlen;
    ps->inline_rules = inline_rules != 0;
    ps->t = &t;

    collar_status_t st = len > 0 ? parse_text(ps, text, len) : COLLAR_OK;
    const int version = ps->have_version ? ps->version : 0;
    free(ps);
    if (st != COLLAR_OK) {
        free(t.rules);
        collar_debug(TUNING, "%s", err != NULL && errlen > 0 ? err : name);
        return st;
    }
    t.version = version != 0 ? version : (inline_rules ? 0 : 1);
    t.hash = table_hash(&t);
    *table = t;
    collar_debug(TUNING, "%s: %d rules, hash %016llx%s%s", name, t.nrules,
                 (unsigned long long)t.hash, t.system[0] ? ", system " : "",
                 t.system);
    return COLLAR_OK;
}

collar_status_t collar_table_load(const char *path, collar_table_t *table,
                                  char *err, size_t errlen)
{
    if (table != NULL) {
        memset(table, 0, sizeof(*table));
    }
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (path == NULL || table == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: no file to load", path ? path : "(null)");
        }
        return COLLAR_ERR_INVALID;
    }

    collar_status_t st = COLLAR_ERR_INVALID;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        }
        return COLLAR_ERR_INVALID;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        }
        goto out;
    }
    if (S_ISDIR(sb.st_mode)) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(EISDIR));
        }
        goto out;
    }
    if (S_ISREG(sb.st_mode) && sb.st_size > (off_t)COLLAR_TABLE_MAX_BYTES) {
        goto too_large;
    }
    /* Other kinds (a pipe, /dev/stdin) are read up to the limit too. */
    buf = malloc((size_t)COLLAR_TABLE_MAX_BYTES + 1);
    if (buf == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: out of memory", path);
        }
        st = COLLAR_ERR_NO_MEMORY;
        goto out;
    }
    size_t n = fread(buf, 1, (size_t)COLLAR_TABLE_MAX_BYTES + 1, f);
    if (ferror(f)) {
        int e = errno;
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path,
                     strerror(e ? e : EIO));
        }
        goto out;
    }
    if (n > COLLAR_TABLE_MAX_BYTES) {
        goto too_large;
    }
    st = collar_table_parse(buf, n, path, 0, table, err, errlen);
    goto out;

too_large:
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s: file is larger than 1 MiB", path);
    }
    st = COLLAR_ERR_INVALID;
out:
    free(buf);
    fclose(f);
    return st;
}

void collar_table_free(collar_table_t *table)
{
    if (table == NULL) {
        return;
    }
    free(table->rules);
    memset(table, 0, sizeof(*table));
}

/* Does the shape key [lo, hi] (absent: any) hold [vlo, vhi]? */
static int key_holds(int lo, int hi, int vlo, int vhi)
{
    return key_lo(lo) <= vlo && vhi <= key_hi(lo, hi);
}

const collar_rule_t *collar_table_match_key(const collar_table_t *table,
                                            const collar_select_key_t *key,
                                            collar_mem_kind_t mem)
{
    if (table == NULL || key == NULL) {
        return NULL;
    }
    const collar_rule_t *rules = table->rules;
    const collar_rule_t *plain = NULL;
    const int n = table->nrules;
    const int ranks = key->comm_size;
    const size_t bytes = key->bytes;
    const int known = key->nodes > 0 && key->ppn_min > 0
                      && key->ppn_min <= key->ppn_max;
    for (int i = 0; i < n; i++) {
        const collar_rule_t *r = &rules[i];
        /* bytes_hi is exclusive, but "inf" (SIZE_MAX) takes every size. */
        if (r->coll == key->coll
            && (r->mem == (int)mem || r->mem == COLLAR_MEM_ANY)
            && ranks >= r->ranks_lo && ranks <= r->ranks_hi
            && bytes >= r->bytes_lo
            && (bytes < r->bytes_hi || r->bytes_hi == SIZE_MAX)) {
            if (!collar_rule_shaped(r)) {
                plain = plain != NULL ? plain : r;
            } else if (known
                       && key_holds(r->nodes_lo, r->nodes_hi, key->nodes,
                                    key->nodes)
                       && key_holds(r->ppn_lo, r->ppn_hi, key->ppn_min,
                                    key->ppn_max)) {
                return r;
            }
        }
    }
    return plain;
}

const collar_rule_t *collar_table_match(const collar_table_t *table,
                                        collar_coll_t coll,
                                        collar_mem_kind_t mem, int ranks,
                                        size_t bytes)
{
    const collar_select_key_t key = {
        .coll = coll, .mem = mem, .comm_size = ranks, .bytes = bytes,
    };
    return collar_table_match_key(table, &key, mem);
}

int collar_table_same_rules(const collar_table_t *a, const collar_table_t *b)
{
    if (a->nrules != b->nrules) {
        return 0;
    }
    for (int i = 0; i < a->nrules; i++) {
        const collar_rule_t *x = &a->rules[i], *y = &b->rules[i];
        if (x->coll != y->coll || x->mem != y->mem || x->ranks_lo != y->ranks_lo
            || x->ranks_hi != y->ranks_hi || x->bytes_lo != y->bytes_lo
            || x->bytes_hi != y->bytes_hi || x->alg != y->alg
            || x->chunk != y->chunk || x->oneshot != y->oneshot
            || x->gdrcopy != y->gdrcopy
            || x->nodes_lo != y->nodes_lo || x->nodes_hi != y->nodes_hi
            || x->ppn_lo != y->ppn_lo || x->ppn_hi != y->ppn_hi) {
            return 0;
        }
    }
    return 1;
}

void collar_rule_format(const collar_rule_t *rule, char *buf, size_t len)
{
    format_rule(rule, 1, buf, len);
}

void collar_table_write(const collar_table_t *table, FILE *out)
{
    if (table == NULL || out == NULL) {
        return;
    }
    /* The system name back, printable bytes only, so that it reads back. */
    char sys[sizeof(table->system)];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(table->system) - 1 && table->system[i]; i++) {
        unsigned char c = (unsigned char)table->system[i];
        sys[n++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    sys[n] = '\0';
    if (sys[0] != '\0') {
        fprintf(out, "# collar tuning table \xc2\xb7 system: %s\n", sys);
    } else {
        fprintf(out, "# collar tuning table\n");
    }
    /* Version 1 while no rule has a shape, so that such a table still
     * reads where version 2 is unknown. */
    int shaped = 0;
    for (int i = 0; i < table->nrules; i++) {
        shaped |= collar_rule_shaped(&table->rules[i]);
    }
    fprintf(out, "version %d\n# collective memory ranks bytes %salgorithm "
            "options\n", shaped ? 2 : 1, shaped ? "[nodes= ppn=] " : "");
    char buf[RULE_BUF];
    for (int i = 0; i < table->nrules; i++) {
        format_rule(&table->rules[i], 1, buf, sizeof(buf));
        fprintf(out, "%s\n", buf);
    }
}
