/*
 * collar - algorithm selection.
 *
 * A pure function of what every rank agrees on (collective, memory kind,
 * communicator size, bytes, the communicator's node shape) and of the
 * configuration, so that all ranks make
 * the same choice.  Sources, strongest first:
 *
 *   1. COLLAR_ALGORITHM        forces one algorithm for every call;
 *   2. COLLAR_ALLREDUCE_RULES  rules inline, separated by ';';
 *   3. COLLAR_TUNING_FILE      a tuning table;
 *   4. the site default        <datadir>/collar/tuning/default.table;
 *   5. the built-in rules      compiled from tuning/default.table.
 *
 * The first source with a rule matching the call decides (so an inline rule
 * for large messages only leaves the rest to the sources below it).  A source
 * that does not parse is rejected whole, with one warning naming the file,
 * line and column and saying which rules are in force instead.  Then
 * COLLAR_CHUNK_SIZE overrides the chunk of whatever rule matched.
 * Eligibility (can this algorithm run this call?) is checked afterwards, by
 * the algorithms layer.
 *
 * Message size ("bytes") is always one rank's contribution: count times the
 * size of the datatype (MPI_Type_size), gaps of derived types not counted.
 */
#include "config.h"
#include "core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern const char collar_builtin_rules[];

typedef struct {
    char           name[1100];  /* for reasons and messages */
    collar_table_t table;
} source_t;

enum { SRC_INLINE, SRC_FILE, SRC_SITE, SRC_BUILTIN, SRC_COUNT };

static source_t sources[SRC_COUNT];
static int      nsources;
static char     in_force[1024];

/* Every source as collar_select_init found it (collar_select_source). */
static struct {
    int  state;           /* collar_source_state_t */
    int  index;           /* in sources[], when in force */
    char name[1100];      /* a file's path, or "" */
    char error[1024];     /* when rejected */
} slots[SRC_COUNT];
static const char *const slot_what[SRC_COUNT] = {
    "COLLAR_ALLREDUCE_RULES", "COLLAR_TUNING_FILE", "site default",
    "built-in rules",
};

const char *collar_select_sources(void)
{
    return in_force;
}

static void describe_in_force(void)
{
    size_t o = 0;
    in_force[0] = '\0';
    for (int i = 0; i < nsources && o < sizeof(in_force); i++) {
        o += (size_t)snprintf(in_force + o, sizeof(in_force) - o, "%s%s",
                              i ? ", then " : "", sources[i].name);
    }
}

static void add_source(const char *name, const collar_table_t *table)
{
    source_t *src = &sources[nsources++];
    snprintf(src->name, sizeof(src->name), "%s", name);
    src->table = *table;
}

/* Parse or load the source of slot `slot`; a source that does not parse is
 * skipped, and its message kept for the warning. */
static void load_source(int slot, const char *name, const char *text,
                        const char *path)
{
    collar_table_t table;
    char *err = slots[slot].error;
    const size_t errlen = sizeof(slots[slot].error);
    err[0] = '\0';
    snprintf(slots[slot].name, sizeof(slots[slot].name), "%s", path ? path : "");
    collar_status_t st = path != NULL
        ? collar_table_load(path, &table, err, errlen)
        : collar_table_parse(text, strlen(text), name, 1, &table, err, errlen);
    if (st == COLLAR_OK) {
        char label[1080];
        snprintf(label, sizeof(label), "%s%s", path ? "file " : "", name);
        slots[slot].state = COLLAR_SOURCE_IN_FORCE;
        slots[slot].index = nsources;
        add_source(label, &table);
        collar_debug(TUNING, "%s: %d rules", label, table.nrules);
    } else {
        slots[slot].state = COLLAR_SOURCE_REJECTED;
    }
}

int collar_select_source(int i, collar_rule_source_t *out)
{
    if (i < 0 || i >= SRC_COUNT) {
        return 0;
    }
    out->what = slot_what[i];
    out->name = slots[i].name[0] ? slots[i].name : NULL;
    out->state = slots[i].state;
    out->table = slots[i].state == COLLAR_SOURCE_IN_FORCE
                 ? &sources[slots[i].index].table : NULL;
    out->error = slots[i].state == COLLAR_SOURCE_REJECTED ? slots[i].error : NULL;
    return 1;
}

collar_status_t collar_select_init(void)
{
    collar_select_finalize();
    const char *rules = collar_cfg.allreduce_rules;
    const char *file = collar_cfg.tuning_file;
    char site[1024];
    snprintf(site, sizeof(site), "%s/default.table",
             collar_cfg.tuning_dir[0] ? collar_cfg.tuning_dir : COLLAR_TUNINGDIR);
    struct stat sb;
    const int have_site = stat(site, &sb) == 0;

    /* One message per rejected source: inline, file, site. */
    const char *what[3] = { "variable", "file", "file" };
    if (rules != NULL && rules[0] != '\0') {
        load_source(SRC_INLINE, "COLLAR_ALLREDUCE_RULES", rules, NULL);
    }
    if (file != NULL && file[0] != '\0') {
        load_source(SRC_FILE, file, NULL, file);
    }
    if (have_site) {
        load_source(SRC_SITE, site, NULL, site);
    } else {
        snprintf(slots[SRC_SITE].name, sizeof(slots[SRC_SITE].name), "%s", site);
    }

    collar_table_t builtin;
    char err[512];
    if (collar_table_parse(collar_builtin_rules, strlen(collar_builtin_rules),
                           "built-in rules", 0, &builtin, err, sizeof(err))
        != COLLAR_OK) {
        /* Built from tuning/default.table, which make check validates. */
        collar_error(TUNING, "%s", err);
        return COLLAR_ERR_INVALID;
    }
    slots[SRC_BUILTIN].state = COLLAR_SOURCE_IN_FORCE;
    slots[SRC_BUILTIN].index = nsources;
    add_source("built-in rules", &builtin);
    describe_in_force();
    for (int i = 0; i < 3; i++) {
        if (slots[i].state == COLLAR_SOURCE_REJECTED) {
            collar_warn_lead(TUNING, "%s; the whole %s is ignored; rules in force: %s",
                             slots[i].error, what[i], in_force);
        }
    }
    if (collar_log_lead) {
        collar_info(TUNING, "allreduce rules: %s", in_force);
    }
    return COLLAR_OK;
}

void collar_select_finalize(void)
{
    for (int i = 0; i < nsources; i++) {
        collar_table_free(&sources[i].table);
    }
    nsources = 0;
    in_force[0] = '\0';
    memset(slots, 0, sizeof(slots));
}

uint64_t collar_select_hash(void)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < nsources; i++) {
        h = (h ^ sources[i].table.hash) * 1099511628211ull;
    }
    return h;
}

void collar_select(const collar_select_key_t *key, collar_plan_t *plan)
{
    plan->chunk = 0;
    plan->oneshot = 0;
    plan->gdrcopy = 0;
    plan->rule = NULL;
    plan->source = NULL;
    plan->fallback = NULL;
    if (collar_cfg.algorithm != COLLAR_ALG_AUTO) {
        plan->alg = collar_cfg.algorithm;
        plan->reason = "forced by COLLAR_ALGORITHM";
    } else {
        /* Managed memory is staged like device memory. */
        collar_mem_kind_t mem = key->mem == COLLAR_MEM_HOST ? COLLAR_MEM_HOST
                                                            : COLLAR_MEM_DEVICE;
        plan->reason = "no rule matches: default for the memory kind";
        plan->alg = mem == COLLAR_MEM_HOST ? COLLAR_ALG_NATIVE : COLLAR_ALG_STAGED;
        for (int i = 0; i < nsources; i++) {
            const collar_rule_t *rule =
                collar_table_match_key(&sources[i].table, key, mem);
            if (rule != NULL) {
                plan->alg = rule->alg;
                plan->chunk = rule->chunk;
                plan->oneshot = rule->oneshot;
                plan->gdrcopy = rule->gdrcopy;
                plan->rule = rule;
                plan->source = sources[i].name;
                plan->reason = "rule";
                break;
            }
        }
    }
    if (collar_cfg.chunk_size != 0) {
        plan->chunk = collar_cfg.chunk_size;   /* (raised at its load) */
    }
    if (plan->chunk != 0 && plan->chunk < COLLAR_CHUNK_MIN) {
        char once[64];
        snprintf(once, sizeof(once), "chunk floor %p", (const void *)plan->rule);
        if (collar_log_first(once)) {
            char where[200];
            collar_plan_describe(plan, where, sizeof(where));
            collar_warn_lead(TUNING, "chunk=%zu (%s) is below the least chunk, "
                             "1K: raised to 1K", plan->chunk, where);
        }
        plan->chunk = COLLAR_CHUNK_MIN;
    }
}

int collar_select_host_native(void)
{
    if (collar_cfg.algorithm != COLLAR_ALG_AUTO) {
        return collar_cfg.algorithm == COLLAR_ALG_NATIVE;
    }
    for (int i = 0; i < nsources; i++) {
        const collar_table_t *t = &sources[i].table;
        for (int r = 0; r < t->nrules; r++) {
            if (t->rules[r].mem != COLLAR_MEM_DEVICE
                && t->rules[r].alg != COLLAR_ALG_NATIVE) {
                return 0;
            }
        }
    }
    return 1;
}

void collar_plan_describe(const collar_plan_t *plan, char *buf, size_t len)
{
    if (plan->rule != NULL) {
        snprintf(buf, len, "%s line %d", plan->source, plan->rule->line);
    } else {
        snprintf(buf, len, "%s", plan->reason);
    }
}
