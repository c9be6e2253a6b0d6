/* up.c: `kforge up [--var DIR] [--port N] [--cpu [--cpu-workers N] | --gpus 0,1] [--slots N]`,
 * the local stack under
 * var/: var/pg       PostgreSQL's data (initdb once; as root it belongs to `postgres`) var/run its
 * socket, and the pid files of everything var/redis    Redis's folder; var/log/NAME.log every
 * program's log var/stack.env, var/api-key (mode 600, a key named "local") then kforge-server and
 * the workers (--slots per GPU that `nvidia-smi -L` lists, else --cpu-workers cpu workers, 1 by
 * default: more share the cores and disturb each other's timings) in the background, and
 * waits for /readyz. Running it again while the stack is up prints the URL and does nothing. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "queue.h"

#define MAX_GPUS 64

struct up {
    char var[PATH_MAX], root[PATH_MAX], pgbin[PATH_MAX], redis[PATH_MAX];
    const char *as_user; /* "postgres" when root */
    long port;           /* the server's, 0: a free one */
    bool cpu;
    int gpus[MAX_GPUS], ngpus;
    int slots;       /* workers per GPU: builds overlap, the GPU lock lets one at a time time */
    int cpu_workers; /* without a GPU: cpu workers (separate processes, names worker-cpu[-K]) */
    int pg_port, redis_port;
    char db_url[PATH_MAX + 128], redis_url[128], url[256];
};

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* var/REL into out (cut to "" when too long: the calls that use it then fail). */
static void path(char *out, size_t n, const struct up *u, const char *rel) {
    if (snprintf(out, n, "%s/%s", u->var, rel) >= (int)n)
        out[0] = '\0';
}

/* GPUs from `nvidia-smi -L` ("GPU 0: ..."); 0 when there is none or no nvidia-smi. */
static int detect_gpus(int *out, int max) {
    FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
    if (p == NULL)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), p) && n < max) {
        int id;
        if (sscanf(line, "GPU %d:", &id) == 1)
            out[n++] = id;
    }
    pclose(p);
    return n;
}

static int parse(struct up *u, int argc, char **argv) {
    const char *var = NULL;
    u->port = 8080;
    u->slots = 2;
    u->cpu_workers = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--var") == 0 && i + 1 < argc) {
            var = argv[++i];
        } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            u->port = strtol(argv[++i], &end, 10);
            if (*end || u->port < 0 || u->port > 65535)
                return -1;
        } else if (strcmp(argv[i], "--slots") == 0 && i + 1 < argc) {
            char *end;
            u->slots = (int)strtol(argv[++i], &end, 10);
            if (*end || u->slots < 1 || u->slots > 16)
                return -1;
        } else if (strcmp(argv[i], "--cpu-workers") == 0 && i + 1 < argc) {
            char *end;
            u->cpu_workers = (int)strtol(argv[++i], &end, 10);
            if (*end || u->cpu_workers < 1 || u->cpu_workers > 16)
                return -1;
        } else if (strcmp(argv[i], "--cpu") == 0) {
            u->cpu = true;
        } else if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
            char *s = argv[++i], *end;
            while (*s && u->ngpus < MAX_GPUS) {
                u->gpus[u->ngpus++] = (int)strtol(s, &end, 10);
                if (end == s || (*end && *end != ','))
                    return -1;
                s = *end ? end + 1 : end;
            }
        } else {
            return -1;
        }
    }
    kfc_var_dir(var, u->var, sizeof(u->var));
    return u->cpu && u->ngpus ? -1 : 0;
}

static int mkdir_owned(const struct up *u, const char *rel, const struct passwd *pw) {
    char p[PATH_MAX + 64];
    path(p, sizeof(p), u, rel);
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "kforge up: %s: %s\n", p, strerror(errno));
        return -1;
    }
    if (pw && chown(p, pw->pw_uid, pw->pw_gid) != 0) {
        fprintf(stderr, "kforge up: chown %s: %s\n", p, strerror(errno));
        return -1;
    }
    return 0;
}

/* initdb (once), pg_ctl start on a free port with the socket in var/run, database kforge. */
static int start_pg(struct up *u) {
    char data[PATH_MAX + 64], run[PATH_MAX + 64], log[PATH_MAX + 64], bin[PATH_MAX + 64];
    char opts[PATH_MAX + 128], version[PATH_MAX + 64], plog[PATH_MAX + 64];
    path(data, sizeof(data), u, "pg");
    path(run, sizeof(run), u, "run");
    path(log, sizeof(log), u, "log/postgres.log");
    path(plog, sizeof(plog), u, "log/up.log");
    path(version, sizeof(version), u, "pg/PG_VERSION");
    if (access(version, F_OK) != 0) {
        snprintf(bin, sizeof(bin), "%s/initdb", u->pgbin);
        const char *a[] = {bin,     "-D", data,   "-U",          "kforge", "-A",
                           "trust", "-E", "UTF8", "--no-locale", NULL};
        if (kfc_run(u->as_user, a, plog) != 0) {
            fprintf(stderr, "kforge up: initdb failed (see %s)\n", plog);
            return -1;
        }
    }
    u->pg_port = kfc_free_port();
    snprintf(opts, sizeof(opts), "-p %d -k %s -c listen_addresses=''", u->pg_port, run);
    snprintf(bin, sizeof(bin), "%s/pg_ctl", u->pgbin);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    struct passwd *pw = u->as_user ? getpwnam(u->as_user) : NULL;
    if (fd >= 0) {
        if (pw && fchown(fd, pw->pw_uid, pw->pw_gid) != 0)
            fprintf(stderr, "kforge up: chown %s: %s\n", log, strerror(errno));
        close(fd);
    }
    const char *a[] = {bin, "-D", data, "-l", log, "-o", opts, "-w", "-t", "60", "start", NULL};
    if (kfc_run(u->as_user, a, plog) != 0) {
        fprintf(stderr, "kforge up: PostgreSQL did not start (see %s)\n", log);
        return -1;
    }
    char admin[PATH_MAX + 128], err[256];
    snprintf(admin, sizeof(admin), "postgresql:///postgres?host=%s&port=%d&user=kforge", run,
             u->pg_port);
    snprintf(u->db_url, sizeof(u->db_url), "postgresql:///kforge?host=%s&port=%d&user=kforge", run,
             u->pg_port);
    struct kf_db *db = kf_db_open(admin, NULL, 0, err, sizeof(err));
    if (db == NULL) {
        fprintf(stderr, "kforge up: %s\n", err);
        return -1;
    }
    PGresult *r = kf_db_exec_sql(db, "SELECT 1 FROM pg_database WHERE datname = 'kforge'");
    bool have = r && PQntuples(r) == 1;
    if (r)
        PQclear(r);
    if (!have && (r = kf_db_exec_sql(db, "CREATE DATABASE kforge")) == NULL) {
        fprintf(stderr, "kforge up: CREATE DATABASE: %s\n", kf_db_error(db));
        kf_db_close(db);
        return -1;
    }
    if (!have)
        PQclear(r);
    kf_db_close(db);
    return kfc_migrate(u->db_url, NULL, true);
}

static int start_redis(struct up *u) {
    char dir[PATH_MAX + 64], pid[PATH_MAX + 64], log[PATH_MAX + 64], port[16], err[256];
    path(dir, sizeof(dir), u, "redis");
    path(pid, sizeof(pid), u, "run/redis.pid");
    path(log, sizeof(log), u, "log/redis.log");
    u->redis_port = kfc_free_port();
    snprintf(port, sizeof(port), "%d", u->redis_port);
    const char *a[] = {u->redis, "--port",      port,  "--bind",       "127.0.0.1", "--dir",
                       dir,      "--daemonize", "yes", "--pidfile",    pid,         "--logfile",
                       log,      "--save",      "",    "--appendonly", "no",        NULL};
    if (kfc_run(NULL, a, NULL) != 0) {
        fprintf(stderr, "kforge up: redis-server did not start (see %s)\n", log);
        return -1;
    }
    snprintf(u->redis_url, sizeof(u->redis_url), "redis://127.0.0.1:%d", u->redis_port);
    for (int i = 0; i < 50; i++) {
        struct kf_queue *q = kf_queue_open(u->redis_url, 1000, err, sizeof(err));
        if (q && kf_queue_ping(q) == 0) {
            kf_queue_close(q);
            return 0;
        }
        if (q)
            kf_queue_close(q);
        sleep_ms(100);
    }
    fprintf(stderr, "kforge up: redis does not answer: %s\n", err);
    return -1;
}

/* Starts a program of build/ in the background (own session, cwd = the repository root),
 * output to var/log/NAME.log, pid to var/run/NAME.pid. */
static pid_t spawn(const struct up *u, const char *name, const char *const argv[]) {
    char log[PATH_MAX + 64], pidf[PATH_MAX + 64], rel[128];
    snprintf(rel, sizeof(rel), "log/%s.log", name);
    path(log, sizeof(log), u, rel);
    snprintf(rel, sizeof(rel), "run/%s.pid", name);
    path(pidf, sizeof(pidf), u, rel);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setsid();
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (fd < 0 || in < 0 || chdir(u->root) != 0)
            _exit(127);
        dup2(in, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "kforge up: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    char text[32];
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    kfc_write_file(pidf, text, 0644);
    return pid;
}

/* Waits for "kforge-server: listening on URL" in its log past offset (the log's size before
 * this start); the URL into u->url. */
static int wait_server(struct up *u, pid_t pid, size_t offset) {
    char log[PATH_MAX + 64];
    path(log, sizeof(log), u, "log/server.log");
    for (int i = 0; i < 300; i++) {
        size_t len = 0;
        char *text = kfc_read_file(log, &len);
        const char *tag = "kforge-server: listening on ";
        char *at = text && len > offset ? strstr(text + offset, tag) : NULL;
        if (at) {
            at += strlen(tag);
            at[strcspn(at, "\r\n")] = '\0';
            snprintf(u->url, sizeof(u->url), "%s", at);
            free(text);
            return 0;
        }
        free(text);
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            break; /* it exited */
        sleep_ms(100);
    }
    fprintf(stderr, "kforge up: kforge-server did not start (see %s)\n", log);
    return -1;
}

static int wait_ready(const struct up *u) {
    char ready[300];
    snprintf(ready, sizeof(ready), "%s/readyz", u->url);
    for (int i = 0; i < 100; i++) {
        if (kfc_http("GET", ready, NULL, NULL, NULL, 2, true) == 200)
            return 0;
        sleep_ms(200);
    }
    fprintf(stderr, "kforge up: %s never answered 200\n", ready);
    return -1;
}

static int start_programs(struct up *u) {
    char server[PATH_MAX + 64], worker[PATH_MAX + 64], port[16], bin[PATH_MAX];
    kfc_bin_dir(bin, sizeof(bin));
    snprintf(server, sizeof(server), "%s/kforge-server", bin);
    snprintf(worker, sizeof(worker), "%s/kforge-worker", bin);
    snprintf(port, sizeof(port), "%ld", u->port);
    setenv("KFORGE_DATABASE_URL", u->db_url, 1);
    setenv("KFORGE_REDIS_URL", u->redis_url, 1);
    setenv("KFORGE_VAR", u->var, 1);
    char jail[PATH_MAX + 64];
    snprintf(jail, sizeof(jail), "%s/kforge-jail", bin);
    if (getenv("KFORGE_JAIL") == NULL && access(jail, X_OK) != 0) {
        fprintf(stderr, "kforge up: no %s: the workers run candidates without the jail\n", jail);
        setenv("KFORGE_JAIL", "", 1);
    }
    const char *sa[] = {server, "--port", port, NULL};
    char log[PATH_MAX + 64];
    struct stat st;
    path(log, sizeof(log), u, "log/server.log");
    size_t offset = stat(log, &st) == 0 ? (size_t)st.st_size : 0;
    pid_t sp = spawn(u, "server", sa);
    if (sp < 0 || wait_server(u, sp, offset) != 0)
        return -1;
    if (!u->cpu && u->ngpus == 0)
        u->ngpus = detect_gpus(u->gpus, MAX_GPUS);
    for (int k = 0; u->ngpus == 0 && k < u->cpu_workers; k++) {
        char name[48];
        snprintf(name, sizeof(name), k ? "worker-cpu-%d" : "worker-cpu", k);
        const char *wa[] = {worker, "--cpu", NULL};
        if (spawn(u, name, wa) < 0)
            return -1;
    }
    for (int i = 0; i < u->ngpus; i++) {
        for (int k = 0; k < u->slots; k++) {
            char gpu[16], name[48];
            snprintf(gpu, sizeof(gpu), "%d", u->gpus[i]);
            snprintf(name, sizeof(name), k ? "worker-gpu%d-%d" : "worker-gpu%d", u->gpus[i], k);
            const char *wa[] = {worker, "--gpu", gpu, NULL};
            if (spawn(u, name, wa) < 0)
                return -1;
        }
    }
    return wait_ready(u);
}

/* var/api-key: kept while the database knows it, else a new key named "local". */
static int ensure_key(const struct up *u) {
    char file[PATH_MAX + 64], key[64];
    path(file, sizeof(file), u, "api-key");
    char *old = kfc_read_file(file, NULL);
    if (old) {
        old[strcspn(old, "\r\n")] = '\0';
        bool ok = kfc_key_active(u->db_url, old);
        free(old);
        if (ok)
            return 0;
    }
    if (kfc_key_create(u->db_url, "local", key) != 0)
        return -1;
    char text[80];
    snprintf(text, sizeof(text), "%s\n", key);
    return kfc_write_file(file, text, 0600);
}

/* The stack is up when stack.env names a server whose /readyz says 200. */
static bool already_up(const struct up *u, char *url, size_t n) {
    char ready[300];
    if (!kfc_stack_get(u->var, "KFORGE_URL", url, n))
        return false;
    snprintf(ready, sizeof(ready), "%s/readyz", url);
    return kfc_http("GET", ready, NULL, NULL, NULL, 3, true) == 200;
}

int kfc_up_main(int argc, char **argv) {
    static struct up u;
    memset(&u, 0, sizeof(u));
    if (parse(&u, argc, argv) != 0) {
        fprintf(stderr,
                "usage: kforge up [--var DIR] [--port N] [--cpu [--cpu-workers N] | --gpus 0,1] "
                "[--slots N]\n");
        return 2;
    }
    char url[256];
    if (already_up(&u, url, sizeof(url))) {
        printf("%s\n", url);
        return 0;
    }
    kfc_repo_root(u.root, sizeof(u.root));
    kfc_pg_bindir(u.pgbin, sizeof(u.pgbin));
    const char *redis = getenv("KFORGE_REDIS_BIN");
    snprintf(u.redis, sizeof(u.redis), "%s", redis && redis[0] ? redis : "redis-server");
    struct passwd *pw = NULL;
    if (geteuid() == 0) {
        u.as_user = kfc_pg_user();
        if ((pw = getpwnam(u.as_user)) == NULL) {
            fprintf(stderr, "kforge up: running as root needs a `postgres` or `nobody` user\n");
            return 1;
        }
    }
    if (mkdir(u.var, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "kforge up: %s: %s\n", u.var, strerror(errno));
        return 1;
    }
    if (mkdir_owned(&u, "pg", pw) || mkdir_owned(&u, "run", pw) || mkdir_owned(&u, "log", NULL) ||
        mkdir_owned(&u, "redis", NULL))
        return 1;
    kfc_stack_stop(u.var, u.pgbin, true); /* leftovers of a run that failed or crashed */
    char envf[PATH_MAX + 64], text[3 * PATH_MAX];
    if (start_pg(&u) != 0 || start_redis(&u) != 0 || ensure_key(&u) != 0 ||
        start_programs(&u) != 0) {
        fprintf(stderr, "kforge up: failed; `kforge down --var %s` stops what started\n", u.var);
        return 1;
    }
    int len =
        snprintf(text, sizeof(text),
                 "KFORGE_URL=%s\nKFORGE_DATABASE_URL=%s\nKFORGE_REDIS_URL=%s\nKFORGE_VAR=%s\n",
                 u.url, u.db_url, u.redis_url, u.var);
    path(envf, sizeof(envf), &u, "stack.env");
    if (len >= (int)sizeof(text) || kfc_write_file(envf, text, 0644) != 0) {
        fprintf(stderr, "kforge up: %s: %s\n", envf, strerror(errno));
        return 1;
    }
    printf("%s\n", u.url);
    return 0;
}
