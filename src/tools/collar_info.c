/*
 * collar-info: what collar would do here.
 *
 * Prints collar's version, the MPI library it was built with, the device
 * backends, and every COLLAR_* variable with the value in force (from this
 * environment), its default and what it does.  Runs without mpirun: it does
 * not initialise MPI.
 */
#include "config.h"
#include "../algo/algo.h"
#include "../mem/gdrcopy.h"
#include "../mem/mem.h"
#include "libpath.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    char lib[4096];
    collar_tool_library_path(lib, sizeof(lib));
    fprintf(out,
        "Usage: collar-info [OPTION]\n"
        "Show what collar (the collective algorithm router for MPI) would do in\n"
        "this environment: version, MPI library, device backends, and every\n"
        "COLLAR_* variable with its value in force, default and meaning.\n"
        "\n"
        "Options:\n"
        "  --check FILE          validate a tuning table: exit 0 if it is valid,\n"
        "                        else print the first error (file:line:column) and\n"
        "                        exit 1\n"
        "  --explain BYTES       say which rule and algorithm an allreduce of BYTES\n"
        "                        per rank (4194304, 4M, 4MiB, 4 MiB) would get,\n"
        "                        and why;\n"
        "      --ranks N         ... on N ranks (default 2)\n"
        "      --nodes K         ... spread evenly over K nodes (default 1), or\n"
        "                        'unknown' (a communicator whose nodes collar\n"
        "                        does not know: only rules without a node shape)\n"
        "      --memory KIND     ... of host, device or managed memory (default\n"
        "                        device)\n"
        "  --variables           print only the COLLAR_* variables\n"
        "  --markdown            print the variables as a Markdown table (for docs)\n"
        "  --version             print the version and exit\n"
        "  --help                print this help and exit\n"
        "\n"
        "The rules come from COLLAR_ALGORITHM, COLLAR_ALLREDUCE_RULES,\n"
        "COLLAR_TUNING_FILE, the site default and the built-in rules, in that\n"
        "order, as in an MPI program (docs/tuning.md); collar-info without an\n"
        "option lists those in force here, each with its hash.\n"
        "\n"
        "Use collar by preloading it under an MPI program:\n"
        "  LD_PRELOAD=%s mpirun -np 4 ./app\n", lib);
}

/* The sources of the allreduce rules in force here, strongest first, as
 * an MPI program would read them (collar_select_init), each with its
 * table's hash (the one COLLAR_CHECK compares across ranks). */
static void print_rules(void)
{
    printf("  allreduce rules   : the first source with a rule for the call "
           "decides\n");
    if (collar_cfg.algorithm != COLLAR_ALG_AUTO) {
        printf("    COLLAR_ALGORITHM       : %s, forced on every call (the "
               "sources below are not used)\n", collar_alg_name(collar_cfg.algorithm));
    } else {
        printf("    COLLAR_ALGORITHM       : auto (not forced)\n");
    }
    if (collar_select_init() != COLLAR_OK) {
        printf("    (the built-in rules do not parse)\n");
        return;
    }
    collar_rule_source_t src;
    for (int i = 0; collar_select_source(i, &src); i++) {
        printf("    %-22s : ", src.what);
        if (src.state == COLLAR_SOURCE_UNSET) {
            if (src.name != NULL) {
                printf("none (no %s)\n", src.name);
            } else {
                printf("not set\n");
            }
            continue;
        }
        if (src.name != NULL) {
            printf("%s: ", src.name);
        }
        if (src.state == COLLAR_SOURCE_REJECTED) {
            printf("ignored whole, it does not parse: %s\n", src.error);
            continue;
        }
        const collar_table_t *t = src.table;
        printf("%d rule%s, hash %016llx%s%s\n", t->nrules, collar_plural(t->nrules),
               (unsigned long long)t->hash, t->system[0] ? ", system: " : "",
               t->system);
    }
    if (collar_cfg.chunk_size != 0) {
        char size[32];
        collar_format_bytes_exact(collar_cfg.chunk_size, size, sizeof(size));
        printf("    COLLAR_CHUNK_SIZE      : %s, the chunk of every rule\n", size);
    }
    printf("    all together           : hash %016llx\n",
           (unsigned long long)collar_select_hash());
    collar_select_finalize();
}

static void print_environment(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0;
    /* Both may be called before MPI_Init. */
    MPI_Get_library_version(lib, &len);
    MPI_Get_version(&major, &minor);
    char *nl = strchr(lib, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    printf("collar %s\n", PACKAGE_VERSION);
    printf("  MPI library       : %s (MPI %d.%d)\n", lib, major, minor);
    printf("  device backends   : %s built in", collar_device_builtin());
#ifndef COLLAR_HAVE_CUDA
    printf(" (built without CUDA)");
#endif
    printf("\n");
    /* What COLLAR_DEVICE opens here (auto: cuda only with a usable GPU). */
    const collar_device_t *dev = collar_device_open(collar_cfg.device);
    printf("  device in force   : %s (COLLAR_DEVICE=%s)\n", dev->name,
           getenv("COLLAR_DEVICE") != NULL ? getenv("COLLAR_DEVICE") : "auto");
    /* GDRCopy: loaded and its driver opened here, as the cuda backend
     * would at its first small copy. */
    const char *why = NULL;
    if (collar_gdr_available(&why)) {
        printf("  GDRCopy           : in use: device copies up to gdrcopy= (default "
               "8 KiB) by the CPU%s\n", strcmp(dev->name, "cuda") == 0 ? ""
               : " (with the cuda backend; not in force here)");
    } else {
        printf("  GDRCopy           : not in use (%s)\n", why);
    }
    collar_gdr_finalize();
    collar_device_close();
    printf("  call sites        : %s\n",
#ifdef COLLAR_HAVE_LIBUNWIND
           "libunwind"
#else
           "unavailable (built without libunwind)"
#endif
           );
    printf("  tuning tables     : %s\n", COLLAR_TUNINGDIR);
    print_rules();
    printf("\nCOLLAR_* variables (value in force, default, meaning):\n");
}

static int check_table(const char *path)
{
    collar_table_t table;
    char err[1024];
    if (collar_table_load(path, &table, err, sizeof(err)) != COLLAR_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* Valid but useless: chunk= on an algorithm that has no chunks. */
    for (int i = 0; i < table.nrules; i++) {
        const collar_rule_t *r = &table.rules[i];
        if (r->chunk != 0 && r->alg != COLLAR_ALG_CHUNKED
            && r->alg != COLLAR_ALG_RING) {
            fprintf(stderr, "%s:%d: warning: chunk= has no effect on %s %s rule "
                    "(only chunked and ring cut messages into chunks)\n", path,
                    r->line, collar_article(collar_alg_name(r->alg)),
                    collar_alg_name(r->alg));
        }
        if (collar_rule_shaped(r)) {
            /* Valid but dead: no communicator of its ranks has its shape
             * (K nodes of P ranks hold K x P ranks). */
            const long long nlo = r->nodes_lo ? r->nodes_lo : 1;
            const long long nhi = r->nodes_lo ? r->nodes_hi : INT_MAX;
            const long long plo = r->ppn_lo ? r->ppn_lo : 1;
            const long long phi = r->ppn_lo ? r->ppn_hi : INT_MAX;
            if (nlo * plo > r->ranks_hi || nhi * phi < r->ranks_lo) {
                fprintf(stderr, "%s:%d: warning: no communicator of the rule's "
                        "ranks has its node shape: the rule never matches\n",
                        path, r->line);
            }
        }
        if (r->gdrcopy != 0 && r->alg != COLLAR_ALG_STAGED
            && r->alg != COLLAR_ALG_CHUNKED) {
            fprintf(stderr, "%s:%d: warning: gdrcopy= has no effect on %s %s "
                    "rule (only staged and chunked copy through GDRCopy)\n",
                    path, r->line, collar_article(collar_alg_name(r->alg)),
                    collar_alg_name(r->alg));
        }
        if (r->oneshot != 0 && r->alg != COLLAR_ALG_IPC) {
            fprintf(stderr, "%s:%d: warning: oneshot= has no effect on %s %s "
                    "rule (only ipc has a one-shot threshold)\n", path, r->line,
                    collar_article(collar_alg_name(r->alg)),
                    collar_alg_name(r->alg));
        }
    }
    printf("%s: valid tuning table, %d rule%s, hash %016llx%s%s\n", path,
           table.nrules, collar_plural(table.nrules),
           (unsigned long long)table.hash, table.system[0] ? ", system: " : "",
           table.system);
    collar_table_free(&table);
    return 0;
}

/* What ipc's and hier's eligibility make of the node shape (the rest needs
 * the call: src/algo/ipc.c, hier.c), as in collar_algo_ipc_eligible and
 * collar_algo_hier_eligible; NULL when the algorithm runs as chosen. */
static const char *shape_fallback(collar_plan_t *plan, long nodes)
{
    if (plan->alg == COLLAR_ALG_HIER && nodes == 1) {
        plan->alg = COLLAR_ALG_IPC;
        return "hier -> ipc: the communicator is one node";
    }
    if (plan->alg == COLLAR_ALG_HIER && nodes == 0) {
        plan->alg = COLLAR_ALG_CHUNKED;
        return "hier -> chunked: the ranks cannot be grouped by node";
    }
    if (plan->alg == COLLAR_ALG_IPC && nodes != 1) {
        plan->alg = COLLAR_ALG_CHUNKED;
        return "ipc -> chunked: the communicator spans more than one node";
    }
    return NULL;
}

static int explain(const char *bytes_arg, const char *ranks_arg,
                   const char *nodes_arg, const char *memory_arg)
{
    size_t bytes;
    long ranks, nodes = 0;
    collar_mem_kind_t mem;
    if (collar_parse_size(bytes_arg, &bytes) != COLLAR_OK) {
        fprintf(stderr, "collar-info: --explain expects a size in bytes (e.g. "
                "4096, 64K, 16M, \"4 MiB\"), not '%s'\n", bytes_arg);
        return 2;
    }
    if (collar_parse_long(ranks_arg, 1, INT_MAX, &ranks) != COLLAR_OK) {
        fprintf(stderr, "collar-info: --ranks expects a positive integer, not "
                "'%s'\n", ranks_arg);
        return 2;
    }
    if (strcmp(nodes_arg, "unknown") != 0
        && (collar_parse_long(nodes_arg, 1, INT_MAX, &nodes) != COLLAR_OK
            || nodes > ranks)) {
        fprintf(stderr, "collar-info: --nodes expects a number of nodes from 1 "
                "to the number of ranks (%ld), or unknown, not '%s'\n", ranks,
                nodes_arg);
        return 2;
    }
    if (strcmp(memory_arg, "host") == 0) {
        mem = COLLAR_MEM_HOST;
    } else if (strcmp(memory_arg, "device") == 0) {
        mem = COLLAR_MEM_DEVICE;
    } else if (strcmp(memory_arg, "managed") == 0) {
        mem = COLLAR_MEM_MANAGED;
    } else {
        fprintf(stderr, "collar-info: --memory expects host, device or managed, "
                "not '%s'\n", memory_arg);
        return 2;
    }
    if (collar_select_init() != COLLAR_OK) {
        return 1;
    }
    collar_select_key_t key = {
        .coll = COLLAR_COLL_ALLREDUCE, .mem = mem, .comm_size = (int)ranks,
        .bytes = bytes, .reducible = 1,
        /* Evenly spread: the first ranks % nodes nodes hold one rank more. */
        .nodes = (int)nodes,
        .ppn_min = nodes ? (int)(ranks / nodes) : 0,
        .ppn_max = nodes ? (int)((ranks + nodes - 1) / nodes) : 0,
    };
    collar_plan_t plan;
    collar_select(&key, &plan);
    char size[32];
    collar_format_bytes(bytes, size, sizeof(size));
    printf("allreduce of %zu byte%s (%s) per rank, %ld rank%s, %s memory\n",
           bytes, collar_plural((long)bytes), size, ranks, collar_plural(ranks),
           collar_mem_kind_name(mem));
    if (nodes == 0) {
        printf("  nodes          : unknown (only rules without a node shape "
               "match)\n");
    } else if (key.ppn_min == key.ppn_max) {
        printf("  nodes          : %ld, %d rank%s on each\n", nodes, key.ppn_min,
               key.ppn_min == 1 ? "" : "s");
    } else {
        printf("  nodes          : %ld, %d to %d ranks on each\n", nodes,
               key.ppn_min, key.ppn_max);
    }
    printf("  rules in force : %s\n", collar_select_sources());
    if (plan.rule != NULL) {
        char rule[256];
        collar_rule_format(plan.rule, rule, sizeof(rule));
        printf("  matching rule  : %s line %d: %s\n", plan.source, plan.rule->line,
               rule);
    } else {
        printf("  matching rule  : none (%s)\n", plan.reason);
    }
    const char *fallback = shape_fallback(&plan, nodes);
    if (fallback != NULL) {
        printf("  eligibility    : %s\n", fallback);
    }
    printf("  algorithm      : %s", collar_alg_name(plan.alg));
    if (plan.alg == COLLAR_ALG_CHUNKED) {
        size_t chunk = plan.chunk ? plan.chunk : ((size_t)1 << 20);
        collar_format_bytes(chunk, size, sizeof(size));
        printf(", chunks of %s%s, %zu chunk%s", size,
               collar_cfg.chunk_size ? " (COLLAR_CHUNK_SIZE)" : "",
               bytes ? (bytes + chunk - 1) / chunk : 0,
               bytes > chunk ? "s" : "");
    }
    printf("\n");
    if (plan.alg == COLLAR_ALG_NATIVE && mem != COLLAR_MEM_HOST) {
        printf("  note           : native on device memory needs an MPI library "
               "that takes device pointers;\n"
               "                   otherwise collar falls back to staged "
               "(COLLAR_MPI_CUDA_AWARE)\n");
    }
    if (plan.alg == COLLAR_ALG_IPC) {
        const size_t oneshot = plan.oneshot ? plan.oneshot : COLLAR_IPC_ONESHOT_DEFAULT;
        collar_format_bytes(oneshot, size, sizeof(size));
        printf("  mode           : %s (one-shot below %s)\n",
               bytes < oneshot || ranks == 1 ? "one-shot: every rank reduces every "
               "peer's whole message" : "two-shot: a slice each, then gathered",
               size);
    }
    if (plan.alg == COLLAR_ALG_HIER) {
        size_t chunk = plan.chunk ? plan.chunk : ((size_t)1 << 20);
        collar_format_bytes(chunk, size, sizeof(size));
        printf("  mode           : slices reduced in each node through IPC "
               "memory, allreduced across\n"
               "                   nodes in pieces of %s, gathered through IPC "
               "memory\n", size);
    }
    if (plan.alg == COLLAR_ALG_IPC || plan.alg == COLLAR_ALG_HIER) {
        printf("  note           : %s needs device buffers, a predefined op and "
               "datatype without gaps,\n"
               "                   %s,\n"
               "                   and every rank able to map the device memory "
               "of its node (CUDA IPC);\n"
               "                   otherwise every rank falls back to chunked "
               "(said at info level, counted in statistics)\n",
               collar_alg_name(plan.alg),
               plan.alg == COLLAR_ALG_IPC ? "all ranks on one node"
               : "ranks on more than one node (on one node it runs ipc)");
    }
    if (plan.alg == COLLAR_ALG_CHUNKED) {
        printf("  note           : a datatype whose elements interleave falls "
               "back to staged\n");
    }
    if ((plan.alg == COLLAR_ALG_STAGED || plan.alg == COLLAR_ALG_CHUNKED)
        && mem != COLLAR_MEM_HOST) {
        const size_t limit = collar_algo_gdrcopy_limit(&plan);
        collar_format_bytes(limit, size, sizeof(size));
        if (limit == 0) {
            printf("  gdrcopy        : off (gdrcopy=0): every copy on a stream\n");
        } else {
            printf("  gdrcopy        : copies of up to %s by the CPU where GDRCopy "
                   "is in use (%s)\n", size, plan.gdrcopy != 0
                   ? "the rule's gdrcopy=" : "the default; a rule's gdrcopy= sets it");
        }
    }
    collar_select_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    static char explain_joined[64];
    int only_vars = 0, markdown = 0;
    const char *check = NULL, *explain_bytes = NULL;
    const char *ranks = "2", *nodes = "1", *memory = "device";
    for (int i = 1; i < argc; i++) {
        const int has_value = i + 1 < argc;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("collar-info (collar) %s\n", PACKAGE_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--variables") == 0) {
            only_vars = 1;
        } else if (strcmp(argv[i], "--markdown") == 0) {
            markdown = 1;
        } else if (strcmp(argv[i], "--check") == 0 && has_value) {
            check = argv[++i];
        } else if (strcmp(argv[i], "--explain") == 0 && has_value) {
            explain_bytes = argv[++i];
            /* "--explain 4 MiB": the unit as a word of its own. */
            size_t v;
            char joined[64];
            if (i + 1 < argc && isalpha((unsigned char)argv[i + 1][0])
                && strlen(argv[i + 1]) < 8 && strlen(explain_bytes) < 32) {
                snprintf(joined, sizeof(joined), "%s %s", explain_bytes, argv[i + 1]);
                if (collar_parse_size(joined, &v) == COLLAR_OK) {
                    snprintf(explain_joined, sizeof(explain_joined), "%s", joined);
                    explain_bytes = explain_joined;
                    i++;
                }
            }
        } else if (strcmp(argv[i], "--ranks") == 0 && has_value) {
            ranks = argv[++i];
        } else if (strcmp(argv[i], "--nodes") == 0 && has_value) {
            nodes = argv[++i];
        } else if (strcmp(argv[i], "--memory") == 0 && has_value) {
            memory = argv[++i];
        } else {
            const int takes_value = strcmp(argv[i], "--check") == 0
                || strcmp(argv[i], "--explain") == 0
                || strcmp(argv[i], "--ranks") == 0
                || strcmp(argv[i], "--nodes") == 0
                || strcmp(argv[i], "--memory") == 0;
            fprintf(stderr, "collar-info: %s option '%s'\n",
                    takes_value ? "missing value of" : "unknown", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    collar_config_load();
    if (check != NULL) {
        return check_table(check);
    }
    if (explain_bytes != NULL) {
        return explain(explain_bytes, ranks, nodes, memory);
    }
    if (markdown) {
        collar_config_print(stdout, 1);
        return 0;
    }
    if (!only_vars) {
        print_environment();
    }
    collar_config_print(stdout, 0);
    return 0;
}
