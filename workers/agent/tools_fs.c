/* tools_fs.c: paths beneath the workspace (openat2), and the file tools read_file, write_file,
 * edit_file, glob and grep.
 *
 * Every path goes through kf_tool_open_beneath, from the workspace's descriptor: nothing here
 * builds a host path from an argument. Writes never open their target: they create a temporary
 * file in the target's folder and rename it over the name, so a link placed there is replaced,
 * never followed; links themselves are refused as targets. Walks (glob, grep) open each folder
 * with O_NOFOLLOW and never enter a symbolic link. */
#include "tools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>

#define WALK_MAX_ENTRIES 100000u /* directory entries a glob or grep looks at */
#define WALK_MAX_DEPTH 64u
#define PAT_MAX_COMPS 64u
#define GREP_LINE_CUT 400u /* bytes of a matching line shown */
#define BINARY_PROBE 8192u /* a NUL in these first bytes: a binary file */

/* ---- Paths ---- */

/* The fallback where openat2 is missing: `..` taken off the path as text (EXDEV when it
 * climbs above the start), then component by component with O_NOFOLLOW, refusing every
 * symbolic link (ELOOP). With no link followed, the text is the truth. */
static int walk_open(int dirfd, const char *path, int flags) {
    char buf[PATH_MAX];
    char *comp[PATH_MAX / 2 + 1];
    size_t n = 0;
    if (strlen(path) >= sizeof(buf))
        return -ENAMETOOLONG;
    strcpy(buf, path);
    char *save = NULL;
    for (char *t = strtok_r(buf, "/", &save); t != NULL; t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, "..") == 0) {
            if (n == 0)
                return -EXDEV;
            n--;
        } else if (strcmp(t, ".") != 0) {
            comp[n++] = t;
        }
    }
    int cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return -errno;
    for (size_t i = 0; i + 1 < n; i++) {
        int fd = openat(cur, comp[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int err = errno;
        if (fd < 0) {
            struct stat st;
            if (err == ENOTDIR && fstatat(cur, comp[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode))
                err = ELOOP;
            close(cur);
            return -err;
        }
        close(cur);
        cur = fd;
    }
    int fd = openat(cur, n > 0 ? comp[n - 1] : ".", flags | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    if (fd >= 0 && (flags & O_PATH)) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
            close(fd);
            fd = -1;
            err = ELOOP;
        }
    }
    close(cur);
    return fd >= 0 ? fd : -err;
}

int kf_tool_open_beneath(int wsfd, const char *path, int flags, bool nosymlinks) {
    if (path[0] == '/')
        return -EXDEV;
    struct open_how how = {
        .flags = (uint64_t)(unsigned)(flags | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (nosymlinks ? RESOLVE_NO_SYMLINKS : 0),
    };
    for (int tries = 0; tries < 8; tries++) {
        long fd = syscall(SYS_openat2, wsfd, path, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno == ENOSYS)
            return walk_open(wsfd, path, flags);
        if (errno != EAGAIN && errno != EINTR) /* EAGAIN: a rename raced the lookup */
            return -errno;
    }
    return -EAGAIN;
}

/* Says why path could not be used (err: a positive errno). */
static void path_fail(struct kf_tool_call *c, const char *path, int err) {
    switch (err) {
    case EXDEV:
        kf_tool_fail(c,
                     "%s: refused: the path leads outside the workspace (an absolute path, '..' "
                     "out of it, or a symbolic link pointing out of it)",
                     path);
        break;
    case ELOOP:
        kf_tool_fail(c, "%s: refused: a symbolic link that may not be followed here, or a loop",
                     path);
        break;
    case ENOENT:
        kf_tool_fail(c, "%s: no such file or folder", path);
        break;
    case ENOTDIR:
        kf_tool_fail(c, "%s: a component of the path is not a folder", path);
        break;
    default:
        kf_tool_fail(c, "%s: %s", path, strerror(err));
    }
}

/* Whether the `..` of path climb above its start, read as text (links are openat2's job);
 * refused before anything, so that no folder is made for a path that leaves anyway. */
static bool climbs_out(const char *path) {
    long depth = 0;
    for (const char *p = path; *p != '\0';) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return true;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n;
        p += *p == '/';
    }
    return false;
}

/* Lexical checks of a path argument `what` of len bytes. */
static bool path_ok(struct kf_tool_call *c, const char *what, const char *path, size_t len) {
    if (len == 0)
        kf_tool_fail(c, "%s is empty: give a path relative to the workspace", what);
    else if (strlen(path) != len)
        kf_tool_fail(c, "%s contains a NUL character", what);
    else if (len >= PATH_MAX)
        kf_tool_fail(c, "%s is too long (%zu bytes)", what, len);
    else if (path[0] == '/')
        kf_tool_fail(c,
                     "%s: refused: absolute paths are not allowed; paths are relative to the "
                     "workspace (e.g. kernels/add.cu)",
                     path);
    else if (climbs_out(path))
        path_fail(c, path, EXDEV);
    else
        return true;
    return false;
}

/* Splits path (relative, shorter than PATH_MAX) into its folder (or ".") and last name, which
 * must be a plain name; says why not through c when c is not NULL. */
static bool split_path(struct kf_tool_call *c, const char *path, char dir[PATH_MAX],
                       char base[NAME_MAX + 1]) {
    const char *slash = strrchr(path, '/');
    const char *b = slash != NULL ? slash + 1 : path;
    if (*b == '\0' || strcmp(b, ".") == 0 || strcmp(b, "..") == 0 || strlen(b) > NAME_MAX ||
        slash == path) {
        if (c != NULL)
            kf_tool_fail(c,
                         "%s: not the path of a file (it names a folder, or its name is too "
                         "long)",
                         path);
        return false;
    }
    strcpy(base, b);
    if (slash == NULL) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    return true;
}

/* Opens the folder dir beneath the workspace (O_PATH), creating missing folders one by one
 * when create. Returns a descriptor (the caller closes it) or -errno. */
static int open_dir(int wsfd, const char *dir, bool create) {
    int fd = kf_tool_open_beneath(wsfd, dir, O_PATH | O_DIRECTORY, false);
    if (fd != -ENOENT || !create)
        return fd;
    char prefix[PATH_MAX];
    size_t n = 0;
    for (const char *p = dir; *p != '\0';) {
        const char *e = strchr(p, '/');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            prefix[n] = '\0';
            int parent =
                kf_tool_open_beneath(wsfd, n > 0 ? prefix : ".", O_PATH | O_DIRECTORY, false);
            if (parent < 0)
                return parent;
            if (n > 0)
                prefix[n++] = '/';
            memcpy(prefix + n, p, len);
            n += len;
            prefix[n] = '\0';
            char name[NAME_MAX + 1];
            if (len > NAME_MAX) {
                close(parent);
                return -ENAMETOOLONG;
            }
            memcpy(name, p, len);
            name[len] = '\0';
            if (mkdirat(parent, name, 0755) != 0 && errno != EEXIST) {
                int err = errno;
                close(parent);
                return -err;
            }
            close(parent);
        }
        p = e != NULL ? e + 1 : p + len;
    }
    return kf_tool_open_beneath(wsfd, dir, O_PATH | O_DIRECTORY, false);
}

int kf_tool_read_fd(int fd, size_t cap, struct kf_buf *out) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if ((uint64_t)st.st_size > cap)
        return -EFBIG;
    char chunk[65536];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return 0;
        total += (size_t)r;
        if (total > cap)
            return -EFBIG;
        if (!kf_buf_append(out, chunk, (size_t)r))
            return -ENOMEM;
    }
}

int kf_tool_replace_file(int dirfd, const char *name, const void *data, size_t n, unsigned mode) {
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        memcpy(rnd, &v, sizeof(rnd));
    }
    char tmp[64];
    int off = snprintf(tmp, sizeof(tmp), ".kforge-tmp-");
    for (size_t i = 0; i < sizeof(rnd); i++)
        off += snprintf(tmp + off, sizeof(tmp) - (size_t)off, "%02x", rnd[i]);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int err = 0;
    for (size_t done = 0; done < n && err == 0;) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w < 0 && errno != EINTR)
            err = errno;
        else if (w > 0)
            done += (size_t)w;
    }
    if (err == 0 && fchmod(fd, mode & 0777) != 0)
        err = errno;
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && renameat(dirfd, tmp, dirfd, name) != 0)
        err = errno;
    if (err != 0)
        unlinkat(dirfd, tmp, 0);
    return -err;
}

/* The readonly entry that (dirfd's folder, base), or the existing file st there, is; NULL. */
static const char *readonly_hit(struct kf_tool_call *c, int dirfd, const char *base,
                                const struct stat *st) {
    const char *const *ro = c->ctx->readonly;
    struct stat dst;
    if (ro == NULL || fstat(dirfd, &dst) != 0)
        return NULL;
    for (; *ro != NULL; ro++) {
        char rdir[PATH_MAX], rbase[NAME_MAX + 1];
        if (strlen(*ro) >= PATH_MAX || !split_path(NULL, *ro, rdir, rbase))
            continue;
        struct stat s;
        int fd = kf_tool_open_beneath(c->wsfd, rdir, O_PATH | O_DIRECTORY, false);
        if (fd >= 0) {
            bool same = fstat(fd, &s) == 0 && s.st_dev == dst.st_dev && s.st_ino == dst.st_ino &&
                        strcmp(rbase, base) == 0;
            close(fd);
            if (same)
                return *ro;
        }
        if (st == NULL)
            continue;
        fd = kf_tool_open_beneath(c->wsfd, *ro, O_PATH, false);
        if (fd >= 0) {
            bool same = fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && s.st_dev == st->st_dev &&
                        s.st_ino == st->st_ino;
            close(fd);
            if (same)
                return *ro;
        }
    }
    return NULL;
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a folder"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* Resolves the target of a write or an edit: its folder (returned, O_PATH, created when
 * create), its name in base, and whether it exists (*st then filled). Refuses links,
 * non-regular files and the readonly files. Returns the folder's descriptor or -1 (said). */
static int write_target(struct kf_tool_call *c, const char *path, bool create,
                        char base[NAME_MAX + 1], struct stat *st, bool *exists) {
    char dir[PATH_MAX];
    if (!split_path(c, path, dir, base))
        return -1;
    int dfd = open_dir(c->wsfd, dir, create);
    if (dfd < 0) {
        path_fail(c, path, -dfd);
        return -1;
    }
    *exists = fstatat(dfd, base, st, AT_SYMLINK_NOFOLLOW) == 0;
    const char *ro = NULL;
    if (*exists && S_ISLNK(st->st_mode)) {
        int fd = kf_tool_open_beneath(c->wsfd, path, O_PATH, false);
        if (fd >= 0)
            close(fd);
        if (fd == -EXDEV)
            kf_tool_fail(c, "%s: refused: a symbolic link leading outside the workspace", path);
        else
            kf_tool_fail(c, "%s: refused: a symbolic link; write to the file it names instead",
                         path);
    } else if (*exists && !S_ISREG(st->st_mode)) {
        kf_tool_fail(c, "%s: refused: %s", path, kind_of(st->st_mode));
    } else if ((ro = readonly_hit(c, dfd, base, *exists ? st : NULL)) != NULL) {
        kf_tool_fail(c, "%s: refused: %s is read-only", path, ro);
    } else {
        return dfd;
    }
    close(dfd);
    return -1;
}

/* ---- read_file, write_file, edit_file ---- */

int kf_tool_read_file(struct kf_tool_call *c) {
    size_t len;
    const char *path = kf_tool_arg(c, "path", &len);
    if (!path_ok(c, "path", path, len))
        return 0;
    int fd = kf_tool_open_beneath(c->wsfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, false);
    if (fd < 0) {
        path_fail(c, path, -fd);
        return 0;
    }
    struct stat st;
    struct kf_buf data = {0};
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        path_fail(c, path, errno);
    } else if (S_ISDIR(st.st_mode)) {
        kf_tool_fail(c, "%s: a folder; use glob to list it (e.g. %s/*)", path, path);
    } else if (!S_ISREG(st.st_mode)) {
        kf_tool_fail(c, "%s: refused: %s", path, kind_of(st.st_mode));
    } else if ((rc = kf_tool_read_fd(fd, KF_TOOL_READ_CAP, &data)) == -EFBIG) {
        kf_tool_fail(c,
                     "%s: %lld bytes; read_file reads files up to %u bytes (4 MiB): use grep, or "
                     "bash (head, sed -n) for parts of it",
                     path, (long long)st.st_size, KF_TOOL_READ_CAP);
    } else if (rc == -ENOMEM) {
        c->oom = 1;
    } else if (rc < 0) {
        path_fail(c, path, -rc);
    } else if (data.len == 0) {
        kf_tool_say(c, "(%s is empty)", path);
    } else if (memchr(data.data, '\0', data.len < BINARY_PROBE ? data.len : BINARY_PROBE)) {
        kf_tool_fail(c, "%s: a binary file (%zu bytes); read_file shows text files only", path,
                     data.len);
    } else {
        kf_tool_put(c, data.data, data.len);
    }
    kf_buf_free(&data);
    close(fd);
    return 0;
}

static size_t max_file(const struct kf_tool_call *c) {
    return c->ctx->max_file_bytes > 0 ? c->ctx->max_file_bytes : KF_TOOL_DEFAULT_MAX_FILE;
}

int kf_tool_write_file(struct kf_tool_call *c) {
    size_t len, clen;
    const char *path = kf_tool_arg(c, "path", &len);
    const char *content = kf_tool_arg(c, "content", &clen);
    if (!path_ok(c, "path", path, len))
        return 0;
    if (clen > max_file(c)) {
        kf_tool_fail(c, "%s: refused: the content is %zu bytes; files may be at most %zu bytes",
                     path, clen, max_file(c));
        return 0;
    }
    char base[NAME_MAX + 1];
    struct stat st;
    bool exists;
    int dfd = write_target(c, path, true, base, &st, &exists);
    if (dfd < 0)
        return 0;
    int rc = kf_tool_replace_file(dfd, base, content, clen, exists ? st.st_mode : 0644);
    close(dfd);
    if (rc != 0)
        path_fail(c, path, -rc);
    else
        kf_tool_say(c, "%s %s (%zu bytes)", exists ? "replaced" : "created", path, clen);
    return 0;
}

int kf_tool_edit_file(struct kf_tool_call *c) {
    size_t len, olen, nlen;
    const char *path = kf_tool_arg(c, "path", &len);
    const char *old = kf_tool_arg(c, "old", &olen);
    const char *new = kf_tool_arg(c, "new", &nlen);
    if (!path_ok(c, "path", path, len))
        return 0;
    if (olen == 0) {
        kf_tool_fail(c, "edit_file: old is empty; give the exact text to replace");
        return 0;
    }
    char base[NAME_MAX + 1];
    struct stat st;
    bool exists;
    int dfd = write_target(c, path, false, base, &st, &exists);
    if (dfd < 0)
        return 0;
    struct kf_buf data = {0}, out = {0};
    int fd = -1, rc;
    if (!exists) {
        kf_tool_fail(c, "%s: no such file (write_file creates files)", path);
        goto done;
    }
    fd = openat(dfd, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        path_fail(c, path, errno);
        goto done;
    }
    rc = kf_tool_read_fd(fd, KF_TOOL_READ_CAP, &data);
    if (rc == -EFBIG) {
        kf_tool_fail(c, "%s: larger than %u bytes; edit it with bash", path, KF_TOOL_READ_CAP);
        goto done;
    } else if (rc == -ENOMEM) {
        c->oom = 1;
        goto done;
    } else if (rc < 0) {
        path_fail(c, path, -rc);
        goto done;
    }
    const char *text = data.data != NULL ? data.data : "";
    size_t count = 0, at = 0;
    for (const char *p = text; (size_t)(p - text) + olen <= data.len;) {
        const char *hit = memmem(p, data.len - (size_t)(p - text), old, olen);
        if (hit == NULL)
            break;
        if (count++ == 0)
            at = (size_t)(hit - text);
        p = hit + 1;
    }
    if (count == 0) {
        kf_tool_fail(c,
                     "%s: old string not found (it matched 0 times); it must match the file's "
                     "text exactly once, whitespace and indentation included (read_file shows "
                     "it)",
                     path);
        goto done;
    }
    if (count > 1) {
        kf_tool_fail(c,
                     "%s: old string matched %zu times; it must match exactly once: include more "
                     "of the surrounding lines to make it unique",
                     path, count);
        goto done;
    }
    size_t size = data.len - olen + nlen;
    if (size > max_file(c)) {
        kf_tool_fail(c, "%s: refused: the result would be %zu bytes; files may be at most %zu",
                     path, size, max_file(c));
        goto done;
    }
    if (!kf_buf_append(&out, text, at) || !kf_buf_append(&out, new, nlen) ||
        !kf_buf_append(&out, text + at + olen, data.len - at - olen)) {
        c->oom = 1;
        goto done;
    }
    rc = kf_tool_replace_file(dfd, base, out.data, out.len, st.st_mode);
    if (rc != 0) {
        path_fail(c, path, -rc);
        goto done;
    }
    size_t line = 1;
    for (size_t i = 0; i < at; i++)
        line += text[i] == '\n';
    kf_tool_say(c, "edited %s: replaced 1 occurrence at line %zu (%zu bytes now)", path, line,
                out.len);
done:
    if (fd >= 0)
        close(fd);
    close(dfd);
    kf_buf_free(&data);
    kf_buf_free(&out);
    return 0;
}

/* ---- Walking folders (glob, grep) ---- */

struct walk {
    struct kf_tool_call *c;
    char rel[PATH_MAX]; /* the current entry, relative to the walk's root */
    size_t visited;
    bool stopped; /* WALK_MAX_ENTRIES reached */
    /* Called for each entry (type: DT_*); returns whether to enter a folder. */
    bool (*visit)(struct walk *w, size_t rel_len, unsigned char type);
    void *arg;
};

/* Walks the folder open at fd (taken over), whose path is w->rel[0..rel_len). */
static void walk_dir(struct walk *w, int fd, size_t rel_len, size_t depth) {
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    struct dirent *e;
    while (!w->stopped && !w->c->oom && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++w->visited > WALK_MAX_ENTRIES) {
            w->stopped = true;
            break;
        }
        size_t nlen = strlen(e->d_name);
        size_t len = rel_len + (rel_len > 0) + nlen;
        if (len >= sizeof(w->rel))
            continue;
        if (rel_len > 0)
            w->rel[rel_len] = '/';
        memcpy(w->rel + rel_len + (rel_len > 0), e->d_name, nlen + 1);
        unsigned char type = e->d_type;
        if (type == DT_UNKNOWN) {
            struct stat st;
            if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            type = S_ISDIR(st.st_mode)   ? DT_DIR
                   : S_ISREG(st.st_mode) ? DT_REG
                   : S_ISLNK(st.st_mode) ? DT_LNK
                                         : DT_UNKNOWN;
        }
        bool enter = w->visit(w, len, type);
        if (type == DT_DIR && enter && depth + 1 < WALK_MAX_DEPTH) {
            int sub = openat(dirfd(d), e->d_name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (sub >= 0)
                walk_dir(w, sub, len, depth + 1);
        }
        w->rel[rel_len] = '\0';
    }
    closedir(d);
}

/* A list of owned strings. */
struct strs {
    char **v;
    size_t n, cap;
};

static bool strs_add(struct strs *s, const char *a, const char *b) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        char **v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL)
            return false;
        s->v = v;
        s->cap = cap;
    }
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 1);
    if (p == NULL)
        return false;
    memcpy(p, a, la);
    memcpy(p + la, b, lb + 1);
    s->v[s->n++] = p;
    return true;
}

static void strs_free(struct strs *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- glob ---- */

struct pattern {
    char buf[PATH_MAX];
    char *comp[PAT_MAX_COMPS];
    size_t n;
};

/* Splits `path` (a copy in scratch) into its components, "." and empty ones dropped. */
static size_t split_comps(char *scratch, char **comp, size_t max) {
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(scratch, "/", &save); t != NULL; t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, ".") == 0)
            continue;
        if (n == max)
            return max + 1;
        comp[n++] = t;
    }
    return n;
}

/* Whether pattern components P match path components S; with prefix, whether some path below
 * S could match instead. ** matches any number of components. */
static bool comps_match(char *const *P, size_t np, char *const *S, size_t ns, bool prefix) {
    bool dp[PAT_MAX_COMPS + 1][PAT_MAX_COMPS + 2];
    for (size_t i = np + 1; i-- > 0;) {
        for (size_t j = ns + 1; j-- > 0;) {
            bool m;
            if (i == np)
                m = j == ns && !prefix;
            else if (j == ns && prefix)
                m = true; /* pattern left: a deeper path may match */
            else if (strcmp(P[i], "**") == 0)
                m = dp[i + 1][j] || (j < ns && dp[i][j + 1]);
            else if (j == ns)
                m = false;
            else
                m = fnmatch(P[i], S[j], 0) == 0 && dp[i + 1][j + 1];
            dp[i][j] = m;
        }
    }
    return dp[0][0];
}

struct glob_state {
    struct pattern *pat;
    struct strs found;
};

static bool glob_visit(struct walk *w, size_t rel_len, unsigned char type) {
    struct glob_state *g = w->arg;
    char scratch[PATH_MAX];
    char *S[PAT_MAX_COMPS + 1];
    memcpy(scratch, w->rel, rel_len + 1);
    size_t ns = split_comps(scratch, S, PAT_MAX_COMPS);
    if (ns > PAT_MAX_COMPS)
        return false;
    if (comps_match(g->pat->comp, g->pat->n, S, ns, false) &&
        !strs_add(&g->found, w->rel, type == DT_DIR ? "/" : ""))
        w->c->oom = 1;
    return type == DT_DIR && comps_match(g->pat->comp, g->pat->n, S, ns, true);
}

int kf_tool_glob(struct kf_tool_call *c) {
    size_t len;
    const char *pattern = kf_tool_arg(c, "pattern", &len);
    if (len == 0 || strlen(pattern) != len || len >= PATH_MAX) {
        kf_tool_fail(c, "glob: the pattern is empty, too long or contains a NUL character");
        return 0;
    }
    if (pattern[0] == '/') {
        kf_tool_fail(c, "%s: refused: patterns are relative to the workspace (e.g. **/*.cu)",
                     pattern);
        return 0;
    }
    struct pattern *pat = calloc(1, sizeof(*pat));
    struct walk *w = calloc(1, sizeof(*w));
    if (pat == NULL || w == NULL) {
        free(pat);
        free(w);
        c->oom = 1;
        return 0;
    }
    strcpy(pat->buf, pattern);
    char *raw[PAT_MAX_COMPS + 1];
    size_t nraw = split_comps(pat->buf, raw, PAT_MAX_COMPS);
    for (size_t i = 0; i < nraw && i < PAT_MAX_COMPS; i++) {
        if (strcmp(raw[i], "..") == 0) {
            nraw = PAT_MAX_COMPS + 2;
            break;
        }
        if (strcmp(raw[i], "**") == 0 && pat->n > 0 && strcmp(pat->comp[pat->n - 1], "**") == 0)
            continue; /* consecutive ** are one */
        pat->comp[pat->n++] = raw[i];
    }
    struct glob_state g = {.pat = pat};
    if (nraw == PAT_MAX_COMPS + 2) {
        kf_tool_fail(c, "%s: refused: patterns may not contain '..'", pattern);
    } else if (nraw > PAT_MAX_COMPS) {
        kf_tool_fail(c, "%s: too many components", pattern);
    } else {
        w->c = c;
        w->visit = glob_visit;
        w->arg = &g;
        int root = openat(c->wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) {
            kf_tool_fail(c, "glob: the workspace: %s", strerror(errno));
        } else {
            walk_dir(w, root, 0, 0);
            if (g.found.n > 1)
                qsort(g.found.v, g.found.n, sizeof(char *), cmp_str);
            for (size_t i = 0; i < g.found.n && i < KF_TOOL_LIST_CAP; i++)
                kf_tool_say(c, "%s\n", g.found.v[i]);
            if (g.found.n == 0)
                kf_tool_say(c, "no paths match %s\n", pattern);
            if (g.found.n > KF_TOOL_LIST_CAP)
                kf_tool_say(c, "[%zu paths match; the first %u shown: narrow the pattern]\n",
                            g.found.n, KF_TOOL_LIST_CAP);
            if (w->stopped)
                kf_tool_say(c, "[the search stopped after %u entries: narrow the pattern]\n",
                            WALK_MAX_ENTRIES);
        }
    }
    strs_free(&g.found);
    free(pat);
    free(w);
    return 0;
}

/* ---- grep ---- */

struct grep_state {
    regex_t re;
    struct kf_buf line;
    size_t shown;  /* matching lines printed */
    bool full;     /* KF_TOOL_LIST_CAP reached */
    size_t binary; /* files skipped */
    size_t big;
    struct strs files;
};

static bool grep_visit(struct walk *w, size_t rel_len, unsigned char type) {
    (void)rel_len;
    struct grep_state *g = w->arg;
    if (type == DT_REG && !strs_add(&g->files, w->rel, ""))
        w->c->oom = 1;
    return type == DT_DIR;
}

/* Prints the matching lines of the regular file open at fd as `shown:N:text`. */
static void grep_fd(struct kf_tool_call *c, struct grep_state *g, int fd, const char *shown) {
    struct kf_buf data = {0};
    int rc = kf_tool_read_fd(fd, KF_TOOL_READ_CAP, &data);
    if (rc == -EFBIG) {
        g->big++;
    } else if (rc == -ENOMEM) {
        c->oom = 1;
    } else if (rc == 0 && data.len > 0 &&
               memchr(data.data, '\0', data.len < BINARY_PROBE ? data.len : BINARY_PROBE)) {
        g->binary++;
    } else if (rc == 0) {
        size_t lineno = 0;
        for (size_t at = 0; at < data.len && !g->full && !c->oom;) {
            const char *nl = memchr(data.data + at, '\n', data.len - at);
            size_t end = nl != NULL ? (size_t)(nl - data.data) : data.len;
            lineno++;
            g->line.len = 0;
            if (!kf_buf_append(&g->line, data.data + at, end - at)) {
                c->oom = 1;
                break;
            }
            if (regexec(&g->re, g->line.data, 0, NULL, 0) == 0) {
                if (g->shown == KF_TOOL_LIST_CAP) {
                    g->full = true;
                    break;
                }
                g->shown++;
                size_t n = end - at;
                bool cut = n > GREP_LINE_CUT;
                kf_tool_say(c, "%s:%zu:%.*s%s\n", shown, lineno, (int)(cut ? GREP_LINE_CUT : n),
                            g->line.data, cut ? " [line cut]" : "");
            }
            at = end + 1;
        }
    }
    kf_buf_free(&data);
}

/* Searches the folder open at dfd (borrowed), shown as prefix. */
static void grep_dir(struct kf_tool_call *c, struct grep_state *g, int dfd, const char *prefix) {
    struct walk *w = calloc(1, sizeof(*w));
    int root = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w == NULL || root < 0) {
        if (root >= 0)
            close(root);
        else
            kf_tool_fail(c, "grep: %s: %s", prefix, strerror(errno));
        if (w == NULL)
            c->oom = 1;
        free(w);
        return;
    }
    w->c = c;
    w->visit = grep_visit;
    w->arg = g;
    walk_dir(w, root, 0, 0);
    if (g->files.n > 1)
        qsort(g->files.v, g->files.n, sizeof(char *), cmp_str);
    char shown[PATH_MAX * 2];
    for (size_t i = 0; i < g->files.n && !g->full && !c->oom; i++) {
        int fd = kf_tool_open_beneath(dfd, g->files.v[i], O_RDONLY | O_NONBLOCK | O_NOCTTY, true);
        struct stat st;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            snprintf(shown, sizeof(shown), "%s%s%s", prefix, prefix[0] ? "/" : "", g->files.v[i]);
            grep_fd(c, g, fd, shown);
        }
        close(fd);
    }
    if (w->stopped)
        kf_tool_say(c, "[the search stopped after %u entries: give a narrower path]\n",
                    WALK_MAX_ENTRIES);
    free(w);
}

int kf_tool_grep(struct kf_tool_call *c) {
    size_t plen, len = 1;
    const char *pattern = kf_tool_arg(c, "pattern", &plen);
    const char *path = kf_tool_arg(c, "path", &len);
    if (path == NULL)
        path = ".";
    else if (!path_ok(c, "path", path, len))
        return 0;
    if (strlen(pattern) != plen) {
        kf_tool_fail(c, "grep: the pattern contains a NUL character");
        return 0;
    }
    struct grep_state g = {0};
    int rc = regcomp(&g.re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &g.re, msg, sizeof(msg));
        kf_tool_fail(c, "grep: invalid regular expression (POSIX extended) %s: %s", pattern, msg);
        return 0;
    }
    int fd = kf_tool_open_beneath(c->wsfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, false);
    struct stat st;
    if (fd < 0) {
        path_fail(c, path, -fd);
    } else if (fstat(fd, &st) != 0) {
        path_fail(c, path, errno);
    } else if (S_ISDIR(st.st_mode)) {
        char prefix[PATH_MAX];
        strcpy(prefix, path);
        size_t n = strlen(prefix);
        while (n > 1 && prefix[n - 1] == '/')
            prefix[--n] = '\0';
        grep_dir(c, &g, fd, strcmp(prefix, ".") == 0 ? "" : prefix);
    } else if (S_ISREG(st.st_mode)) {
        grep_fd(c, &g, fd, path);
    } else {
        kf_tool_fail(c, "%s: refused: %s", path, kind_of(st.st_mode));
    }
    if (fd >= 0)
        close(fd);
    if (!c->is_error) {
        if (g.shown == 0)
            kf_tool_say(c, "no lines match %s in %s\n", pattern, path);
        if (g.full)
            kf_tool_say(c, "[stopped at %u matching lines: narrow the pattern or the path]\n",
                        KF_TOOL_LIST_CAP);
        if (g.binary > 0)
            kf_tool_say(c, "[skipped %zu binary file%s]\n", g.binary, g.binary > 1 ? "s" : "");
        if (g.big > 0)
            kf_tool_say(c, "[skipped %zu file%s over %u bytes]\n", g.big, g.big > 1 ? "s" : "",
                        KF_TOOL_READ_CAP);
    }
    regfree(&g.re);
    kf_buf_free(&g.line);
    strs_free(&g.files);
    return 0;
}
