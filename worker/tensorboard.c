/* TensorBoard event files; see worker/tensorboard.h. */
#include "worker/tensorboard.h"

#include "worker/outputs.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef ODL_HAVE_PROTOBUFC
#include "proto/event.pb-c.h"
#endif

uint32_t odl_crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    if (!ready) { /* benign race: every thread computes the same table */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t odl_tfrecord_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

struct odl_tb_writer {
    FILE *f;
    char path[PATH_MAX];
};

const char *odl_tb_path(const odl_tb_writer *w) { return w ? w->path : ""; }

static void put_le32(unsigned char *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* One TFRecord: uint64 length, masked crc32c(length), data, masked crc32c(data); little-endian. */
static odl_status write_record(odl_tb_writer *w, const void *data, size_t n) {
    unsigned char head[12], tail[4];
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)n >> (8 * i));
    put_le32(head + 8, odl_tfrecord_mask(odl_crc32c(head, 8)));
    put_le32(tail, odl_tfrecord_mask(odl_crc32c(data, n)));
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(data, 1, n, w->f) != n ||
        fwrite(tail, 1, sizeof tail, w->f) != sizeof tail || fflush(w->f) != 0)
        return ODL_ERR(ODL_E_IO, "%s: write failed: %s", w->path, strerror(errno));
    return ODL_OK;
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifdef ODL_HAVE_PROTOBUFC
static odl_status write_event(odl_tb_writer *w, const Tensorboard__Event *ev) {
    size_t n = tensorboard__event__get_packed_size(ev);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return ODL_ERR(ODL_E_NOMEM, "%s: event of %zu bytes", w->path, n);
    tensorboard__event__pack(ev, buf);
    odl_status s = write_record(w, buf, n);
    free(buf);
    return s;
}

odl_status odl_tb_open(const char *dir, odl_tb_writer **out) {
    *out = NULL;
    ODL_CHECK(odl_output_mkdir_p("--tensorboard", dir));
    odl_tb_writer *w = calloc(1, sizeof *w);
    if (!w) return ODL_ERR(ODL_E_NOMEM, "--tensorboard %s", dir);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    static int seq = 0; /* two writers of one process in one second get two files */
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010ld.%s.%ld.%d", dir, (long)time(NULL), host,
             (long)getpid(), seq++);
    w->f = fopen(w->path, "wb");
    if (!w->f) {
        odl_status s = ODL_ERR(ODL_E_IO, "--tensorboard: cannot create %s: %s", w->path, strerror(errno));
        free(w);
        return s;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_now();
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    odl_status s = write_event(w, &ev);
    if (s != ODL_OK) {
        odl_tb_close(w);
        return s;
    }
    *out = w;
    return ODL_OK;
}

odl_status odl_tb_scalar(odl_tb_writer *w, const char *tag, int64_t step, double value) {
    if (!w || !isfinite(value)) return ODL_OK;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    Tensorboard__Summary__Value *vals[1] = {&v};
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_now();
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return write_event(w, &ev);
}
#else
odl_status odl_tb_open(const char *dir, odl_tb_writer **out) {
    *out = NULL;
    return ODL_ERR(ODL_E_UNSUPPORTED, "--tensorboard %s: this build has no protobuf-c (apt-get install libprotobuf-c-dev "
                                      "protobuf-c-compiler, then configure again)", dir);
}
odl_status odl_tb_scalar(odl_tb_writer *w, const char *tag, int64_t step, double value) {
    (void)w, (void)tag, (void)step, (void)value;
    return ODL_OK;
}
#endif

void odl_tb_close(odl_tb_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    free(w);
}
