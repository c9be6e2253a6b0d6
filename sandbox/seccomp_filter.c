/*
 * seccomp_filter.c: compiles a profile's allow-list to BPF with libseccomp.
 *
 * Default action: EPERM (or, in record mode, a user notification that the supervisor
 * answers with "continue" after writing the syscall down). The syscall lists come from
 * the sandbox/syscalls/ lists through the generated header syscall_lists.h.
 */
#include "seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "syscall_lists.h" /* generated from the syscalls/ lists by the Makefile */

#define CREATES (O_CREAT | 020000000) /* O_CREAT or __O_TMPFILE: the flags that use a mode */
#define FCHMODAT2 452                 /* Linux 6.6; not known to every libseccomp by name */

#define NS_FLAGS                                                                                   \
    (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |  \
     CLONE_NEWNET)

/* Denied in every mode, record mode included (there the default lets calls through). */
static const char *const always_denied[] = {"mount",
                                            "umount2",
                                            "pivot_root",
                                            "chroot",
                                            "unshare",
                                            "setns",
                                            "bpf",
                                            "io_uring_setup",
                                            "io_uring_enter",
                                            "io_uring_register",
                                            "userfaultfd",
                                            "perf_event_open",
                                            "keyctl",
                                            "add_key",
                                            "request_key",
                                            "ptrace",
                                            "process_vm_readv",
                                            "process_vm_writev",
                                            "process_madvise",
                                            "pidfd_getfd",
                                            "kcmp",
                                            "kexec_load",
                                            "kexec_file_load",
                                            "init_module",
                                            "finit_module",
                                            "delete_module",
                                            "reboot",
                                            "swapon",
                                            "swapoff",
                                            "acct",
                                            "open_by_handle_at",
                                            "name_to_handle_at",
                                            "fsopen",
                                            "fsconfig",
                                            "fsmount",
                                            "fspick",
                                            "open_tree",
                                            "move_mount",
                                            "mount_setattr",
                                            "fanotify_init",
                                            "quotactl",
                                            "iopl",
                                            "ioperm",
                                            "syslog",
                                            "settimeofday",
                                            "clock_settime",
                                            "clock_adjtime",
                                            "adjtimex",
                                            "sethostname",
                                            "setdomainname",
                                            "lookup_dcookie",
                                            "vhangup",
                                            "modify_ldt",
                                            "uselib",
                                            "ustat",
                                            "_sysctl",
                                            "statmount 457",
                                            "listmount 458",
                                            NULL};

/* The syscall number of a list entry "name" or "name NR". */
static int resolve(const char *entry) {
    char name[64];
    const char *sp = strchr(entry, ' ');
    size_t len = sp ? (size_t)(sp - entry) : strlen(entry);
    if (len >= sizeof(name))
        return __NR_SCMP_ERROR;
    memcpy(name, entry, len);
    name[len] = '\0';
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR && sp != NULL)
        nr = atoi(sp + 1);
    return nr;
}

/* inotify lets a command see the disk quota's walk pass its directories (IN_OPEN, IN_ACCESS)
 * and move what it wrote behind the walk: under a quota these answer ENOSYS (programs such as
 * tail then poll instead). */
static const char *const quota_denied[] = {"inotify_init", "inotify_init1", NULL};

static bool listed(const char *const *list, int nr) {
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        if (resolve(list[i]) == nr)
            return true;
    return false;
}

static int allow_list(scmp_filter_ctx ctx, const char *const *list, const char *const *skip,
                      char *err, size_t errlen) {
    for (size_t i = 0; list[i] != NULL; i++) {
        int nr = resolve(list[i]);
        if (nr == __NR_SCMP_ERROR || listed(skip, nr))
            continue; /* unknown to this libseccomp and given no number, or denied here */
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        if (rc != 0 && rc != -EEXIST) {
            snprintf(err, errlen, "seccomp rule %s: %s", list[i], strerror(-rc));
            return -1;
        }
    }
    return 0;
}

static int arg_rules(scmp_filter_ctx ctx) {
    int rc = 0;
    /* threads and processes, but no new namespaces */
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
    /* glibc falls back to clone() when clone3() says ENOSYS; clone3's flags are in memory
     * that seccomp cannot read */
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* local sockets only: the network namespace has nothing but loopback, and families such
     * as AF_VSOCK or AF_PACKET, which a namespace does not fence, are refused */
    const int families[] = {AF_UNIX, AF_INET, AF_INET6};
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                               SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
                           SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE));
    /* file modes without set-user-ID and set-group-ID: the workspace outlives the jail, and a
     * set-user-ID file made by a jail run as host root would be root's on the host.
     * (open() passes mode 0 unless it creates; openat2 takes its mode in memory that seccomp
     * cannot read, so it answers ENOSYS, and glibc and Python do not need it.) */
    const struct {
        int nr;
        unsigned arg;
    } modes[] = {{SCMP_SYS(open), 2},   {SCMP_SYS(openat), 3},   {SCMP_SYS(creat), 1},
                 {SCMP_SYS(mknod), 1},  {SCMP_SYS(mknodat), 2},  {SCMP_SYS(chmod), 1},
                 {SCMP_SYS(fchmod), 1}, {SCMP_SYS(fchmodat), 2}, {FCHMODAT2, 2}};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        struct scmp_arg_cmp cmp = {modes[i].arg, SCMP_CMP_MASKED_EQ, S_ISUID | S_ISGID, 0};
        rc |= seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, modes[i].nr, 1, &cmp);
    }
    /* open and openat read their mode only when they create: some callers (old static
     * libcs) leave garbage there otherwise */
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1,
                           SCMP_A1(SCMP_CMP_MASKED_EQ, CREATES, 0));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                           SCMP_A2(SCMP_CMP_MASKED_EQ, CREATES, 0));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
    /* personality: the Linux persona, with or without ASLR (as Docker's default profile) */
    const scmp_datum_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
    for (size_t i = 0; i < sizeof(personas) / sizeof(personas[0]); i++)
        rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                               SCMP_A0(SCMP_CMP_EQ, personas[i]));
    return rc;
}

static int deny_list(scmp_filter_ctx ctx) {
    for (size_t i = 0; always_denied[i] != NULL; i++) {
        int nr = resolve(always_denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue;
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (rc != 0 && rc != -EEXIST)
            return rc;
    }
    return 0;
}

/* Exports ctx's BPF into prog (malloc'd). */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *prog) {
    int fd = memfd_create("kforge-jail-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = seccomp_export_bpf(ctx, fd);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) != 0)
        rc = -errno;
    if (rc == 0 && (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
                    st.st_size / sizeof(struct sock_filter) > 0xffff))
        rc = -EINVAL;
    struct sock_filter *insns = NULL;
    if (rc == 0 && (insns = malloc((size_t)st.st_size)) == NULL)
        rc = -ENOMEM;
    if (rc == 0 && pread(fd, insns, (size_t)st.st_size, 0) != st.st_size)
        rc = -EIO;
    close(fd);
    if (rc != 0) {
        free(insns);
        return rc;
    }
    prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
    prog->filter = insns;
    return 0;
}

int kf_seccomp_build(enum kf_jail_profile profile, bool record, bool disk_quota,
                     struct sock_fprog *prog, char *err, size_t errlen) {
    prog->len = 0;
    prog->filter = NULL;
    scmp_filter_ctx ctx = seccomp_init(record ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM));
    if (ctx == NULL) {
        snprintf(err, errlen, "seccomp_init failed");
        return -1;
    }
    const char *const *extra = profile == KF_JAIL_RUN     ? kf_syscalls_run
                               : profile == KF_JAIL_BUILD ? kf_syscalls_build
                                                          : kf_syscalls_shell;
    int rc = -1;
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) != 0) {
        snprintf(err, errlen, "seccomp attributes");
        goto out;
    }
    const char *const *skip = disk_quota ? quota_denied : NULL;
    if (allow_list(ctx, kf_syscalls_common, skip, err, errlen) != 0 ||
        allow_list(ctx, extra, skip, err, errlen) != 0)
        goto out;
    for (size_t i = 0; skip != NULL && skip[i] != NULL; i++) {
        int nr = resolve(skip[i]);
        if (nr != __NR_SCMP_ERROR && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0) != 0) {
            snprintf(err, errlen, "seccomp rule %s", skip[i]);
            goto out;
        }
    }
    if (arg_rules(ctx) != 0) {
        snprintf(err, errlen, "seccomp argument rules");
        goto out;
    }
    if (record && deny_list(ctx) != 0) {
        snprintf(err, errlen, "seccomp deny rules");
        goto out;
    }
    int e = export_bpf(ctx, prog);
    if (e != 0) {
        snprintf(err, errlen, "seccomp export: %s", strerror(-e));
        goto out;
    }
    rc = 0;
out:
    seccomp_release(ctx);
    return rc;
}

void kf_seccomp_free(struct sock_fprog *prog) {
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}

bool kf_seccomp_arg_checked(int nr) {
    return nr == SCMP_SYS(clone) || nr == SCMP_SYS(socket) || nr == SCMP_SYS(personality);
}
