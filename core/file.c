/* Durable file replacement (odl/file.h): temporary file, fsync, rename or link, fsync of the directory. */
#include "odl/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static odl_status fsync_fd_path(const char *path, int directory) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
    if (fd < 0) return ODL_ERR(ODL_E_IO, "open(%s) for fsync failed: %s", path, strerror(errno));
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return ODL_ERR(ODL_E_IO, "fsync(%s) failed: %s", path, strerror(e));
    }
    if (close(fd) != 0) return ODL_ERR(ODL_E_IO, "close(%s) after fsync failed: %s", path, strerror(errno));
    return ODL_OK;
}

odl_status odl_file_fsync_dir_of(const char *path) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return ODL_ERR(ODL_E_INVAL, "path too long: %s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    return fsync_fd_path(dir, 1);
}

static int tmp_name(char *buf, size_t cap, const char *path, int flags) {
    int n = flags & ODL_FILE_NO_REPLACE ? snprintf(buf, cap, "%s.%ld.tmp", path, (long)getpid())
                                        : snprintf(buf, cap, "%s.tmp", path);
    return n >= 0 && (size_t)n < cap;
}

/* rename or link tmp onto path; tmp is gone afterwards either way. */
static odl_status put_in_place(const char *tmp, const char *path, int flags, int *created) {
    if (created) *created = 0;
    if (flags & ODL_FILE_NO_REPLACE) {
        int r = link(tmp, path), e = errno;
        unlink(tmp);
        if (r != 0 && e != EEXIST) return ODL_ERR(ODL_E_IO, "link(%s, %s) failed: %s", tmp, path, strerror(e));
        if (created) *created = r == 0;
    } else {
        if (rename(tmp, path) != 0) {
            int e = errno;
            unlink(tmp);
            return ODL_ERR(ODL_E_IO, "rename(%s, %s) failed: %s", tmp, path, strerror(e));
        }
        if (created) *created = 1;
    }
    odl_status s = odl_file_fsync_dir_of(path);
    if (s != ODL_OK)
        odl_error_prefix("%s is in place but its directory was not synced; the rename may not survive a power loss", path);
    return s;
}

odl_status odl_file_begin(odl_file_tmp *t, const char *path, int flags) {
    memset(t, 0, sizeof *t);
    t->flags = flags;
    if (snprintf(t->path, sizeof t->path, "%s", path) >= (int)sizeof t->path || !tmp_name(t->tmp, sizeof t->tmp, path, flags))
        return ODL_ERR(ODL_E_INVAL, "path too long: %s", path);
    int fd = open(t->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, flags & ODL_FILE_PRIVATE ? 0600 : 0644);
    if (fd < 0) return ODL_ERR(ODL_E_IO, "cannot create %s: %s", t->tmp, strerror(errno));
    t->f = fdopen(fd, "w");
    if (!t->f) {
        int e = errno;
        close(fd);
        unlink(t->tmp);
        return ODL_ERR(ODL_E_IO, "fdopen(%s) failed: %s", t->tmp, strerror(e));
    }
    return ODL_OK;
}

odl_status odl_file_commit(odl_file_tmp *t, int *created) {
    if (created) *created = 0;
    if (!t->f) return ODL_ERR(ODL_E_INVAL, "%s: not open for writing", t->path);
    FILE *f = t->f;
    t->f = NULL;
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (!bad && fsync(fileno(f)) != 0) bad = 1, e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        unlink(t->tmp);
        return ODL_ERR(ODL_E_IO, "writing %s failed: %s", t->tmp, strerror(e));
    }
    return put_in_place(t->tmp, t->path, t->flags, created);
}

void odl_file_abort(odl_file_tmp *t) {
    if (!t || !t->f) return;
    fclose(t->f);
    t->f = NULL;
    unlink(t->tmp);
}

odl_status odl_file_write_atomic(const char *path, const void *data, size_t n, int flags, int *created) {
    odl_file_tmp t;
    ODL_CHECK(odl_file_begin(&t, path, flags));
    if (n && fwrite(data, 1, n, t.f) != n) {
        int e = errno;
        odl_file_abort(&t);
        return ODL_ERR(ODL_E_IO, "writing %s failed: %s", t.tmp, strerror(e));
    }
    return odl_file_commit(&t, created);
}

odl_status odl_file_publish(const char *tmp, const char *path, int flags, int *created) {
    if (created) *created = 0;
    odl_status s = fsync_fd_path(tmp, 0);
    if (s != ODL_OK) {
        unlink(tmp);
        return s;
    }
    return put_in_place(tmp, path, flags, created);
}
