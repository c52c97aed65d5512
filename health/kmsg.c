/* Kernel-log reader: /dev/kmsg records (one per read(2), EAGAIN when none, EPIPE when the ring
 * overwrote unread records; Documentation/ABI/testing/dev-kmsg) or a plain file read as it grows. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "odl/clock.h"
#include "odl/health.h"

#define KMSG_BUF 8192

struct odl_kmsg_reader {
    int fd;
    int is_kmsg; /* a character device: one record per read */
    int follow;
    int eof;
    char buf[KMSG_BUF];
    size_t len; /* bytes held in buf (file mode) */
};

int64_t odl_kmsg_now_us(void) {
    return odl_mono_ns() / 1000;
}

odl_status odl_kmsg_open(const char *path, int follow, odl_kmsg_reader **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return ODL_ERR(ODL_E_IO, "cannot open kernel log %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ODL_ERR(ODL_E_IO, "fstat(%s): %s", path, strerror(e));
    }
    odl_kmsg_reader *r = calloc(1, sizeof *r);
    if (!r) {
        close(fd);
        return ODL_ERR(ODL_E_NOMEM, "kernel log reader");
    }
    r->fd = fd;
    r->is_kmsg = S_ISCHR(st.st_mode);
    r->follow = follow;
    *out = r;
    return ODL_OK;
}

static int emit(char *dst, size_t cap, const char *src, size_t n) {
    if (cap == 0) return 1;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 1;
}

int odl_kmsg_read_line(odl_kmsg_reader *r, char *out, size_t cap) {
    if (r->is_kmsg) {
        for (;;) {
            ssize_t n = read(r->fd, r->buf, sizeof r->buf - 1);
            if (n > 0) {
                size_t m = (size_t)n;
                if (r->buf[m - 1] == '\n') m--;
                return emit(out, cap, r->buf, m);
            }
            if (n == 0) return 0;
            if (errno == EINTR || errno == EPIPE) continue; /* EPIPE: records were lost; go on with the next */
            if (errno == EAGAIN) return 0;
            return ODL_ERR(ODL_E_IO, "read(/dev/kmsg): %s", strerror(errno));
        }
    }
    for (;;) {
        char *nl = memchr(r->buf, '\n', r->len);
        if (nl) {
            size_t m = (size_t)(nl - r->buf);
            emit(out, cap, r->buf, m);
            r->len -= m + 1;
            memmove(r->buf, nl + 1, r->len);
            return 1;
        }
        if (r->len == sizeof r->buf) { /* a line longer than the buffer: cut it */
            emit(out, cap, r->buf, r->len);
            r->len = 0;
            return 1;
        }
        ssize_t n = read(r->fd, r->buf + r->len, sizeof r->buf - r->len);
        if (n > 0) {
            r->len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) return ODL_ERR(ODL_E_IO, "reading the kernel log: %s", strerror(errno));
        /* End of what is there now. */
        if (!r->follow && r->len) {
            emit(out, cap, r->buf, r->len);
            r->len = 0;
            return 1;
        }
        return 0;
    }
}

void odl_kmsg_close(odl_kmsg_reader *r) {
    if (!r) return;
    close(r->fd);
    free(r);
}
