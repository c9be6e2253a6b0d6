/*
 * disk.c: the disk quota's measurement, on the host, outside the jail.
 *
 * A walk of each writable root by descriptors (openat, fstatat: no path is resolved twice, no
 * symlink is followed, no other filesystem is entered), summing st_blocks * 512 (what a file
 * allocates: a sparse file costs what it holds) and counting entries; then, through the jail's
 * own /proc, the unlinked files that its processes hold open or mapped (O_TMPFILE, or written
 * and unlinked: they use the disk until the jail ends, and no walk sees them). It stops as soon
 * as a limit is passed, so a tree of millions of entries costs a walk of max_files entries.
 *
 * Directories are opened with O_NOATIME where the kernel allows it, so that the command cannot
 * watch access times to learn when a walk passes.
 */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"

#define SEEN_MAX 256 /* unlinked files told apart per walk; past that, each one counts again */

struct tally {
    uint64_t bytes, files, links;
    enum kf_jail_disk_over over;
    size_t n_seen;
    struct {
        dev_t dev;
        ino_t ino;
    } seen[SEEN_MAX];
};

static uint64_t allocated(const struct stat *st) {
    return st->st_blocks > 0 ? (uint64_t)st->st_blocks * 512 : 0;
}

/* Whether t passed a limit (then t->over says which). */
static bool passed(const struct kf_disk *d, struct tally *t) {
    if (t->over == KF_DISK_UNDER && d->max_bytes > 0 && t->bytes > d->max_bytes)
        t->over = KF_DISK_OVER_BYTES;
    if (t->over == KF_DISK_UNDER && d->max_files > 0 && t->files > d->max_files)
        t->over = KF_DISK_OVER_FILES;
    return t->over != KF_DISK_UNDER;
}

/* Opens directory name under dirfd for reading, without following a symlink and, where the
 * kernel allows it (the owner, or CAP_FOWNER), without touching its access time. Returns the
 * descriptor, or -1 with errno set. */
static int open_dir(int dirfd, const char *name) {
    int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = openat(dirfd, name, flags | O_NOATIME);
    if (fd < 0 && errno == EPERM)
        fd = openat(dirfd, name, flags);
    return fd;
}

static bool is_dot(const char *name) {
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* Walks root r depth first with a stack of open directories. */
static void walk_root(const struct kf_disk *d, const struct kf_disk_root *r, struct tally *t) {
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return;
    t->bytes += allocated(&st);
    if (!r->dir || passed(d, t))
        return;
    int fd = open_dir(r->fd, ".");
    if (fd < 0) {
        if (errno == EACCES)
            t->over = KF_DISK_UNMEASURABLE;
        return;
    }
    DIR *stack[KF_DISK_MAX_DEPTH];
    size_t depth = 0;
    if ((stack[0] = fdopendir(fd)) == NULL) {
        close(fd);
        return;
    }
    depth = 1;
    while (depth > 0 && t->over == KF_DISK_UNDER) {
        DIR *dir = stack[depth - 1];
        const struct dirent *e = readdir(dir);
        if (e == NULL) {
            closedir(stack[--depth]);
            continue;
        }
        if (is_dot(e->d_name))
            continue;
        /* a directory is opened at once and then looked at through its descriptor, so that
         * renaming it in the meantime cannot hide what it holds */
        int child = -1;
        if (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) {
            child = open_dir(dirfd(dir), e->d_name);
            if (child < 0 && errno == EACCES) {
                t->over = KF_DISK_UNMEASURABLE; /* the command hid it from us: fail closed */
                break;
            }
        }
        int rc = child >= 0 ? fstat(child, &st)
                            : fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW);
        if (rc != 0) {
            if (child >= 0)
                close(child);
            if (errno != EACCES)
                continue;                   /* gone since readdir */
            t->over = KF_DISK_UNMEASURABLE; /* a directory we may list but not search */
            break;
        }
        t->files++;
        if (st.st_dev == r->dev) /* else a mount point: its entry only */
            t->bytes += allocated(&st);
        if (passed(d, t) || child < 0 || st.st_dev != r->dev || !S_ISDIR(st.st_mode)) {
            if (child >= 0)
                close(child);
            continue;
        }
        if (depth == KF_DISK_MAX_DEPTH) {
            close(child);
            t->over = KF_DISK_UNMEASURABLE;
            break;
        }
        if ((stack[depth] = fdopendir(child)) == NULL) {
            close(child); /* out of memory: the walk goes on without it */
            continue;
        }
        depth++;
    }
    while (depth > 0)
        closedir(stack[--depth]);
}

static bool watched_dev(const struct kf_disk *d, dev_t dev) {
    for (size_t i = 0; i < d->n_roots; i++)
        if (d->roots[i].dev == dev)
            return true;
    return false;
}

/* Counts the file that link (a /proc fd or map_files entry under dirfd) points to, when it is
 * an unlinked regular file on a watched filesystem, once per walk. */
static void count_link(const struct kf_disk *d, struct tally *t, int dirfd, const char *link) {
    struct stat st;
    t->links++;
    if (fstatat(dirfd, link, &st, 0) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0 ||
        !watched_dev(d, st.st_dev))
        return;
    if (d->owner >= 0 && st.st_uid != (uid_t)d->owner)
        return; /* not the command's: a host file replaced while the command had it open */
    for (size_t i = 0; i < t->n_seen; i++)
        if (t->seen[i].dev == st.st_dev && t->seen[i].ino == st.st_ino)
            return;
    if (t->n_seen < SEEN_MAX) {
        t->seen[t->n_seen].dev = st.st_dev;
        t->seen[t->n_seen].ino = st.st_ino;
        t->n_seen++;
    }
    t->bytes += allocated(&st);
    (void)passed(d, t);
}

/* The open descriptors of one task: path is "N/task/T/fd" under procfd. */
static void scan_fds(const struct kf_disk *d, struct tally *t, int procfd, const char *path) {
    int fd = openat(procfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return; /* gone, or not ours to read (an unprivileged caller, a non-dumpable task) */
    DIR *dir = fdopendir(fd);
    if (dir == NULL) {
        close(fd);
        return;
    }
    const struct dirent *e;
    while (t->over == KF_DISK_UNDER && t->links < KF_DISK_MAX_FDS && (e = readdir(dir)) != NULL)
        if (!is_dot(e->d_name))
            count_link(d, t, dirfd(dir), e->d_name);
    closedir(dir);
}

/* The mappings of unlinked files of process pid (its maps, then its map_files entries, which
 * only a caller with CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE may follow). */
static void scan_maps(const struct kf_disk *d, struct tally *t, int procfd, const char *pid) {
    char path[64];
    snprintf(path, sizeof(path), "%s/maps", pid);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "r");
    if (f == NULL) {
        close(fd);
        return;
    }
    snprintf(path, sizeof(path), "%s/map_files", pid);
    int mfd = openat(procfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char line[4096 + 256];
    while (mfd >= 0 && t->over == KF_DISK_UNDER && t->links < KF_DISK_MAX_FDS &&
           fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        const char *tail = " (deleted)";
        if (n < strlen(tail) || strcmp(line + n - strlen(tail), tail) != 0)
            continue;
        unsigned long start, end, ino;
        unsigned maj, min;
        if (sscanf(line, "%lx-%lx %*s %*s %x:%x %lu", &start, &end, &maj, &min, &ino) != 5 ||
            ino == 0 || !watched_dev(d, makedev(maj, min)))
            continue;
        char name[48];
        snprintf(name, sizeof(name), "%lx-%lx", start, end);
        count_link(d, t, mfd, name);
    }
    if (mfd >= 0)
        close(mfd);
    fclose(f);
}

/* Every task of the jail's PID namespace, read through the jail's own /proc. */
static void scan_processes(const struct kf_disk *d, struct tally *t, pid_t jail_pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/root/proc", (int)jail_pid);
    DIR *procs = opendir(path);
    if (procs == NULL)
        return;
    const struct dirent *p;
    while (t->over == KF_DISK_UNDER && t->links < KF_DISK_MAX_FDS && (p = readdir(procs)) != NULL) {
        if (p->d_name[0] < '1' || p->d_name[0] > '9' || strlen(p->d_name) > 10)
            continue;
        char pid[16];
        kf_strlcpy(pid, p->d_name, sizeof(pid));
        /* each thread: one made without CLONE_FILES has a descriptor table of its own */
        snprintf(path, sizeof(path), "%s/task", pid);
        int tfd = openat(dirfd(procs), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *tasks = tfd >= 0 ? fdopendir(tfd) : NULL;
        if (tasks == NULL && tfd >= 0)
            close(tfd);
        const struct dirent *task;
        while (tasks != NULL && t->over == KF_DISK_UNDER && (task = readdir(tasks)) != NULL) {
            if (is_dot(task->d_name) || strlen(task->d_name) > 10)
                continue;
            snprintf(path, sizeof(path), "%s/task/%s/fd", pid, task->d_name);
            scan_fds(d, t, dirfd(procs), path);
        }
        if (tasks != NULL)
            closedir(tasks);
        if (t->over == KF_DISK_UNDER)
            scan_maps(d, t, dirfd(procs), pid);
    }
    closedir(procs);
}

/* Blocks (in bytes) and inodes in use on the roots' filesystems, each filesystem once. */
static void fs_used(const struct kf_disk *d, uint64_t *bytes, uint64_t *files) {
    *bytes = *files = 0;
    for (size_t i = 0; i < d->n_roots; i++) {
        bool again = false;
        for (size_t j = 0; j < i; j++)
            again = again || d->roots[j].dev == d->roots[i].dev;
        struct statfs sf;
        if (again || fstatfs(d->roots[i].fd, &sf) != 0)
            continue;
        *bytes += (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_frsize;
        *files += (uint64_t)(sf.f_files - sf.f_ffree);
    }
}

bool kf_disk_grew(const struct kf_disk *d) {
    uint64_t bytes, files;
    fs_used(d, &bytes, &files);
    uint64_t room_bytes = d->max_bytes > d->last_bytes ? d->max_bytes - d->last_bytes : 0;
    uint64_t room_files = d->max_files > d->last_files ? d->max_files - d->last_files : 0;
    return (d->max_bytes > 0 && bytes > d->fs_bytes && bytes - d->fs_bytes > room_bytes) ||
           (d->max_files > 0 && files > d->fs_files && files - d->fs_files > room_files);
}

enum kf_jail_disk_over kf_disk_measure(struct kf_disk *d, pid_t jail_pid) {
    uint64_t t0 = kf_now_ms();
    fs_used(d, &d->fs_bytes, &d->fs_files);
    struct tally *t = calloc(1, sizeof(*t));
    if (t == NULL) { /* out of memory: nothing measured this time */
        d->walk_ms = kf_now_ms() - t0;
        return d->over;
    }
    for (size_t i = 0; i < d->n_roots && t->over == KF_DISK_UNDER; i++)
        walk_root(d, &d->roots[i], t);
    if (jail_pid > 0 && t->over == KF_DISK_UNDER)
        scan_processes(d, t, jail_pid);
    if (t->bytes > d->peak_bytes)
        d->peak_bytes = t->bytes;
    if (t->files > d->peak_files)
        d->peak_files = t->files;
    d->last_bytes = t->bytes;
    d->last_files = t->files;
    d->over = t->over;
    free(t);
    d->walk_ms = kf_now_ms() - t0;
    return d->over;
}

void kf_disk_baseline(struct kf_disk *d) {
    uint64_t max_bytes = d->max_bytes, max_files = d->max_files;
    d->max_bytes = 0; /* the whole of what is there, up to four times the entries' limit */
    d->max_files = max_files > 0 && max_files < UINT64_MAX / 4 ? 4 * max_files : max_files;
    enum kf_jail_disk_over over = kf_disk_measure(d, -1);
    d->max_bytes = max_bytes;
    d->max_files = max_files;
    d->peak_bytes = d->peak_files = 0;
    d->over = KF_DISK_UNDER;
    if (over != KF_DISK_UNDER)
        return; /* too many entries to count, or unreadable: the quota stays as it was */
    if (max_bytes > 0 && d->last_bytes > max_bytes)
        d->max_bytes = d->last_bytes;
    if (max_files > 0 && d->last_files > max_files)
        d->max_files = d->last_files;
}

static bool is_under(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int kf_disk_open(struct kf_disk *d, const struct kf_plan *plan, uint64_t max_bytes,
                 uint64_t max_files, int64_t owner, char *err, size_t errlen) {
    memset(d, 0, sizeof(*d));
    d->max_bytes = max_bytes;
    d->max_files = max_files;
    d->owner = owner;
    const char **paths = calloc(plan->n_ops + 1, sizeof(*paths));
    d->roots = calloc(plan->n_ops + 1, sizeof(*d->roots));
    if (paths == NULL || d->roots == NULL) {
        free(paths);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < plan->n_ops; i++) {
        const struct kf_mnt_op *op = &plan->ops[i];
        if (op->kind != KF_MNT_BIND || !(op->flags & KF_MNT_F_USER) || (op->flags & KF_MNT_F_RO))
            continue;
        int fd = open(op->src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            snprintf(err, errlen, "disk quota: %s: %s", op->src, strerror(errno));
            if (fd >= 0)
                close(fd);
            free(paths);
            return -1;
        }
        paths[d->n_roots] = op->src;
        d->roots[d->n_roots++] = (struct kf_disk_root){fd, st.st_dev, S_ISDIR(st.st_mode)};
    }
    /* a root inside another on the same filesystem is counted by the other's walk */
    size_t kept = 0;
    for (size_t i = 0; i < d->n_roots; i++) {
        bool inside = false;
        for (size_t j = 0; j < d->n_roots && !inside; j++)
            inside = j != i && d->roots[j].dev == d->roots[i].dev && d->roots[j].dir &&
                     is_under(paths[i], paths[j]) && (strcmp(paths[i], paths[j]) != 0 || j < i);
        if (inside)
            close(d->roots[i].fd);
        else
            d->roots[kept++] = d->roots[i];
    }
    d->n_roots = kept;
    free(paths);
    return 0;
}

void kf_disk_close(struct kf_disk *d) {
    for (size_t i = 0; i < d->n_roots; i++)
        close(d->roots[i].fd);
    free(d->roots);
    d->roots = NULL;
    d->n_roots = 0;
}
