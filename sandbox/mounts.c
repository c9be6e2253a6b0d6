/*
 * mounts.c: assembles the new root on a tmpfs and pivots into it (child side, no malloc).
 *
 * Bind sources are opened (O_PATH) before the staging tmpfs is mounted, so a source under the
 * staging directory (a workspace in /tmp, say) stays reachable, and bound through
 * /proc/self/fd/N. Read-only and nosuid/nodev are set with mount_setattr(AT_RECURSIVE), so
 * that submounts (a driver folder under /usr, say) are read-only too.
 */
#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

#define MAX_OPS 512

static int fail(char *what, size_t n, const char *a, const char *b) {
    int saved = errno;
    kf_strlcpy(what, a, n);
    if (b != NULL) {
        kf_strlcat(what, " ", n);
        kf_strlcat(what, b, n);
    }
    errno = saved;
    return -1;
}

/* mkdir -p path (mode 0755); the last component too when last is true. */
static int mkdirs(const char *path, bool last) {
    char buf[PATH_MAX];
    if (kf_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (last && mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Creates the mount point for a bind: a directory, or an empty file when file is true. */
static int make_mountpoint(const char *path, bool file) {
    struct stat st;
    if (lstat(path, &st) == 0)
        return 0;
    if (mkdirs(path, !file) != 0)
        return -1;
    if (file) {
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0)
            return -1;
        close(fd);
    }
    return 0;
}

/* Sets mount attributes on path (and its submounts when recursive); falls back to a
 * remount of the top mount where mount_setattr() is missing. */
static int set_attrs(const char *path, bool ro, bool nodev, bool noexec, bool recursive) {
    struct mount_attr attr = {0};
    attr.attr_set = MOUNT_ATTR_NOSUID | (ro ? MOUNT_ATTR_RDONLY : 0) |
                    (nodev ? MOUNT_ATTR_NODEV : 0) | (noexec ? MOUNT_ATTR_NOEXEC : 0);
    if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
                sizeof(attr)) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
    struct statvfs sv;
    if (statvfs(path, &sv) != 0)
        return -1;
    /* keep the flags the mount has: locked ones cannot be cleared in a user namespace */
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID;
    flags |= (sv.f_flag & ST_RDONLY) || ro ? MS_RDONLY : 0;
    flags |= (sv.f_flag & ST_NODEV) || nodev ? MS_NODEV : 0;
    flags |= (sv.f_flag & ST_NOEXEC) || noexec ? MS_NOEXEC : 0;
    flags |= sv.f_flag & (ST_NOATIME | ST_NODIRATIME | ST_RELATIME);
    return mount(NULL, path, NULL, flags, NULL);
}

static void fd_path(char *buf, size_t n, int fd) {
    kf_strlcpy(buf, "/proc/self/fd/", n);
    kf_strlcat_u64(buf, (uint64_t)fd, n);
}

static int bind_fd(int fd, const char *stage, bool recursive) {
    char src[64];
    fd_path(src, sizeof(src), fd);
    return mount(src, stage, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL);
}

static int do_bind(const struct kf_mnt_op *op, int fd, char *what, size_t n) {
    bool file = (op->flags & KF_MNT_F_FILE) != 0;
    if (make_mountpoint(op->stage, file) != 0)
        return fail(what, n, "mountpoint", op->dst);
    if (bind_fd(fd, op->stage, true) != 0)
        return fail(what, n, "bind", op->dst);
    bool dev = (op->flags & KF_MNT_F_DEV) != 0;
    if (set_attrs(op->stage, (op->flags & KF_MNT_F_RO) != 0, !dev,
                  dev || (op->flags & KF_MNT_F_NOEXEC) != 0, true) != 0)
        return fail(what, n, "mount attributes of", op->dst);
    return 0;
}

static int do_proc(const struct kf_plan *plan, const struct kf_mnt_op *op, bool *pid_max_ok,
                   char *what, size_t n) {
    if (mkdirs(op->stage, true) != 0)
        return fail(what, n, "mkdir", op->dst);
    if (mount("proc", op->stage, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        return fail(what, n, "mount proc on", op->dst);
    if (plan->pid_max > 0) {
        char path[PATH_MAX], val[24] = "";
        kf_strlcpy(path, op->stage, sizeof(path));
        kf_strlcat(path, "/sys/kernel/pid_max", sizeof(path));
        kf_strlcat_u64(val, (uint64_t)plan->pid_max, sizeof(val));
        *pid_max_ok = kf_write_file(path, val) == 0;
    }
    if (op->flags & KF_MNT_F_RO) {
        /* read-only: no sysctl, sysrq or /proc/PID/mem writes, whoever the jail runs as */
        if (set_attrs(op->stage, true, true, true, false) != 0)
            return fail(what, n, "read-only", op->dst);
        return 0;
    }
    /* writable for the processes' own files (thread names); what reaches the whole system
     * (sysctl, interrupts, buses, file systems, sysrq) is bound read-only over itself */
    const char *system_wide[] = {"/sys", "/irq", "/bus", "/fs", "/sysrq-trigger"};
    for (size_t i = 0; i < sizeof(system_wide) / sizeof(system_wide[0]); i++) {
        char path[PATH_MAX];
        kf_strlcpy(path, op->stage, sizeof(path));
        kf_strlcat(path, system_wide[i], sizeof(path));
        if (access(path, F_OK) != 0)
            continue;
        if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0 ||
            set_attrs(path, true, true, true, true) != 0)
            return fail(what, n, "read-only part of", op->dst);
    }
    return 0;
}

static int do_sysfs(const struct kf_mnt_op *op, int host_sys_fd, char *what, size_t n) {
    if (mkdirs(op->stage, true) != 0)
        return fail(what, n, "mkdir", op->dst);
    unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    if (mount("sysfs", op->stage, "sysfs", flags, NULL) == 0)
        return 0;
    /* a fresh sysfs is refused where the host's is partly hidden: bind it read-only */
    if (host_sys_fd < 0 || bind_fd(host_sys_fd, op->stage, true) != 0)
        return fail(what, n, "mount sysfs on", op->dst);
    if (set_attrs(op->stage, true, true, true, true) != 0)
        return fail(what, n, "read-only", op->dst);
    return 0;
}

static int do_file(const struct kf_plan *plan, const struct kf_mnt_op *op, size_t idx, char *what,
                   size_t n) {
    char tmp[PATH_MAX] = "";
    kf_strlcpy(tmp, plan->staging, sizeof(tmp));
    kf_strlcat(tmp, "/.kforge-file-", sizeof(tmp));
    kf_strlcat_u64(tmp, idx, sizeof(tmp));
    int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(what, n, "create", op->dst);
    size_t len = 0;
    while (op->data[len] != '\0')
        len++;
    if (kf_write_all(fd, op->data, len) != 0) {
        close(fd);
        return fail(what, n, "write", op->dst);
    }
    close(fd);
    if (make_mountpoint(op->stage, true) != 0)
        return fail(what, n, "mountpoint", op->dst);
    if (mount(tmp, op->stage, NULL, MS_BIND, NULL) != 0)
        return fail(what, n, "bind", op->dst);
    /* the bind keeps the file alive; its name in the new root goes */
    unlink(tmp);
    if (set_attrs(op->stage, (op->flags & KF_MNT_F_RO) != 0, true, true, false) != 0)
        return fail(what, n, "mount attributes of", op->dst);
    return 0;
}

static int do_mask(const struct kf_mnt_op *op, int null_fd, char *what, size_t n) {
    struct stat st;
    if (lstat(op->stage, &st) != 0)
        return 0; /* nothing to hide */
    if (S_ISDIR(st.st_mode)) {
        if (mount("tmpfs", op->stage, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=555,size=4k,nr_inodes=1") != 0)
            return fail(what, n, "mask", op->dst);
        return 0;
    }
    if (bind_fd(null_fd, op->stage, false) != 0)
        return fail(what, n, "mask", op->dst);
    return 0;
}

static int do_op(const struct kf_plan *plan, size_t i, const int *fds, int null_fd,
                 bool *pid_max_ok, char *what, size_t n) {
    const struct kf_mnt_op *op = &plan->ops[i];
    bool optional = (op->flags & KF_MNT_F_OPTIONAL) != 0;
    switch (op->kind) {
    case KF_MNT_BIND:
        if (fds[i] < 0)
            return 0; /* optional and missing */
        return do_bind(op, fds[i], what, n);
    case KF_MNT_SYMLINK:
        if (mkdirs(op->stage, false) != 0 && !optional)
            return fail(what, n, "mkdir for", op->dst);
        if (symlink(op->data, op->stage) != 0 && errno != EEXIST && !optional)
            return fail(what, n, "symlink", op->dst);
        return 0;
    case KF_MNT_TMPFS:
        if (mkdirs(op->stage, true) != 0 ||
            mount("tmpfs", op->stage, "tmpfs", MS_NOSUID | MS_NODEV, op->data) != 0)
            return optional ? 0 : fail(what, n, "mount tmpfs on", op->dst);
        if ((op->flags & KF_MNT_F_RO) && set_attrs(op->stage, true, true, true, false) != 0)
            return fail(what, n, "read-only", op->dst);
        return 0;
    case KF_MNT_PROC:
        return do_proc(plan, op, pid_max_ok, what, n);
    case KF_MNT_SYSFS:
        return do_sysfs(op, fds[i], what, n);
    case KF_MNT_FILE:
        return do_file(plan, op, i, what, n);
    case KF_MNT_MASK:
        return do_mask(op, null_fd, what, n);
    }
    return 0;
}

static void close_fds(int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Opens path (O_PATH) only if no component of it is a symlink: the parent resolved it with
 * realpath(), so a symlink now means that someone swapped a component since. */
static int open_no_symlinks(const char *path) {
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    if (fd < 0 && errno == ENOSYS)
        fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
    return fd;
}

/* Opens the host paths that ops bind, before the staging tmpfs hides any of them. */
static int open_sources(const struct kf_plan *plan, int *fds, char *what, size_t n) {
    for (size_t i = 0; i < plan->n_ops; i++) {
        const struct kf_mnt_op *op = &plan->ops[i];
        fds[i] = -1;
        const char *src = op->kind == KF_MNT_BIND    ? op->src
                          : op->kind == KF_MNT_SYSFS ? "/sys"
                                                     : NULL;
        if (src == NULL)
            continue;
        fds[i] =
            (op->flags & KF_MNT_F_USER) ? open_no_symlinks(src) : open(src, O_PATH | O_CLOEXEC);
        if (fds[i] < 0 && op->kind == KF_MNT_BIND && !(op->flags & KF_MNT_F_OPTIONAL)) {
            close_fds(fds, i);
            return fail(what, n, "open", src);
        }
    }
    return 0;
}

int kf_mounts_apply(const struct kf_plan *plan, char *what, size_t n, bool *pid_max_ok) {
    int fds[MAX_OPS];
    *pid_max_ok = false;
    if (plan->n_ops > MAX_OPS) {
        errno = E2BIG;
        return fail(what, n, "too many mounts", NULL);
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return fail(what, n, "make / private", NULL);
    int null_fd = open("/dev/null", O_PATH | O_CLOEXEC);
    if (null_fd < 0)
        return fail(what, n, "open /dev/null", NULL);
    if (open_sources(plan, fds, what, n) != 0) {
        close(null_fd);
        return -1;
    }
    /* everything created from here on (the new root's directories and files) belongs to the
     * inside user: with --host-uid, this process's own uid is not mapped in the namespace,
     * and a filesystem refuses to create files for an unmapped owner (EOVERFLOW) */
    (void)syscall(SYS_setfsgid, KF_JAIL_INSIDE_GID);
    (void)syscall(SYS_setfsuid, KF_JAIL_INSIDE_UID);
    int rc = -1;
    if (mount("tmpfs", plan->staging, "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=755,size=1m,nr_inodes=4096") != 0) {
        fail(what, n, "mount the new root on", plan->staging);
        goto out;
    }
    for (size_t i = 0; i < plan->n_ops; i++)
        if (do_op(plan, i, fds, null_fd, pid_max_ok, what, n) != 0)
            goto out;
    if (chdir(plan->staging) != 0 || syscall(SYS_pivot_root, ".", ".") != 0) {
        fail(what, n, "pivot_root", NULL);
        goto out;
    }
    /* the old root is stacked on "/" now: detach it */
    if (umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
        fail(what, n, "detach the old root", NULL);
        goto out;
    }
    if (set_attrs("/", true, true, false, false) != 0) {
        fail(what, n, "read-only /", NULL);
        goto out;
    }
    if (chdir(plan->workdir) != 0) {
        fail(what, n, "chdir", plan->workdir);
        goto out;
    }
    rc = 0;
out : {
    int saved = errno;
    close_fds(fds, plan->n_ops);
    close(null_fd);
    errno = saved;
}
    return rc;
}
