/* stack.c: what the subcommands share: where things are (repo root, var/, stack.env), files,
 * HTTP through libcurl, free ports, pid files and running programs. */
#include "cli.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"

void kfc_repo_root(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) {
        snprintf(out, n, ".");
        return;
    }
    exe[len] = '\0';
    /* ROOT/build/kforge -> ROOT */
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (slash == NULL || slash == exe) {
            snprintf(out, n, "/");
            return;
        }
        *slash = '\0';
    }
    snprintf(out, n, "%s", exe);
}

void kfc_bin_dir(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash = len > 0 ? (exe[len] = '\0', strrchr(exe, '/')) : NULL;
    if (slash == NULL) {
        snprintf(out, n, ".");
        return;
    }
    *slash = '\0';
    snprintf(out, n, "%s", exe[0] ? exe : "/");
}

void kfc_migrations_dir(char *out, size_t n) {
    const char *env = getenv("KFORGE_MIGRATIONS");
    if (env && env[0]) {
        snprintf(out, n, "%s", env);
        return;
    }
    char root[PATH_MAX];
    kfc_repo_root(root, sizeof(root));
    snprintf(out, n, "%s/migrations", root);
}

void kfc_var_dir(const char *opt, char *out, size_t n) {
    const char *v = opt ? opt : getenv("KFORGE_VAR");
    if (v == NULL || v[0] == '\0')
        v = "var";
    char cwd[PATH_MAX];
    if (v[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
        snprintf(out, n, "%s", v);
    else
        snprintf(out, n, "%s/%s", cwd, v);
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/')
        out[--len] = '\0';
}

bool kfc_stack_get(const char *var, const char *key, char *out, size_t n) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/stack.env", var);
    char *text = kfc_read_file(path, NULL);
    if (text == NULL)
        return false;
    bool found = false;
    size_t klen = strlen(key);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
            snprintf(out, n, "%s", line + klen + 1);
            found = true;
        }
    }
    free(text);
    return found;
}

void kfc_database_url(const char *opt, const char *var, char *out, size_t n) {
    const char *env = getenv("KFORGE_DATABASE_URL");
    if (opt)
        snprintf(out, n, "%s", opt);
    else if (env && env[0])
        snprintf(out, n, "%s", env);
    else if (!kfc_stack_get(var, "KFORGE_DATABASE_URL", out, n))
        snprintf(out, n, "postgresql:///kforge");
}

char *kfc_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, have = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + have, 1, cap - have - 1, f);
        have += got;
        if (got == 0)
            break;
        if (cap - have - 1 == 0) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (buf == NULL || bad) {
        free(buf);
        return NULL;
    }
    buf[have] = '\0';
    if (len)
        *len = have;
    return buf;
}

int kfc_write_file(const char *path, const char *text, int mode) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0) {
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)w;
    }
    if (fchmod(fd, (mode_t)mode) != 0 || close(fd) != 0)
        return -1;
    return rename(tmp, path);
}

static size_t collect(char *p, size_t size, size_t nmemb, void *arg) {
    size_t n = size * nmemb;
    return kf_buf_append(arg, p, n) ? n : 0;
}

long kfc_http(const char *method, const char *url, const char *key, const char *body, char **resp,
              long timeout_s, bool quiet) {
    CURL *c = curl_easy_init();
    if (c == NULL)
        return -1;
    struct kf_buf b = {0};
    struct curl_slist *h = NULL;
    char auth[256];
    if (key) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
    }
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    long status = -1;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else if (!quiet)
        fprintf(stderr, "kforge: %s %s: %s\n", method, url, curl_easy_strerror(rc));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (resp && status >= 0)
        *resp = b.data ? b.data : strdup("");
    else
        free(b.data);
    return status;
}

int kfc_free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

bool kfc_port_free(int port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || port <= 0 || port > 65535) {
        if (s >= 0)
            close(s);
        return false;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1; /* as the servers bind: connections in TIME_WAIT do not hold the port */
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    bool ok = bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(s);
    return ok;
}

bool kfc_pid_is(pid_t pid, const char *name) {
    if (pid <= 0 || kill(pid, 0) != 0)
        return false;
    char path[64], exe[PATH_MAX];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    size_t n = fread(exe, 1, sizeof(exe) - 1, f);
    fclose(f);
    exe[n] = '\0';               /* the first argument: NUL-terminated in cmdline */
    char *sp = strchr(exe, ' '); /* redis-server rewrites its title: "redis-server 127..." */
    if (sp)
        *sp = '\0';
    size_t el = strlen(exe), nl = strlen(name);
    return el >= nl && strcmp(exe + el - nl, name) == 0;
}

pid_t kfc_read_pid(const char *path) {
    char *t = kfc_read_file(path, NULL);
    if (t == NULL)
        return -1;
    long p = strtol(t, NULL, 10);
    free(t);
    return p > 0 ? (pid_t)p : -1;
}

const char *kfc_pg_user(void) {
    if (geteuid() != 0)
        return NULL;
    /* initdb refuses root: Debian's postgres user, else nobody (a host without PostgreSQL's
     * package, such as a GPU host running the bundle) */
    return getpwnam("postgres") != NULL ? "postgres" : "nobody";
}

/* the child side of kfc_run: becomes as_user (no runuser needed: the bundle's hosts may lack
 * it) and runs argv; never returns */
static void run_child(const char *as_user, const char *const argv[], const char *log) {
    if (log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
    }
    if (as_user) {
        struct passwd *pw = getpwnam(as_user);
        if (pw == NULL || setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 ||
            setuid(pw->pw_uid) != 0) {
            fprintf(stderr, "kforge: cannot become %s: %s\n", as_user,
                    pw ? strerror(errno) : "no such user");
            _exit(127);
        }
        setenv("HOME", pw->pw_dir, 1);
        setenv("USER", as_user, 1);
    }
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "kforge: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int kfc_run(const char *as_user, const char *const argv[], const char *log) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        run_child(as_user, argv, log);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void kfc_pg_bindir(char *out, size_t n) {
    const char *env = getenv("KFORGE_PG_BIN");
    if (env && env[0]) {
        snprintf(out, n, "%s", env);
        return;
    }
    out[0] = '\0';
    FILE *p = popen("pg_config --bindir 2>/dev/null", "r");
    if (p) {
        if (fgets(out, (int)n, p) == NULL)
            out[0] = '\0';
        pclose(p);
    }
    out[strcspn(out, "\n")] = '\0';
}
