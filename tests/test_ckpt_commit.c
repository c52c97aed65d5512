/* odl_ckpt_commit (odl/ckpt.h): the one commit + retention of a checkpoint directory, used by the
 * unsupervised writer and by odl_coordinator. Files are empty stand-ins: the function goes by names only.
 * Asserts what is kept, what is deleted, what the manifest says, and that nothing newer than the
 * committed step, nor the committed one, is ever deleted; a failed delete is not an error. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/ckpt.h"
#include "test_util.h"

static char g_dir[256];

static void touch_step(int64_t step) {
    char name[64], p[400];
    odl_ckpt_file_name(step, name, sizeof name);
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
}

static int has_step(int64_t step) {
    char name[64], p[400];
    odl_ckpt_file_name(step, name, sizeof name);
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return access(p, F_OK) == 0;
}

/* The steps on disk, newest first, as "40,30" */
static void on_disk(char *buf, size_t cap) {
    odl_ckpt_entry *e = NULL;
    size_t n = 0;
    buf[0] = 0;
    if (odl_ckpt_list(g_dir, &e, &n) != ODL_OK) return;
    size_t off = 0;
    for (size_t i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%" PRId64, i ? "," : "", e[i].step);
    free(e);
}

/* The manifest's "checkpoints" as steps, "30,20", and its step/epoch/cursor. */
static void manifest(char *buf, size_t cap, int64_t *step, int64_t *epochs, int64_t *cursor) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", g_dir, ODL_CKPT_MANIFEST);
    buf[0] = 0;
    *step = *epochs = *cursor = -1;
    json_error_t err;
    json_t *m = json_load_file(p, 0, &err);
    if (!m) return;
    *step = json_integer_value(json_object_get(m, "step"));
    *epochs = json_integer_value(json_object_get(m, "epochs_completed"));
    *cursor = json_integer_value(json_object_get(m, "cursor"));
    json_t *a = json_object_get(m, "checkpoints");
    size_t off = 0;
    for (size_t i = 0; i < json_array_size(a) && off < cap; i++) {
        int64_t s = -1;
        odl_ckpt_parse_file_name(json_string_value(json_array_get(a, i)), &s);
        off += (size_t)snprintf(buf + off, cap - off, "%s%" PRId64, i ? "," : "", s);
    }
    json_decref(m);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/odl_test_ckpt_commit.%ld", (long)getpid());
    if (mkdir(g_dir, 0755) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", g_dir, strerror(errno));
        return 1;
    }
    char disk[256], man[256];
    int64_t ms, me, mc;
    int deleted = -1;

    /* 10..40 on disk; 40 written but not committed; commit 30 keeping 2. */
    for (int64_t s = 10; s <= 40; s += 10) touch_step(s);
    TOK(odl_ckpt_commit(g_dir, 30, 2, 512, 2, &deleted));
    on_disk(disk, sizeof disk);
    manifest(man, sizeof man, &ms, &me, &mc);
    TCHECK(!strcmp(disk, "40,30,20"), "on disk: %s (want 40,30,20: 10 deleted, 40 newer than the commit)", disk);
    TCHECK(deleted == 1, "deleted %d, want 1", deleted);
    TCHECK(!strcmp(man, "30,20") && ms == 30 && me == 2 && mc == 512, "manifest [%s] step %" PRId64 " epochs %" PRId64
           " cursor %" PRId64, man, ms, me, mc);
    char latest[64];
    int64_t lstep = -1;
    TOK(odl_ckpt_manifest_read(g_dir, latest, sizeof latest, &lstep));
    TCHECK(lstep == 30 && !strcmp(latest, "ckpt-00000030.h5"), "latest %s", latest);

    /* keep 1: only the committed one of those up to it; the newer 40 still untouched. */
    TOK(odl_ckpt_commit(g_dir, 30, 2, 512, 1, &deleted));
    on_disk(disk, sizeof disk);
    TCHECK(!strcmp(disk, "40,30") && deleted == 1, "keep 1: on disk %s, deleted %d", disk, deleted);
    /* keep < 1 is 1: never the committed file itself. */
    TOK(odl_ckpt_commit(g_dir, 30, 2, 512, 0, &deleted));
    TCHECK(has_step(30) && has_step(40) && deleted == 0, "keep 0: committed file kept");

    /* A step that is not there: an error, nothing written or deleted. */
    TFAIL(odl_ckpt_commit(g_dir, 50, 3, 0, 1, &deleted), ODL_E_NOTFOUND);
    on_disk(disk, sizeof disk);
    manifest(man, sizeof man, &ms, &me, &mc);
    TCHECK(!strcmp(disk, "40,30") && ms == 30 && deleted == 0, "missing step: disk %s, manifest step %" PRId64, disk, ms);

    /* A delete that fails (a directory with a checkpoint's name: unlink fails even for root) is a
     * warning; the commit succeeds and the rest of retention goes on. */
    char p[400];
    snprintf(p, sizeof p, "%s/ckpt-00000005.h5", g_dir);
    TCHECK(mkdir(p, 0755) == 0, "mkdir %s", p);
    touch_step(7);
    TOK(odl_ckpt_commit(g_dir, 40, 4, 0, 2, &deleted));
    on_disk(disk, sizeof disk);
    manifest(man, sizeof man, &ms, &me, &mc);
    TCHECK(!strcmp(disk, "40,30,5") && deleted == 1, "failed delete: on disk %s, deleted %d (want 40,30,5 and 1)", disk,
           deleted);
    TCHECK(!strcmp(man, "40,30") && ms == 40 && me == 4, "manifest [%s] step %" PRId64, man, ms);
    rmdir(p);

    /* No such directory. */
    TFAIL(odl_ckpt_commit("/nonexistent/odl/ckpt", 1, 0, 0, 1, NULL), ODL_E_NOTFOUND);

    /* Clean up. */
    odl_ckpt_entry *e = NULL;
    size_t n = 0;
    if (odl_ckpt_list(g_dir, &e, &n) == ODL_OK)
        for (size_t i = 0; i < n; i++) {
            snprintf(p, sizeof p, "%s/%s", g_dir, e[i].name);
            unlink(p);
        }
    free(e);
    snprintf(p, sizeof p, "%s/%s", g_dir, ODL_CKPT_MANIFEST);
    unlink(p);
    rmdir(g_dir);
    return odl_test_finish("test_ckpt_commit");
}
