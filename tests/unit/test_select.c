/*
 * Unit test of selection without MPI: the built-in rules at their range
 * boundaries and by node shape, the precedence of the sources,
 * fall-through from a partial source, COLLAR_CHUNK_SIZE and
 * COLLAR_ALGORITHM, a rejected source, and the lookup's cost (reported, not asserted: speed is for benchmarks).
 */
#include "config.h"
#include "core/core.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static collar_plan_t pick(collar_mem_kind_t mem, int ranks, size_t bytes)
{
    collar_select_key_t key = { .coll = COLLAR_COLL_ALLREDUCE, .mem = mem,
                                .comm_size = ranks, .bytes = bytes, .reducible = 1 };
    collar_plan_t plan;
    collar_select(&key, &plan);
    return plan;
}

static void set_string(char **field, const char *value)
{
    free(*field);
    *field = strdup(value);
}

static void reinit(void)
{
    UNIT_CHECK(collar_select_init() == COLLAR_OK, "select init");
}

/* The same, on a communicator of `nodes` nodes holding ppn_min to ppn_max
 * ranks each (nodes 0: unknown). */
static collar_plan_t pick_shape(collar_mem_kind_t mem, int ranks, size_t bytes,
                                int nodes, int ppn_min, int ppn_max)
{
    collar_select_key_t key = { .coll = COLLAR_COLL_ALLREDUCE, .mem = mem,
                                .comm_size = ranks, .bytes = bytes, .reducible = 1,
                                .nodes = nodes, .ppn_min = ppn_min,
                                .ppn_max = ppn_max };
    collar_plan_t plan;
    collar_select(&key, &plan);
    return plan;
}

/* The built-in rules by node shape: ipc on one node, hier across nodes of
 * two ranks or more from 1M, chunked from 256K and staged below that
 * across nodes, staged/chunked wherever the nodes are unknown. */
static void test_builtin_shape(void)
{
    reinit();
    const size_t K256 = 256 * 1024, M1 = 1024 * 1024;
    collar_plan_t p = pick_shape(COLLAR_MEM_DEVICE, 4, 8, 1, 4, 4);
    UNIT_CHECK(p.alg == COLLAR_ALG_IPC, "one node, 8 B: %s", collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_MANAGED, 2, 1 << 30, 1, 2, 2);
    UNIT_CHECK(p.alg == COLLAR_ALG_IPC, "one node, 1G managed: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 1, 1 << 20, 1, 1, 1);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED, "one rank: %s", collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_HOST, 4, 1 << 20, 1, 4, 4);
    UNIT_CHECK(p.alg == COLLAR_ALG_NATIVE, "host, one node: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 4, M1, 2, 2, 2);
    UNIT_CHECK(p.alg == COLLAR_ALG_HIER, "two nodes, 1M: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 4, M1 - 1, 2, 2, 2);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED, "two nodes, 1M-1: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 4, K256 - 1, 2, 2, 2);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED, "two nodes, 256K-1: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 3, 1 << 20, 2, 1, 2);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED, "a node of one rank: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 4, 1 << 20, 0, 0, 0);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED, "unknown nodes: %s",
               collar_alg_name(p.alg));
    p = pick_shape(COLLAR_MEM_DEVICE, 4, 8, 0, 0, 0);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED, "unknown nodes, 8 B: %s",
               collar_alg_name(p.alg));
}

static void test_builtin(void)
{
    reinit();
    collar_plan_t p = pick(COLLAR_MEM_HOST, 4, 1 << 30);
    UNIT_CHECK(p.alg == COLLAR_ALG_NATIVE, "host 1G: %s", collar_alg_name(p.alg));
    p = pick(COLLAR_MEM_DEVICE, 2, 0);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED, "device 0: %s", collar_alg_name(p.alg));
    p = pick(COLLAR_MEM_DEVICE, 2, 256 * 1024 - 1);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED, "device 256K-1: %s", collar_alg_name(p.alg));
    p = pick(COLLAR_MEM_DEVICE, 2, 256 * 1024);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED && p.chunk == 1 << 20,
               "device 256K: %s chunk %zu", collar_alg_name(p.alg), p.chunk);
    UNIT_CHECK(p.rule != NULL && strcmp(p.source, "built-in rules") == 0,
               "source %s", p.source ? p.source : "(none)");
    p = pick(COLLAR_MEM_MANAGED, 1, 1 << 20);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED, "managed counts as device: %s",
               collar_alg_name(p.alg));
    UNIT_CHECK(collar_select_host_native() == 1, "host rules are all native");
}

static void test_precedence(const char *tables)
{
    char path[1100], dir[1100];
    snprintf(path, sizeof(path), "%s/chunked_1k.table", tables);
    snprintf(dir, sizeof(dir), "%s/site", tables);

    /* Site default only: chunked chunk=2K for all device sizes. */
    set_string(&collar_cfg.tuning_dir, dir);
    reinit();
    collar_plan_t p = pick(COLLAR_MEM_DEVICE, 2, 10);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED && p.chunk == 2048 && p.rule->line == 3,
               "site: %s %zu", collar_alg_name(p.alg), p.chunk);
    p = pick(COLLAR_MEM_HOST, 2, 10);
    UNIT_CHECK(p.alg == COLLAR_ALG_NATIVE && strcmp(p.source, "built-in rules") == 0,
               "host falls through to built-in: %s", p.source);

    /* File over site. */
    set_string(&collar_cfg.tuning_file, path);
    reinit();
    p = pick(COLLAR_MEM_DEVICE, 2, 1023);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED && p.rule->line == 3, "file 1023: %s",
               collar_alg_name(p.alg));
    p = pick(COLLAR_MEM_DEVICE, 2, 1024);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED && p.chunk == 4096, "file 1K: %s %zu",
               collar_alg_name(p.alg), p.chunk);

    /* Inline over file, for the ranks and sizes it covers. */
    set_string(&collar_cfg.allreduce_rules,
               "allreduce device 3-4 0-inf native ; allreduce device 5-inf 1M-inf chunked chunk=64K");
    reinit();
    p = pick(COLLAR_MEM_DEVICE, 3, 10);
    UNIT_CHECK(p.alg == COLLAR_ALG_NATIVE && strcmp(p.source, "COLLAR_ALLREDUCE_RULES") == 0,
               "inline 3 ranks: %s", collar_alg_name(p.alg));
    p = pick(COLLAR_MEM_DEVICE, 5, 10);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED && p.rule->line == 3,
               "5 ranks fall through to the file: %s", collar_alg_name(p.alg));
    p = pick(COLLAR_MEM_DEVICE, 5, 1 << 20);
    UNIT_CHECK(p.alg == COLLAR_ALG_CHUNKED && p.chunk == 65536 && p.rule->line == 2,
               "inline second rule: %s %zu line %d", collar_alg_name(p.alg), p.chunk,
               p.rule ? p.rule->line : -1);
    UNIT_CHECK(strstr(collar_select_sources(), "COLLAR_ALLREDUCE_RULES, then file ") != NULL,
               "sources: %s", collar_select_sources());
    uint64_t h1 = collar_select_hash();

    /* COLLAR_CHUNK_SIZE overrides; COLLAR_ALGORITHM forces. */
    collar_cfg.chunk_size = 8192;
    p = pick(COLLAR_MEM_DEVICE, 5, 1 << 20);
    UNIT_CHECK(p.chunk == 8192, "chunk override: %zu", p.chunk);
    collar_cfg.chunk_size = 0;
    collar_cfg.algorithm = COLLAR_ALG_STAGED;
    p = pick(COLLAR_MEM_HOST, 5, 1 << 20);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED && p.rule == NULL, "forced: %s",
               collar_alg_name(p.alg));
    UNIT_CHECK(collar_select_host_native() == 0, "forced staged: host not native");
    collar_cfg.algorithm = COLLAR_ALG_AUTO;

    /* A malformed inline source is rejected whole; the rest stays. */
    set_string(&collar_cfg.allreduce_rules, "allreduce device 1-inf 0-inf rign");
    reinit();
    p = pick(COLLAR_MEM_DEVICE, 3, 10);
    UNIT_CHECK(p.alg == COLLAR_ALG_STAGED && p.rule->line == 3,
               "bad inline ignored: %s", collar_alg_name(p.alg));
    UNIT_CHECK(collar_select_hash() != h1, "the hash follows the rules in force");

    /* A host rule that is not native turns the host fast path off. */
    set_string(&collar_cfg.allreduce_rules, "allreduce any 1-inf 64M-inf staged");
    reinit();
    UNIT_CHECK(collar_select_host_native() == 0, "a staged rule for any memory");

    set_string(&collar_cfg.allreduce_rules, "");
    set_string(&collar_cfg.tuning_file, "");
    set_string(&collar_cfg.tuning_dir, "/nonexistent");
    reinit();
}

int main(int argc, char **argv)
{
    const char *tables = argc > 1 ? argv[1] : getenv("TOP_SRCDIR");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/tables", tables ? tables : "..");
    collar_config_load();
    set_string(&collar_cfg.tuning_dir, "/nonexistent");
    test_builtin();
    test_builtin_shape();
    test_precedence(dir);
    collar_select_finalize();
    return unit_finish("test_select");
}
