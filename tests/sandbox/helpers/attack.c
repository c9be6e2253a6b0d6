/*
 * attack.c: escape attempts for tests/sandbox, run inside kforge-jail.
 *
 *   attack NAME [ARGS...]   (NAME: ids, connect, abstract, socket, read, write, kill, ptrace,
 *                            memory, mount, unshare, setns, suid, syscall, bpf, io_uring,
 *                            userfaultfd, perf, keyctl; see main())
 *
 * Each attempt prints one line per try, "<try>: ok" or "<try>: <ERRNO NAME>", then a last
 * line "BLOCKED" when every try failed, or "ESCAPED" when one succeeded, and exits 0 or 1
 * accordingly. The tests check the outside as well (the file was not written, the process
 * got no signal, the listener saw no connection).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct tally {
    int tries;
    int escaped;
};

/* Records one try: rc < 0 means it failed with errno. */
static void try(struct tally *t, const char *what, long rc) {
    t->tries++;
    if (rc >= 0) {
        t->escaped++;
        printf("%s: ok\n", what);
    } else {
        printf("%s: %s\n", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
    }
    fflush(stdout);
}

static int finish(struct tally *t) {
    puts(t->escaped ? "ESCAPED" : "BLOCKED");
    return t->escaped ? 1 : 0;
}

static long do_connect(const char *host, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    long rc = connect(s, (struct sockaddr *)&a, sizeof(a));
    int e = errno;
    close(s);
    errno = e;
    return rc;
}

static long do_abstract(const char *name) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    if (n + 1 > sizeof(a.sun_path))
        n = sizeof(a.sun_path) - 1;
    memcpy(a.sun_path + 1, name, n);
    long rc = connect(s, (struct sockaddr *)&a,
                      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
    int e = errno;
    close(s);
    errno = e;
    return rc;
}

static long do_read(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return -1;
    if (n == 0) { /* an empty file tells nothing: a mask */
        errno = ENODATA;
        return -1;
    }
    buf[n] = '\0';
    printf("content: %s\n", buf);
    return 0;
}

static long do_write(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    long rc = write(fd, "escaped\n", 8);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static long do_vmread(pid_t pid, uintptr_t addr) {
    char buf[16];
    struct iovec local = {buf, sizeof(buf)}, remote = {(void *)addr, sizeof(buf)};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static long do_procmem(pid_t pid, uintptr_t addr) {
    char path[64], buf[16];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    long rc = pread(fd, buf, sizeof(buf), (off_t)addr);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static long raw_clone(unsigned long flags) {
    long pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid((pid_t)pid, NULL, 0);
    return pid;
}

static long do_clone3(void) {
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid((pid_t)pid, NULL, 0);
    return pid;
}

static long do_setns(const char *ns) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/ns/%s", ns);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    long rc = setns(fd, 0);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static long do_bpf(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    return syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
}

static long do_io_uring(void) {
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    return syscall(SYS_io_uring_setup, 4, &p);
}

static long do_perf(void) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof(a);
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.exclude_kernel = 1;
    return syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static long do_ptrace_child(void) {
    pid_t pid = fork();
    if (pid == 0) {
        pause();
        _exit(0);
    }
    long rc = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
    int e = errno;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    errno = e;
    return rc;
}

static void ids(void) {
    printf("uid=%d euid=%d gid=%d egid=%d\n", (int)getuid(), (int)geteuid(), (int)getgid(),
           (int)getegid());
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
            !strncmp(line, "Seccomp:", 8))
            fputs(line, stdout);
    if (f)
        fclose(f);
    struct statvfs sv;
    if (statvfs(".", &sv) == 0)
        printf("cwd_nosuid=%d\n", (sv.f_flag & ST_NOSUID) ? 1 : 0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: attack NAME [ARGS]\n");
        return 2;
    }
    const char *cmd = argv[1];
    struct tally t = {0, 0};
    if (!strcmp(cmd, "ids")) {
        ids();
        return 0;
    } else if (!strcmp(cmd, "connect") && argc == 4) {
        try(&t, "connect", do_connect(argv[2], atoi(argv[3])));
    } else if (!strcmp(cmd, "abstract") && argc == 3) {
        try(&t, "connect abstract unix socket", do_abstract(argv[2]));
    } else if (!strcmp(cmd, "socket") && argc == 3) {
        long s = socket(atoi(argv[2]), SOCK_STREAM, 0);
        if (s < 0 && errno != EPERM) /* only the jail's refusal counts as blocked here */
            s = socket(atoi(argv[2]), SOCK_DGRAM, 0);
        try(&t, "socket", s);
    } else if (!strcmp(cmd, "read")) {
        for (int i = 2; i < argc; i++)
            try(&t, argv[i], do_read(argv[i]));
    } else if (!strcmp(cmd, "write")) {
        for (int i = 2; i < argc; i++)
            try(&t, argv[i], do_write(argv[i]));
    } else if (!strcmp(cmd, "kill") && argc == 3) {
        pid_t pid = atoi(argv[2]);
        try(&t, "kill TERM", kill(pid, SIGTERM));
        try(&t, "kill USR1", kill(pid, SIGUSR1));
        try(&t, "kill pgrp", kill(-pid, SIGTERM));
    } else if (!strcmp(cmd, "ptrace") && argc == 3) {
        pid_t pid = atoi(argv[2]);
        try(&t, "ptrace attach", ptrace(PTRACE_ATTACH, pid, NULL, NULL));
        try(&t, "ptrace seize", ptrace(PTRACE_SEIZE, pid, NULL, NULL));
        try(&t, "ptrace own child", do_ptrace_child());
    } else if (!strcmp(cmd, "memory") && argc == 4) {
        pid_t pid = atoi(argv[2]);
        uintptr_t addr = (uintptr_t)strtoull(argv[3], NULL, 0);
        try(&t, "process_vm_readv", do_vmread(pid, addr));
        try(&t, "/proc/PID/mem", do_procmem(pid, addr));
        try(&t, "process_vm_readv pid 1", do_vmread(1, 0x400000));
        try(&t, "/proc/1/mem", do_procmem(1, 0x400000));
    } else if (!strcmp(cmd, "mount")) {
        try(&t, "mount tmpfs", mount("none", "/tmp", "tmpfs", 0, NULL));
        try(&t, "remount /usr rw", mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL));
        try(&t, "bind / on /tmp", mount("/", "/tmp", NULL, MS_BIND, NULL));
        try(&t, "umount /proc", umount2("/proc", MNT_DETACH));
        try(&t, "fsopen", syscall(SYS_fsopen, "tmpfs", 0));
        try(&t, "open_tree", syscall(SYS_open_tree, AT_FDCWD, "/usr", 1 /* CLONE */));
        try(&t, "chroot", chroot("/tmp"));
        try(&t, "pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
    } else if (!strcmp(cmd, "unshare")) {
        try(&t, "unshare user", unshare(CLONE_NEWUSER));
        try(&t, "unshare mount", unshare(CLONE_NEWNS));
        try(&t, "unshare net", unshare(CLONE_NEWNET));
        try(&t, "clone newuser", raw_clone(CLONE_NEWUSER));
        try(&t, "clone newns", raw_clone(CLONE_NEWNS));
        try(&t, "clone3 newuser", do_clone3());
    } else if (!strcmp(cmd, "setns")) {
        try(&t, "setns user", do_setns("user"));
        try(&t, "setns mnt", do_setns("mnt"));
        try(&t, "setns net", do_setns("net"));
        try(&t, "setns pid", do_setns("pid"));
    } else if (!strcmp(cmd, "suid") && argc == 3) {
        /* leave a set-user-ID file behind for the host, every way there is */
        char path[4096];
        const char *dir = argv[2];
        snprintf(path, sizeof(path), "%s/plain", dir);
        int fd = open(path, O_CREAT | O_WRONLY, 0755);
        if (fd >= 0) {
            (void)!write(fd, "#!/bin/sh\n", 10);
        }
        try(&t, "chmod", chmod(path, 04755));
        try(&t, "chmod g+s", chmod(path, 02755));
        try(&t, "fchmod", fd >= 0 ? fchmod(fd, 04755) : -1);
        try(&t, "fchmodat", fchmodat(AT_FDCWD, path, 04755, 0));
        try(&t, "fchmodat2", syscall(452, AT_FDCWD, path, 04755, 0));
        if (fd >= 0)
            close(fd);
        snprintf(path, sizeof(path), "%s/created", dir);
        try(&t, "open O_CREAT 04755", open(path, O_CREAT | O_WRONLY, 04755));
        try(&t, "openat O_CREAT 04755", openat(AT_FDCWD, path, O_CREAT | O_WRONLY, 04755));
        try(&t, "creat 04755", creat(path, 04755));
        snprintf(path, sizeof(path), "%s/node", dir);
        try(&t, "mknod S_IFREG 04755", mknod(path, S_IFREG | 04755, 0));
        struct {
            uint64_t flags, mode, resolve;
        } how = {O_CREAT | O_WRONLY, 04755, 0};
        snprintf(path, sizeof(path), "%s/openat2", dir);
        try(&t, "openat2 04755", syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how)));
    } else if (!strcmp(cmd, "syscall") && argc >= 3) {
        long a[3] = {0, 0, 0};
        for (int i = 3; i < argc && i < 6; i++)
            a[i - 3] = strtol(argv[i], NULL, 0);
        try(&t, argv[2], syscall(strtol(argv[2], NULL, 0), a[0], a[1], a[2]));
    } else if (!strcmp(cmd, "bpf")) {
        try(&t, "bpf map create", do_bpf());
    } else if (!strcmp(cmd, "io_uring")) {
        try(&t, "io_uring_setup", do_io_uring());
    } else if (!strcmp(cmd, "userfaultfd")) {
        try(&t, "userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
        try(&t, "/dev/userfaultfd", open("/dev/userfaultfd", O_RDWR));
    } else if (!strcmp(cmd, "perf")) {
        try(&t, "perf_event_open", do_perf());
    } else if (!strcmp(cmd, "keyctl")) {
        try(&t, "add_key",
            syscall(SYS_add_key, "user", "kforge", "secret", 6, KEY_SPEC_PROCESS_KEYRING));
        try(&t, "keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
        try(&t, "request_key", syscall(SYS_request_key, "user", "kforge", NULL, 0));
    } else {
        fprintf(stderr, "attack: unknown or incomplete: %s\n", cmd);
        return 2;
    }
    return finish(&t);
}
