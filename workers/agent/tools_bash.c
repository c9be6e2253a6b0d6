/* tools_bash.c: the bash tool: `/bin/bash -c COMMAND` through kforge-jail (profile shell), and
 * the guard of the read-only files.
 *
 *   JAIL --profile shell --workdir WS --time T --mem MIB --output-limit KIB --report FILE
 *        [--ro PATH]... -- /bin/bash -c COMMAND
 *
 * The answer is "exit status N" (or "killed: time limit of T s", "killed: output limit ...",
 * ...), then any notes on the read-only files, then "--- stdout ---" and "--- stderr ---"
 * sections (each only when not empty; "(no output)" when both are). The jail captures the two
 * streams separately (so their interleaving is lost) into memory files, up to
 * KF_TOOL_BASH_OUTPUT_KIB together: past that it kills the command, so nothing ever blocks on
 * output.
 *
 * Read-only files (ctx->readonly) are guarded twice:
 * 1. each one that is a plain regular file reached without any symbolic link is bound
 *    read-only over itself in the jail (`--ro WS/NAME`): writes, chmod, rm and mv of it fail
 *    (EROFS, EBUSY). This holds for a file at the top of the workspace; for one deeper, the
 *    shell can still rename a folder above it and put another file at its path;
 * 2. so before each call its content and permission bits are copied, and after the call a file
 *    that changed, went missing or was replaced (or one that was absent and appeared) is
 *    restored (or removed), with a note "NAME is read-only: restored" in the answer. */
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SNAP_CAP (64u * 1024u * 1024u) /* larger read-only files rely on the bind alone */
#define JAIL_GRACE_S 30.0              /* past its own clock, the jail itself is killed */
#define SETUP_EXIT 125                 /* kforge-jail's own failure */

enum snap_state { SNAP_ABSENT, SNAP_FILE, SNAP_OTHER };

struct snap {
    const char *name; /* borrowed from ctx->readonly */
    enum snap_state state;
    bool bind;          /* a regular file reached without links: bound read-only in the jail */
    struct kf_buf data; /* SNAP_FILE: the content (owned) */
    mode_t mode;
};

/* Copies the read-only file s->name as it is before the call. Returns 0 or -1 (memory). */
static int snap_take(struct kf_tool_call *c, struct snap *s) {
    s->state = SNAP_OTHER;
    int fd = kf_tool_open_beneath(c->wsfd, s->name, O_RDONLY | O_NONBLOCK | O_NOCTTY, true);
    if (fd == -ENOENT)
        s->state = SNAP_ABSENT;
    if (fd < 0)
        return 0;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        s->bind = true;
        int r = kf_tool_read_fd(fd, SNAP_CAP, &s->data);
        if (r == 0) {
            s->state = SNAP_FILE;
            s->mode = st.st_mode & 07777;
        } else if (r == -ENOMEM) {
            rc = -1;
        }
    }
    close(fd);
    return rc;
}

/* Whether the file s->name is still what snap_take saw. */
static bool snap_same(struct kf_tool_call *c, const struct snap *s) {
    int fd = kf_tool_open_beneath(c->wsfd, s->name, O_RDONLY | O_NONBLOCK | O_NOCTTY, true);
    if (fd < 0)
        return false;
    struct stat st;
    struct kf_buf now = {0};
    bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == s->mode &&
                (size_t)st.st_size == s->data.len && kf_tool_read_fd(fd, SNAP_CAP, &now) == 0 &&
                now.len == s->data.len &&
                (now.len == 0 || memcmp(now.data, s->data.data, now.len) == 0);
    kf_buf_free(&now);
    close(fd);
    return same;
}

/* Moves whatever is at name in dirfd out of the way (a folder renamed aside, anything else
 * removed). Returns 0 or -errno. */
static int clear_name(int dirfd, const char *name) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dirfd, name, 0) == 0 ? 0 : -errno;
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
        return 0;
    char aside[NAME_MAX + 64];
    snprintf(aside, sizeof(aside), "%.*s.kforge-moved-%ld", NAME_MAX, name, (long)time(NULL));
    return renameat(dirfd, name, dirfd, aside) == 0 ? 0 : -errno;
}

/* Opens (O_PATH) the folder of s->name, making each component a real folder again: whatever
 * stands at a component's name that is not a folder (a link, a file) is removed. `..` is
 * refused. Sets *base to the last name. Returns a descriptor or -errno. */
static int restore_dir(struct kf_tool_call *c, const char *name, char *copy, char **base) {
    strcpy(copy, name);
    int cur = openat(c->wsfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return -errno;
    char *save = NULL, *comp = strtok_r(copy, "/", &save);
    while (comp != NULL) {
        char *next = strtok_r(NULL, "/", &save);
        if (next == NULL)
            break;
        if (strcmp(comp, "..") == 0) {
            close(cur);
            return -EXDEV;
        }
        if (strcmp(comp, ".") != 0) {
            struct stat st;
            int err = 0;
            if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
                err = clear_name(cur, comp);
            if (err == 0 && mkdirat(cur, comp, 0755) != 0 && errno != EEXIST)
                err = -errno;
            int fd =
                err == 0 ? openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (err == 0 && fd < 0)
                err = -errno;
            close(cur);
            if (err != 0)
                return err;
            cur = fd;
        }
        comp = next;
    }
    if (comp == NULL || strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
        close(cur);
        return -EINVAL;
    }
    *base = comp;
    return cur;
}

/* After the call: puts s->name back as snap_take saw it, and says so in notes. */
static void snap_check(struct kf_tool_call *c, const struct snap *s, struct kf_buf *notes) {
    if (s->state == SNAP_OTHER || strlen(s->name) >= PATH_MAX)
        return;
    if (s->state == SNAP_FILE && snap_same(c, s))
        return;
    char copy[PATH_MAX], *base = NULL, note[PATH_MAX + 128];
    int rc;
    if (s->state == SNAP_ABSENT) {
        /* whatever now stands at the name, reached through real folders only, goes */
        strcpy(copy, s->name);
        char *slash = strrchr(copy, '/');
        const char *dir = slash != NULL ? copy : ".";
        base = slash != NULL ? slash + 1 : copy;
        if (slash != NULL)
            *slash = '\0';
        if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
            return;
        int dfd = kf_tool_open_beneath(c->wsfd, dir, O_PATH | O_DIRECTORY, true);
        struct stat st;
        if (dfd < 0)
            return;
        if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            close(dfd);
            return;
        }
        rc = clear_name(dfd, base);
        close(dfd);
        if (rc == 0)
            snprintf(note, sizeof(note), "%s is read-only: removed\n", s->name);
    } else {
        rc = restore_dir(c, s->name, copy, &base);
        if (rc >= 0) {
            int dfd = rc;
            rc = kf_tool_replace_file(dfd, base, s->data.data, s->data.len, s->mode);
            if (rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST) {
                rc = clear_name(dfd, base);
                if (rc == 0)
                    rc = kf_tool_replace_file(dfd, base, s->data.data, s->data.len, s->mode);
            }
            close(dfd);
        }
        if (rc == 0)
            snprintf(note, sizeof(note), "%s is read-only: restored\n", s->name);
    }
    if (rc < 0)
        snprintf(note, sizeof(note), "%s is read-only: changed, and not restored: %s\n", s->name,
                 strerror(-rc));
    if (!kf_buf_append(notes, note, strlen(note)))
        c->oom = 1;
}

/* A growing argv of owned strings. */
struct argv {
    char **v;
    size_t n, cap;
    bool oom;
};

static void argv_add(struct argv *a, const char *s) {
    if (a->oom)
        return;
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 32;
        char **v = realloc(a->v, cap * sizeof(*v));
        if (v == NULL) {
            a->oom = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n] = strdup(s);
    if (a->v[a->n] == NULL) {
        a->oom = true;
        return;
    }
    a->v[++a->n] = NULL;
}

static void argv_free(struct argv *a) {
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
}

/* Starts argv[0] with stdin /dev/null, stdout/stderr the given descriptors, default signal
 * dispositions and an empty mask (the worker blocks or ignores some; the jail needs SIGCHLD),
 * in the caller's process group (a stop of the worker's group stops it too). Returns the pid
 * or -errno. */
static pid_t spawn(char *const *argv, int out, int err) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -ENOMEM;
    if (posix_spawnattr_init(&at) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -ENOMEM;
    }
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    static const int SIGS[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE,
                               SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(SIGS) / sizeof(SIGS[0]); i++)
        sigaddset(&dfl, SIGS[i]);
    char *const envp[] = {NULL}; /* the jail builds the command's environment anew */
    pid_t pid = -1;
    int rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, out, 1);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, err, 2);
    if (rc == 0)
        rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&at, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&at, &dfl);
    if (rc == 0)
        rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -rc;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for pid up to limit_s; past it kills it (the jail's tree dies with it). Returns 0 when
 * it ended (*status set), 1 when it was killed for the time, 2 when someone else reaped it
 * (SIGCHLD ignored: *status unknown). */
static int wait_child(pid_t pid, double limit_s, int *status) {
    double deadline = mono_s() + limit_s;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int rc = -1;
    while (rc < 0) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) {
            rc = 0;
        } else if (r < 0 && errno == ECHILD) {
            rc = 2;
        } else if (r < 0 && errno != EINTR) {
            rc = 2;
        } else {
            double left = deadline - mono_s();
            if (left <= 0) {
                kill(pid, SIGKILL);
                while (waitpid(pid, status, 0) < 0 && errno == EINTR)
                    ;
                rc = 1;
            } else if (pfd >= 0) {
                struct pollfd p = {.fd = pfd, .events = POLLIN};
                poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
            } else {
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
    }
    if (pfd >= 0)
        close(pfd);
    return rc;
}

/* Reads the memory file fd from its start into out, at most cap bytes. */
static int read_memfd(int fd, size_t cap, struct kf_buf *out) {
    if (lseek(fd, 0, SEEK_SET) != 0)
        return -errno;
    char chunk[65536];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : 0;
        size_t take = out->len + (size_t)r > cap ? cap - out->len : (size_t)r;
        if (!kf_buf_append(out, chunk, take))
            return -ENOMEM;
        if (out->len >= cap)
            return 0;
    }
}

/* " (SIGNAME)" for the signals a command commonly dies of, else "" (strsignal is not
 * thread-safe). */
static const char *sig_name(int sig) {
    switch (sig) {
    case SIGKILL:
        return " (SIGKILL)";
    case SIGSEGV:
        return " (SIGSEGV)";
    case SIGABRT:
        return " (SIGABRT)";
    case SIGBUS:
        return " (SIGBUS)";
    case SIGFPE:
        return " (SIGFPE)";
    case SIGILL:
        return " (SIGILL)";
    case SIGTERM:
        return " (SIGTERM)";
    case SIGPIPE:
        return " (SIGPIPE)";
    case SIGXCPU:
        return " (SIGXCPU)";
    case SIGXFSZ:
        return " (SIGXFSZ)";
    default:
        return "";
    }
}

/* The first line: how the command ended, from the report (may be NULL) and its status. */
static void say_end(struct kf_tool_call *c, const json_t *report, int exit_code, double time_s,
                    int mem_mib, unsigned out_kib) {
    const char *limit = json_string_value(json_object_get(report, "limit"));
    const json_t *sig = json_object_get(report, "signal");
    if (limit == NULL)
        limit = "";
    if (strcmp(limit, "time") == 0)
        kf_tool_say(c, "killed: time limit of %g s\n", time_s);
    else if (strcmp(limit, "output") == 0)
        kf_tool_say(c, "killed: output limit of %u KiB reached (below: what was captured)\n",
                    out_kib);
    else if (strcmp(limit, "memory") == 0)
        kf_tool_say(c, "killed: memory limit of %d MiB\n", mem_mib);
    else if (strcmp(limit, "pids") == 0)
        kf_tool_say(c, "killed: process limit\n");
    else if (strcmp(limit, "cpu") == 0)
        kf_tool_say(c, "killed: CPU time limit\n");
    else if (strcmp(limit, "fsize") == 0)
        kf_tool_say(c, "killed: file size limit\n");
    else if (strcmp(limit, "disk") == 0)
        kf_tool_say(c, "killed: the workspace passed its disk quota of %ld MiB\n",
                    c->ctx->bash_disk_mib > 0 ? c->ctx->bash_disk_mib : 8192L);
    else if (json_is_integer(sig))
        kf_tool_say(c, "killed by signal %d%s\n", (int)json_integer_value(sig),
                    sig_name((int)json_integer_value(sig)));
    else
        kf_tool_say(c, "exit status %d\n", exit_code);
}

struct bash_run {
    char dir[PATH_MAX]; /* private folder of the report */
    char report[PATH_MAX + 16];
    int out, err; /* memory files of the jail's stdout and stderr */
    struct snap *snaps;
    size_t nsnaps;
    struct argv argv;
};

/* Builds the jail's command line into r->argv. */
static void build_argv(struct kf_tool_call *c, struct bash_run *r, const char *cmd, double t,
                       int mem, unsigned out_kib) {
    const struct kf_tool_ctx *ctx = c->ctx;
    char num[64];
    argv_add(&r->argv, ctx->jail);
    argv_add(&r->argv, "--profile");
    argv_add(&r->argv, "shell");
    argv_add(&r->argv, "--workdir");
    argv_add(&r->argv, ctx->workspace);
    snprintf(num, sizeof(num), "%.3f", t);
    argv_add(&r->argv, "--time");
    argv_add(&r->argv, num);
    snprintf(num, sizeof(num), "%d", mem);
    argv_add(&r->argv, "--mem");
    argv_add(&r->argv, num);
    snprintf(num, sizeof(num), "%u", out_kib);
    argv_add(&r->argv, "--output-limit");
    argv_add(&r->argv, num);
    snprintf(num, sizeof(num), "%ld", ctx->bash_disk_mib > 0 ? ctx->bash_disk_mib : 8192L);
    argv_add(&r->argv, "--disk");
    argv_add(&r->argv, num);
    argv_add(&r->argv, "--report");
    argv_add(&r->argv, r->report);
    for (const char *const *p = ctx->bash_ro; p != NULL && *p != NULL; p++) {
        struct stat st;
        if (stat(*p, &st) == 0) {
            argv_add(&r->argv, "--ro");
            argv_add(&r->argv, *p);
        }
    }
    /* The jail follows links in --ro paths on the host: only files that snap_take reached
     * without any link (RESOLVE_NO_SYMLINKS) are passed, and no command of the agent runs
     * between that check and the jail's mounts (each call's jail kills its whole tree). */
    for (size_t i = 0; i < r->nsnaps; i++) {
        if (!r->snaps[i].bind)
            continue;
        size_t n = strlen(ctx->workspace) + strlen(r->snaps[i].name) + 2;
        char *p = malloc(n);
        if (p == NULL) {
            r->argv.oom = true;
            return;
        }
        snprintf(p, n, "%s/%s", ctx->workspace, r->snaps[i].name);
        argv_add(&r->argv, "--ro");
        argv_add(&r->argv, p);
        free(p);
    }
    argv_add(&r->argv, "--");
    argv_add(&r->argv, "/bin/bash");
    argv_add(&r->argv, "-c");
    argv_add(&r->argv, cmd);
}

/* Sets up r: the report's folder, the memory files, the snapshots. Returns 0 or -1 (said). */
static int prepare(struct kf_tool_call *c, struct bash_run *r) {
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/' || strlen(tmp) > PATH_MAX - 64)
        tmp = "/tmp";
    snprintf(r->dir, sizeof(r->dir), "%s/kforge-bash-XXXXXX", tmp);
    if (mkdtemp(r->dir) == NULL) {
        kf_tool_fail(c, "internal error: mkdtemp %s: %s", r->dir, strerror(errno));
        r->dir[0] = '\0';
        return -1;
    }
    snprintf(r->report, sizeof(r->report), "%s/report.json", r->dir);
    r->out = memfd_create("kforge-bash-stdout", MFD_CLOEXEC);
    r->err = memfd_create("kforge-bash-stderr", MFD_CLOEXEC);
    if (r->out < 0 || r->err < 0) {
        kf_tool_fail(c, "internal error: memfd_create: %s", strerror(errno));
        return -1;
    }
    size_t n = 0;
    for (const char *const *p = c->ctx->readonly; p != NULL && *p != NULL; p++)
        n++;
    r->snaps = calloc(n + 1, sizeof(*r->snaps));
    if (r->snaps == NULL) {
        c->oom = 1;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        r->snaps[i].name = c->ctx->readonly[i];
        r->nsnaps++;
        if (snap_take(c, &r->snaps[i]) != 0) {
            c->oom = 1;
            return -1;
        }
    }
    return 0;
}

static void cleanup(struct bash_run *r) {
    if (r->report[0] != '\0')
        unlink(r->report);
    if (r->dir[0] != '\0')
        rmdir(r->dir);
    if (r->out >= 0)
        close(r->out);
    if (r->err >= 0)
        close(r->err);
    for (size_t i = 0; i < r->nsnaps; i++)
        kf_buf_free(&r->snaps[i].data);
    free(r->snaps);
    argv_free(&r->argv);
}

/* Runs the jail for r and composes the answer. Returns 0 or -1 (internal failure, said). */
static int run_jail(struct kf_tool_call *c, struct bash_run *r, double t, int mem,
                    unsigned out_kib) {
    pid_t pid = spawn(r->argv.v, r->out, r->err);
    if (pid < 0) {
        kf_tool_fail(c, "internal error: cannot start the jail %s: %s", c->ctx->jail,
                     strerror((int)-pid));
        return -1;
    }
    int status = 0;
    int waited = wait_child(pid, t + JAIL_GRACE_S, &status);
    json_t *report = json_load_file(r->report, 0, NULL);
    struct kf_buf notes = {0}, out = {0}, err = {0};
    for (size_t i = 0; i < r->nsnaps; i++)
        snap_check(c, &r->snaps[i], &notes);
    size_t cap = (size_t)out_kib * 1024u + 65536u;
    if (read_memfd(r->out, cap, &out) == -ENOMEM || read_memfd(r->err, cap, &err) == -ENOMEM)
        c->oom = 1;
    int rc = 0;
    int code = waited == 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (waited == 2 && json_is_integer(json_object_get(report, "exit")))
        code = (int)json_integer_value(json_object_get(report, "exit"));
    const char *jerr = json_string_value(json_object_get(report, "error"));
    if (waited == 1) {
        kf_tool_fail(c, "internal error: the jail did not end %g s after its time limit\n",
                     JAIL_GRACE_S);
        rc = -1;
    } else if (code == SETUP_EXIT && (report == NULL || jerr != NULL)) {
        kf_tool_fail(c, "internal error: the jail failed: %s\n",
                     jerr != NULL ? jerr : "(no report)");
        rc = -1;
    } else if (code < 0 && report == NULL) {
        kf_tool_fail(c, "internal error: the jail was killed by signal %d\n",
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        rc = -1;
    } else {
        say_end(c, report, code, t, mem, out_kib);
    }
    kf_tool_put(c, notes.data != NULL ? notes.data : "", notes.len);
    if (out.len > 0) {
        kf_tool_say(c, "--- stdout ---\n");
        kf_tool_put(c, out.data, out.len);
        if (out.data[out.len - 1] != '\n')
            kf_tool_say(c, "\n");
    }
    if (err.len > 0) {
        kf_tool_say(c, "--- stderr ---\n");
        kf_tool_put(c, err.data, err.len);
        if (err.data[err.len - 1] != '\n')
            kf_tool_say(c, "\n");
    }
    if (out.len == 0 && err.len == 0 && rc == 0)
        kf_tool_say(c, "(no output)\n");
    json_decref(report);
    kf_buf_free(&notes);
    kf_buf_free(&out);
    kf_buf_free(&err);
    return rc;
}

int kf_tool_bash(struct kf_tool_call *c) {
    size_t len;
    const char *cmd = kf_tool_arg(c, "command", &len);
    const struct kf_tool_ctx *ctx = c->ctx;
    if (strlen(cmd) != len) {
        kf_tool_fail(c, "bash: the command contains a NUL character");
        return 0;
    }
    if (len == 0) {
        kf_tool_fail(c, "bash: the command is empty");
        return 0;
    }
    if (ctx->jail == NULL || access(ctx->jail, X_OK) != 0) {
        kf_tool_fail(c, "internal error: the jail binary is missing: %s%s%s",
                     ctx->jail ? ctx->jail : "(not set)", ctx->jail ? ": " : "",
                     ctx->jail ? strerror(errno) : "");
        return -1;
    }
    double t = ctx->bash_timeout_s > 0 ? ctx->bash_timeout_s : KF_TOOL_DEFAULT_BASH_TIMEOUT_S;
    int mem = ctx->bash_mem_mib > 0 ? ctx->bash_mem_mib : KF_TOOL_DEFAULT_BASH_MEM_MIB;
    /* at least 1 MiB, and never less than what the policy may be shown */
    size_t max_out = ctx->max_output > 0 ? ctx->max_output : KF_TOOL_DEFAULT_MAX_OUTPUT;
    unsigned out_kib = KF_TOOL_BASH_OUTPUT_KIB;
    if (max_out / 1024 + 1 > out_kib)
        out_kib = max_out / 1024 + 1 > 1u << 20 ? 1u << 20 : (unsigned)(max_out / 1024 + 1);
    struct bash_run r = {.out = -1, .err = -1};
    int rc = prepare(c, &r);
    if (rc == 0) {
        build_argv(c, &r, cmd, t, mem, out_kib);
        if (r.argv.oom)
            c->oom = 1;
        else
            rc = run_jail(c, &r, t, mem, out_kib);
    }
    cleanup(&r);
    return rc;
}
