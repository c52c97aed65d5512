/* odl_ckpt: look into and check checkpoint and weights files (docs/checkpoint_format.md).
 *
 *   odl_ckpt inspect FILE [--no-config]   metadata, every tensor, the config; verifies every checksum
 *   odl_ckpt verify FILE|DIR ...          checksums and layout; for a directory every ckpt-<step>.h5,
 *                                         the manifest, and which file --resume auto would take
 *   odl_ckpt latest DIR                   path of the newest good checkpoint (what --resume auto takes)
 *   odl_ckpt diff A B [--prefix /model]   compare the datasets under a prefix bit for bit
 *
 * Exit status: 0 good (identical for diff), 1 a bad file (or a difference, or no good checkpoint),
 * 2 a usage error.
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "odl/ckpt.h"
#include "odl/h5io.h"
#include "worker/cli_flags.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: odl_ckpt inspect FILE [--no-config]\n"
            "       odl_ckpt verify FILE|DIR ...\n"
            "       odl_ckpt latest DIR\n"
            "       odl_ckpt diff A B [--prefix /model]\n"
            "Exit status: 0 good / identical, 1 bad / different / none found, 2 usage error.\n");
}

/* ---- verify ---- */

typedef struct vctx {
    int verbose, bad;
    int64_t n;
} vctx;

static void verify_cb(void *ctx, const char *dset, const odl_h5_info *info, odl_status st, const char *msg) {
    vctx *c = ctx;
    c->n++;
    if (st != ODL_OK) {
        c->bad++;
        printf("  BAD  %s: %s\n", dset, msg);
    } else if (c->verbose) {
        char sh[128];
        printf("  ok   %-44s %-8s %-20s crc32 %08" PRIx32 "\n", dset, odl_dtype_name(info->dtype), odl_dims_str(info->ndim, info->shape, sh, sizeof sh),
               info->crc32);
    }
}

static int verify_file(const char *path, int verbose, odl_ckpt_meta *meta_out) {
    vctx c = {verbose, 0, 0};
    odl_ckpt_meta m;
    odl_status s = odl_ckpt_verify(path, &m, verify_cb, &c);
    if (meta_out) *meta_out = m;
    if (s != ODL_OK) {
        printf("%s: BAD: %s\n", path, odl_error_msg_user());
        return 1;
    }
    if (m.is_checkpoint)
        printf("%s: ok: checkpoint at step %" PRId64 " (epoch %" PRId64 ", %" PRId64 " completed, cursor %" PRId64
               "), %" PRId64 " datasets verified\n", path, m.step, odl_ckpt_epoch_label(m.epoch, m.cursor), m.epoch,
               m.cursor, c.n);
    else printf("%s: ok: %s file, %" PRId64 " datasets verified\n", path, m.format, c.n);
    return 0;
}

/* Every checkpoint of a directory, newest first; *latest receives the newest good one. */
static int verify_dir(const char *dir, char *latest, size_t cap, int print) {
    odl_ckpt_entry *e = NULL;
    size_t n = 0;
    latest[0] = '\0';
    if (odl_ckpt_list(dir, &e, &n) != ODL_OK) {
        printf("%s: BAD: %s\n", dir, odl_error_msg_user());
        return 1;
    }
    int bad = 0;
    char mname[64] = "";
    int64_t mstep = -1;
    odl_status ms = odl_ckpt_manifest_read(dir, mname, sizeof mname, &mstep);
    if (print) {
        if (ms == ODL_OK) printf("%s/%s: latest %s\n", dir, ODL_CKPT_MANIFEST, mname);
        else printf("%s/%s: %s\n", dir, ODL_CKPT_MANIFEST, ms == ODL_E_NOTFOUND ? "none" : odl_error_msg_user());
    }
    if (ms != ODL_OK && ms != ODL_E_NOTFOUND) bad = 1;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, e[i].name);
        if (print) {
            if (verify_file(path, 0, NULL) != 0) bad = 1;
            else if (!latest[0]) snprintf(latest, cap, "%s", path);
        } else {
            odl_ckpt_meta m;
            if (odl_ckpt_verify(path, &m, NULL, NULL) == ODL_OK && m.is_checkpoint) {
                snprintf(latest, cap, "%s", path);
                break;
            }
            fprintf(stderr, "odl_ckpt: skipping %s: %s\n", path, odl_error_msg_user());
        }
    }
    if (print) {
        if (n == 0) printf("%s: no checkpoints\n", dir);
        if (latest[0]) printf("%s: --resume auto takes %s\n", dir, latest);
        else if (n) printf("%s: no good checkpoint: --resume auto would start fresh\n", dir);
    }
    free(e);
    return bad;
}

/* ---- inspect ---- */

static int inspect(const char *path, int show_config) {
    odl_h5_reader *r = NULL;
    if (odl_h5_reader_open(path, &r) != ODL_OK) {
        printf("%s: BAD: %s\n", path, odl_error_msg_user());
        return 1;
    }
    odl_ckpt_meta m;
    int meta_ok = odl_ckpt_read_meta(r, &m) == ODL_OK;
    printf("file:            %s\n", path);
    if (!meta_ok) printf("metadata:        BAD: %s\n", odl_error_msg_user());
    else {
        printf("format:          %s, version %" PRId64 "\n", m.format, m.format_version);
        printf("model:           %s: %" PRId64 " tensors, %" PRId64 " parameters\n", m.model, m.n_model_tensors,
               m.n_model_params);
        if (m.world_size > 0) printf("world size:      %" PRId64 "\n", m.world_size);
        if (m.is_checkpoint) {
            printf("step:            %" PRId64 "\n", m.step);
            /* 1-based, as the logs, the metrics JSONL and manifest.json number it */
            printf("epoch:           %" PRId64 " (%" PRId64 " completed; %s)\n", odl_ckpt_epoch_label(m.epoch, m.cursor),
                   m.epoch, m.cursor == 0 && m.epoch > 0 ? "taken at its end" : "taken inside it");
            printf("sample cursor:   %" PRId64 " (global, inside the epoch)\n", m.cursor);
            printf("epoch so far:    %" PRId64 " samples, loss sum %.17g\n", m.epoch_samples, m.epoch_loss_sum);
            printf("rng:             philox, seed %" PRId64 ", step %" PRId64 "\n", m.seed, m.step);
            printf("optimizer:       %s, step %" PRId64 ", lr %.9g\n", m.optimizer, m.optim_step, m.lr);
        }
    }
    printf("datasets:        %zu\n", odl_h5_reader_count(r));
    for (size_t i = 0; i < odl_h5_reader_count(r); i++) {
        const char *name = odl_h5_reader_name(r, i);
        odl_h5_info info;
        char sh[128];
        if (odl_h5_reader_info(r, name, &info) != ODL_OK) printf("  %-46s BAD: %s\n", name, odl_error_msg_user());
        else if (info.has_crc32)
            printf("  %-46s %-8s %-20s crc32 %08" PRIx32 "\n", name, odl_dtype_name(info.dtype), odl_dims_str(info.ndim, info.shape, sh, sizeof sh),
                   info.crc32);
        else printf("  %-46s %-8s %-20s (no crc32)\n", name, odl_dtype_name(info.dtype), odl_dims_str(info.ndim, info.shape, sh, sizeof sh));
    }
    if (show_config && meta_ok) {
        char *yaml = malloc(1 << 20);
        if (yaml && odl_h5_reader_attr_str(r, "/", "config", yaml, 1 << 20) == ODL_OK) {
            printf("config:\n");
            for (char *line = strtok(yaml, "\n"); line; line = strtok(NULL, "\n")) printf("  %s\n", line);
        }
        free(yaml);
    }
    odl_h5_reader_close(r);
    printf("verification:\n");
    return verify_file(path, 0, NULL);
}

/* ---- diff ---- */

static int diff(const char *a, const char *b, const char *prefix) {
    odl_h5_reader *ra = NULL, *rb = NULL;
    if (odl_h5_reader_open(a, &ra) != ODL_OK || odl_h5_reader_open(b, &rb) != ODL_OK) {
        printf("BAD: %s\n", odl_error_msg_user());
        odl_h5_reader_close(ra);
        return 1;
    }
    size_t plen = strlen(prefix);
    int differ = 0;
    int64_t compared = 0;
    for (int pass = 0; pass < 2; pass++) {
        odl_h5_reader *x = pass ? rb : ra, *y = pass ? ra : rb;
        for (size_t i = 0; i < odl_h5_reader_count(x); i++) {
            const char *name = odl_h5_reader_name(x, i);
            if (strncmp(name, prefix, plen) != 0) continue;
            if (!odl_h5_reader_has(y, name)) {
                printf("only in %s: %s\n", pass ? b : a, name);
                differ = 1;
                continue;
            }
            if (pass) continue;
            odl_h5_info ia, ib;
            char sa[128], sb[128];
            if (odl_h5_reader_info(ra, name, &ia) != ODL_OK || odl_h5_reader_info(rb, name, &ib) != ODL_OK) {
                printf("%s: BAD: %s\n", name, odl_error_msg_user());
                differ = 1;
                continue;
            }
            int same_shape = ia.dtype == ib.dtype && ia.ndim == ib.ndim;
            for (int d = 0; same_shape && d < ia.ndim; d++) same_shape = ia.shape[d] == ib.shape[d];
            if (!same_shape) {
                printf("%s: %s %s vs %s %s\n", name, odl_dtype_name(ia.dtype), odl_dims_str(ia.ndim, ia.shape, sa, sizeof sa),
                       odl_dtype_name(ib.dtype), odl_dims_str(ib.ndim, ib.shape, sb, sizeof sb));
                differ = 1;
                continue;
            }
            size_t nbytes = (size_t)ia.numel * odl_dtype_size(ia.dtype);
            unsigned char *da = malloc(nbytes ? nbytes : 1), *db = malloc(nbytes ? nbytes : 1);
            if (!da || !db || odl_h5_reader_read(ra, name, ia.dtype, ia.ndim, ia.shape, da) != ODL_OK ||
                odl_h5_reader_read(rb, name, ib.dtype, ib.ndim, ib.shape, db) != ODL_OK) {
                printf("%s: BAD: %s\n", name, da && db ? odl_error_msg_user() : "out of memory");
                differ = 1;
            } else if (memcmp(da, db, nbytes) != 0) {
                int64_t ndiff = 0;
                double maxd = 0;
                size_t es = odl_dtype_size(ia.dtype);
                for (int64_t k = 0; k < ia.numel; k++) {
                    if (memcmp(da + k * es, db + k * es, es) == 0) continue;
                    ndiff++;
                    if (ia.dtype == ODL_F32) {
                        double d = fabs((double)((float *)da)[k] - (double)((float *)db)[k]);
                        if (d > maxd) maxd = d;
                    }
                }
                printf("%s: %" PRId64 " of %" PRId64 " elements differ (max |a-b| %.3g)\n", name, ndiff, ia.numel, maxd);
                differ = 1;
            }
            compared++;
            free(da);
            free(db);
        }
    }
    odl_h5_reader_close(ra);
    odl_h5_reader_close(rb);
    if (!differ) printf("identical: %" PRId64 " datasets under %s\n", compared, prefix);
    return differ || compared == 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "inspect")) {
        const char *file = NULL;
        int show_config = 1;
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--no-config")) show_config = 0;
            else if (!file) file = argv[i];
            else {
                usage(stderr);
                return 2;
            }
        }
        if (!file) {
            usage(stderr);
            return 2;
        }
        return inspect(file, show_config);
    }
    if (!strcmp(cmd, "verify")) {
        if (argc < 3) {
            usage(stderr);
            return 2;
        }
        int bad = 0;
        for (int i = 2; i < argc; i++) {
            struct stat sb;
            if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
                char latest[PATH_MAX + 64];
                bad |= verify_dir(argv[i], latest, sizeof latest, 1);
            } else {
                bad |= verify_file(argv[i], 0, NULL);
            }
        }
        return bad ? 1 : 0;
    }
    if (!strcmp(cmd, "latest")) {
        if (argc != 3) {
            usage(stderr);
            return 2;
        }
        char latest[PATH_MAX + 64];
        verify_dir(argv[2], latest, sizeof latest, 0);
        if (!latest[0]) {
            fprintf(stderr, "odl_ckpt: no good checkpoint in %s\n", argv[2]);
            return 1;
        }
        printf("%s\n", latest);
        return 0;
    }
    if (!strcmp(cmd, "diff")) {
        const char *files[2] = {NULL, NULL}, *prefix = "/model";
        int nf = 0;
        for (int i = 2; i < argc; i++) {
            int matched;
            const char *v = odl_cli_flag_value(argc, argv, &i, "--prefix", &matched);
            if (v) prefix = v;
            else if (!matched && nf < 2) files[nf++] = argv[i];
            else {
                usage(stderr);
                return 2;
            }
        }
        if (nf != 2) {
            usage(stderr);
            return 2;
        }
        return diff(files[0], files[1], prefix);
    }
    fprintf(stderr, "odl_ckpt: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
