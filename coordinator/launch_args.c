/* The command of a generation (docs/coordinator.md "Supervision", docs/health.md "Fencing"): the job's
 * command with {hostfile} (DIR/hosts.GEN: --hostfile without the fenced nodes), {np} (its slot count) and
 * {exclude} (srun's --exclude= of the fenced nodes, which --slurm also drains once with scontrol) filled
 * from DIR/fence.json (health/fence_list.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord.h"
#include "odl/health.h"
#include "odl/log.h"
#include "odl/parse.h"
#include "odl/strbuf.h"

/* The slots of an Open MPI hostfile ("host slots=N": N, a host without slots= counts 1): {np}. */
static odl_status hostfile_slots(const char *path, int64_t *n) {
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return ODL_ERR(ODL_E_IO, "cannot read %s: %s", path, strerror(errno));
    char line[1024];
    odl_status st = ODL_OK;
    for (int no = 1; st == ODL_OK && fgets(line, sizeof line, f); no++) {
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        char *s = strstr(p, "slots="), word[32] = "";
        int64_t k = 1;
        if (s && (sscanf(s + 6, "%31[^ \t\n#]", word) != 1 || odl_parse_i64(word, 1, INT32_MAX, &k) != ODL_PARSE_OK))
            st = ODL_ERR(ODL_E_FORMAT, "%s:%d: slots=%s is not a positive integer", path, no, word);
        *n += k;
    }
    fclose(f);
    return st;
}

/* arg with every {name} replaced by its value (malloc'd). */
static char *subst(const char *arg, const char *const *names, const char *const *vals, int n) {
    size_t cap = strlen(arg) + 1;
    for (int i = 0; i < n; i++)
        for (const char *p = strstr(arg, names[i]); p; p = strstr(p + 1, names[i])) cap += strlen(vals[i]);
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    for (const char *p = arg; *p;) {
        int hit = -1;
        for (int i = 0; i < n && hit < 0; i++)
            if (!strncmp(p, names[i], strlen(names[i]))) hit = i;
        if (hit < 0) {
            *o++ = *p++;
            continue;
        }
        o += sprintf(o, "%s", vals[hit]);
        p += strlen(names[hit]);
    }
    *o = 0;
    return out;
}

odl_status coord_launch_argv(coord *c, char ***argv_out) {
    *argv_out = NULL;
    size_t n = 0;
    while (c->o.cmd[n]) n++;
    char hostfile[PATH_MAX + 64] = "", np[32] = "", exclude[4096] = "";
    if (c->o.hostfile[0] || c->o.slurm) {
        odl_fence_list l;
        ODL_CHECK(odl_fence_list_load(&l, c->o.job_dir));
        char fenced[1024];
        odl_strbuf fb;
        odl_strbuf_fixed(&fb, fenced, sizeof fenced);
        for (int i = 0; i < l.n; i++)
            if (!l.items[i].lifted_time) odl_strbuf_printf(&fb, " %s", l.items[i].node);
        odl_status s = ODL_OK;
        if (c->o.hostfile[0]) {
            int kept = 0;
            snprintf(hostfile, sizeof hostfile, "%s/hosts.%" PRIu64, c->o.job_dir, c->generation);
            int64_t slots = 0;
            s = odl_fence_write_hostfile(&l, c->o.hostfile, hostfile, &kept);
            if (s == ODL_OK) s = hostfile_slots(hostfile, &slots);
            if (s == ODL_OK) {
                snprintf(np, sizeof np, "%" PRId64, slots);
                ODL_LOG_INFO("generation %" PRIu64 ": hostfile %s: %d host%s, %s slot%s%s%s", c->generation, hostfile,
                             kept, kept == 1 ? "" : "s", np, strcmp(np, "1") ? "s" : "", fb.len ? "; fenced:" : "", fenced);
            }
        }
        if (s == ODL_OK && c->o.slurm) {
            int issued = 0;
            if (odl_fence_drain(&l, &issued) != ODL_OK) ODL_LOG_ERROR("%s", odl_error_msg()); /* exclusion still holds */
            else if (issued) ODL_LOG_INFO("drained %d fenced node%s with scontrol", issued, issued == 1 ? "" : "s");
            s = odl_fence_srun_exclude(&l, exclude, sizeof exclude);
            if (s == ODL_OK && exclude[0]) ODL_LOG_INFO("generation %" PRIu64 ": srun %s", c->generation, exclude);
        }
        odl_fence_list_free(&l);
        ODL_CHECK(s);
    }
    char **argv = calloc(n + 1, sizeof *argv);
    if (!argv) return ODL_ERR(ODL_E_NOMEM, "arguments");
    /* only the tokens of the options given are replaced; others stay as written */
    const char *names[3], *vals[3];
    int nsub = 0;
    if (c->o.hostfile[0]) {
        names[nsub] = "{hostfile}", vals[nsub++] = hostfile;
        names[nsub] = "{np}", vals[nsub++] = np;
    }
    if (c->o.slurm) names[nsub] = "{exclude}", vals[nsub++] = exclude;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        /* {exclude} alone with nothing fenced: no argument (srun refuses an empty one) */
        if (c->o.slurm && !strcmp(c->o.cmd[i], "{exclude}") && !exclude[0]) continue;
        argv[k] = subst(c->o.cmd[i], names, vals, nsub);
        if (!argv[k]) {
            coord_launch_argv_free(argv);
            return ODL_ERR(ODL_E_NOMEM, "arguments");
        }
        k++;
    }
    *argv_out = argv;
    return ODL_OK;
}

void coord_launch_argv_free(char **argv) {
    for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
    free(argv);
}
