/* LD_PRELOAD shim for test_durable_writes (tests/durable_writes.sh): logs every rename, link and fsync
 * a process makes, so that tests/fsync_check.py can tell a writer that replaced a file without syncing
 * it, or without syncing its directory afterwards (odl/file.h's steps 2 and 4), from one that did.
 *
 * One line per call, appended with a single write(2) to $ODL_FSYNC_LOG (O_APPEND: lines of concurrent
 * processes do not interleave):
 *   <pid> rename <abs old> <abs new>     (also renameat with AT_FDCWD; link and linkat likewise)
 *   <pid> fsync-file <abs path>          (fsync or fdatasync of a regular file)
 *   <pid> fsync-dir <abs path>           (of a directory)
 * Paths come from /proc/self/fd and realpath, so relative names and fds opened by libraries (HDF5,
 * stdio) are logged as the same absolute path. Without ODL_FSYNC_LOG it only forwards the calls. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void emit(const char *what, const char *a, const char *b) {
    const char *log = getenv("ODL_FSYNC_LOG");
    if (!log || !log[0]) return;
    char line[5 * PATH_MAX];
    int n = snprintf(line, sizeof line, "%ld %s %s%s%s\n", (long)getpid(), what, a, b ? " " : "", b ? b : "");
    if (n <= 0 || (size_t)n >= sizeof line) return;
    int saved = errno;
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
    errno = saved;
}

/* The absolute form of path, whose last component may not exist yet (the target of a rename). */
static void abs_path(const char *path, char *out, size_t cap) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = path;
    char real[PATH_MAX];
    if (slash) {
        base = path + (slash - dir) + 1;
        if (slash == dir) snprintf(dir, sizeof dir, "/");
        else *slash = 0;
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    if (!realpath(dir, real)) snprintf(real, sizeof real, "%s", dir);
    if ((size_t)snprintf(out, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) >= cap) out[0] = 0;
}

static void log_pair(const char *what, const char *from, const char *to) {
    char a[2 * PATH_MAX], b[2 * PATH_MAX];
    abs_path(from, a, sizeof a);
    abs_path(to, b, sizeof b);
    emit(what, a, b);
}

static void log_sync(int fd) {
    char proc[64], path[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, path, sizeof path - 1);
    struct stat sb;
    if (n <= 0 || fstat(fd, &sb) != 0) return;
    path[n] = 0;
    emit(S_ISDIR(sb.st_mode) ? "fsync-dir" : "fsync-file", path, NULL);
}

/* The next definition of name (libc's), looked up once. */
#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

int rename(const char *from, const char *to) {
    REAL(rename);
    int r = real_rename(from, to);
    if (r == 0) log_pair("rename", from, to);
    return r;
}

int renameat(int fd1, const char *from, int fd2, const char *to) {
    REAL(renameat);
    int r = real_renameat(fd1, from, fd2, to);
    if (r == 0 && fd1 == AT_FDCWD && fd2 == AT_FDCWD) log_pair("rename", from, to);
    return r;
}

int link(const char *from, const char *to) {
    REAL(link);
    int r = real_link(from, to);
    if (r == 0) log_pair("link", from, to);
    return r;
}

int linkat(int fd1, const char *from, int fd2, const char *to, int flags) {
    REAL(linkat);
    int r = real_linkat(fd1, from, fd2, to, flags);
    if (r == 0 && fd1 == AT_FDCWD && fd2 == AT_FDCWD) log_pair("link", from, to);
    return r;
}

int fsync(int fd) {
    REAL(fsync);
    int r = real_fsync(fd);
    if (r == 0) log_sync(fd);
    return r;
}

int fdatasync(int fd) {
    REAL(fdatasync);
    int r = real_fdatasync(fd);
    if (r == 0) log_sync(fd);
    return r;
}
