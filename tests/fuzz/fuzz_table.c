/*
 * libFuzzer target for the tuning-table parser (src/core/tuning.c).
 *
 * Every input is parsed as a file and as inline rules.  When it parses, the
 * table is written back in canonical form, parsed again, and must give the
 * same rules and hash (and write back identically); every rule must be the
 * one collar_table_match finds at its own lower corner (rules never
 * overlap).  When it does not, the table must be empty and the message must
 * start with "NAME:LINE:COLUMN: ".  Any difference is an abort().
 *
 * Build and run from the top of the tree (config.h comes from a configured
 * build directory, mpi.h from mpicc; nothing is linked from MPI):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined \
 *       -Ibuild -Isrc -Iinclude $(mpicc --showme:compile) \
 *       tests/fuzz/fuzz_table.c src/core/tuning.c src/core/config.c src/core/fault.c \
 *       src/core/log.c src/core/status.c -pthread -o fuzz_table
 *   rm -rf /tmp/corpus && cp -R tests/fuzz/corpus /tmp/corpus
 *   ./fuzz_table -max_len=8192 -max_total_time=600 /tmp/corpus
 *
 * (config.c supplies collar_parse_size and the algorithm names; log.c and
 * status.c what config.c and tuning.c log with.)
 */
#include "config.h"
#include "core/core.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *write_table(const collar_table_t *t, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f == NULL) {
        abort();
    }
    collar_table_write(t, f);
    if (fclose(f) != 0 || buf == NULL) {
        abort();
    }
    return buf;
}

/* "NAME:LINE:COLUMN: text" with LINE, COLUMN >= 1. */
static int well_formed(const char *err, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(err, name, n) != 0 || err[n] != ':') {
        return 0;
    }
    const char *p = err + n + 1;
    for (int field = 0; field < 2; field++) {
        if (*p < '1' || *p > '9') {
            return 0;
        }
        while (*p >= '0' && *p <= '9') {
            p++;
        }
        if (*p++ != ':') {
            return 0;
        }
    }
    return p[0] == ' ' && p[1] != '\0';
}

static void check_rules(const collar_table_t *t)
{
    for (int i = 0; i < t->nrules; i++) {
        const collar_rule_t *r = &t->rules[i];
        if (r->ranks_lo < 1 || r->ranks_lo > r->ranks_hi
            || r->bytes_lo >= r->bytes_hi || r->alg <= COLLAR_ALG_AUTO
            || r->alg >= COLLAR_ALG_COUNT || r->chunk > ((size_t)1 << 30)) {
            abort();
        }
        if ((r->nodes_lo != 0 && (r->nodes_lo < 1 || r->nodes_lo > r->nodes_hi))
            || (r->ppn_lo != 0 && (r->ppn_lo < 1 || r->ppn_lo > r->ppn_hi))) {
            abort();
        }
        /* The lower and upper corners, node shape included (an absent key
         * is 1-inf); a rule without a shape is looked up with none. */
        const int shaped = collar_rule_shaped(r);
        int mem = r->mem == COLLAR_MEM_ANY ? COLLAR_MEM_HOST : r->mem;
        collar_select_key_t lo = {
            .coll = r->coll, .mem = (collar_mem_kind_t)mem,
            .comm_size = r->ranks_lo, .bytes = r->bytes_lo,
            .nodes = shaped ? (r->nodes_lo ? r->nodes_lo : 1) : 0,
            .ppn_min = shaped ? (r->ppn_lo ? r->ppn_lo : 1) : 0,
        };
        lo.ppn_max = lo.ppn_min;
        collar_select_key_t hi = lo;
        hi.comm_size = r->ranks_hi;
        hi.bytes = r->bytes_hi - 1;
        if (shaped) {
            hi.nodes = r->nodes_lo ? r->nodes_hi : INT_MAX;
            hi.ppn_min = hi.ppn_max = r->ppn_lo ? r->ppn_hi : INT_MAX;
        }
        if (collar_table_match_key(t, &lo, (collar_mem_kind_t)mem) != r
            || collar_table_match_key(t, &hi, (collar_mem_kind_t)mem) != r) {
            abort();  /* another rule overlaps this one */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    for (int inl = 0; inl < 2; inl++) {
        collar_table_t t, u;
        char err[512];
        const char *name = inl ? "COLLAR_ALLREDUCE_RULES" : "fuzz.table";
        collar_status_t st = collar_table_parse(text, size, name, inl, &t, err,
                                                sizeof(err));
        if (st != COLLAR_OK) {
            if (st != COLLAR_ERR_INVALID || t.rules != NULL || t.nrules != 0
                || t.hash != 0 || !well_formed(err, name)) {
                abort();
            }
            continue;
        }
        check_rules(&t);

        size_t len = 0;
        char *out = write_table(&t, &len);
        if (collar_table_parse(out, len, "rewritten", 0, &u, err, sizeof(err))
            != COLLAR_OK) {
            fprintf(stderr, "written table does not parse: %s\n%s", err, out);
            abort();
        }
        if (u.hash != t.hash || !collar_table_same_rules(&t, &u)
            || strcmp(u.system, t.system) != 0) {
            fprintf(stderr, "round trip differs:\n%s", out);
            abort();
        }
        size_t len2 = 0;
        char *out2 = write_table(&u, &len2);
        if (len2 != len || memcmp(out, out2, len) != 0) {
            abort();
        }
        free(out2);
        free(out);
        collar_table_free(&u);

        /* A few lookups around values taken from the input. */
        for (size_t i = 0; i + 3 <= size && i < 24; i += 3) {
            int ranks = (int)data[i] + 1;
            size_t bytes = (size_t)data[i + 1] << (data[i + 2] % 48);
            collar_mem_kind_t mem = (collar_mem_kind_t)(data[i + 2] % 3);
            const collar_rule_t *r =
                collar_table_match(&t, COLLAR_COLL_ALLREDUCE, mem, ranks, bytes);
            if (r != NULL && (ranks < r->ranks_lo || ranks > r->ranks_hi
                              || bytes < r->bytes_lo
                              || (bytes >= r->bytes_hi && r->bytes_hi != SIZE_MAX)
                              || (r->mem != (int)mem && r->mem != COLLAR_MEM_ANY))) {
                abort();
            }
        }
        collar_table_free(&t);
    }
    return 0;
}
