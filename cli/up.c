/* up.c: `kforge up [--var DIR] [--port N] [--cpu [--cpu-workers N] | --gpus 0,1] [--slots N]
 * [--pg-listen ADDRESSES]`, the local stack under var/ (services.c has its layout and how it is
 * locked down): PostgreSQL (var/pg, its socket in var/run/pg, a password for every connection),
 * Redis (127.0.0.1, a password), var/api-key (a key named "local"), then kforge-server and the
 * workers (--slots per GPU that `nvidia-smi -L` lists, else --cpu-workers cpu workers, 1 by
 * default: more share the cores and disturb each other's timings) in the background, each with
 * its log in var/log/NAME.log and its pid in var/run/NAME.pid; waits for /readyz, writes
 * var/stack.env and prints the URL.
 *
 * Run again, it starts whatever of the stack is not running (PostgreSQL, Redis, the server, a
 * worker whose pid file names a dead process) and leaves the rest alone; a worker set given on
 * the command line is added to the one that var/run records. */
#include "cli.h"

#include <dirent.h>
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

#define MAX_GPUS 64
#define MAX_WORKERS 256

/* A worker of the stack: its name (the pid and log files') and its GPU, -1 for a cpu one. */
struct wspec {
    char name[48];
    int gpu;
};

struct up {
    char var[PATH_MAX], root[PATH_MAX], pgbin[PATH_MAX], redis[PATH_MAX];
    long port;       /* the server's, 0: a free one */
    bool port_given; /* --port on the command line (else the last run's port is kept) */
    bool cpu;
    bool workers_given; /* --cpu, --gpus, --slots or --cpu-workers on the command line */
    int gpus[MAX_GPUS], ngpus;
    int slots;       /* workers per GPU: builds overlap, the GPU lock lets one at a time time */
    int cpu_workers; /* without a GPU: cpu workers (separate processes, names worker-cpu[-K]) */
    const char *pg_listen; /* --pg-listen: PostgreSQL's TCP addresses, NULL: none */
    struct kfc_services svc;
    char prev_url[256]; /* the last run's server URL (stack.env), "" when none */
    char url[256];
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

static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse(struct up *u, int argc, char **argv) {
    const char *var = NULL;
    long v;
    u->port = 8080;
    u->slots = 2;
    u->cpu_workers = 1;
    for (int i = 1; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--var") == 0 && next) {
            var = argv[++i];
        } else if (strcmp(argv[i], "--port") == 0 && next) {
            if (parse_int(argv[++i], 0, 65535, &u->port) != 0)
                return -1;
            u->port_given = true;
        } else if (strcmp(argv[i], "--slots") == 0 && next) {
            if (parse_int(argv[++i], 1, 16, &v) != 0)
                return -1;
            u->slots = (int)v;
            u->workers_given = true;
        } else if (strcmp(argv[i], "--cpu-workers") == 0 && next) {
            if (parse_int(argv[++i], 1, 16, &v) != 0)
                return -1;
            u->cpu_workers = (int)v;
            u->workers_given = true;
        } else if (strcmp(argv[i], "--cpu") == 0) {
            u->cpu = u->workers_given = true;
        } else if (strcmp(argv[i], "--pg-listen") == 0 && next) {
            u->pg_listen = argv[++i];
            if (strpbrk(u->pg_listen, "'\"\\ ;") != NULL) /* it goes through pg_ctl's shell */
                return -1;
        } else if (strcmp(argv[i], "--gpus") == 0 && next) {
            char *s = argv[++i], *end;
            while (*s && u->ngpus < MAX_GPUS) {
                u->gpus[u->ngpus++] = (int)strtol(s, &end, 10);
                if (end == s || (*end && *end != ','))
                    return -1;
                s = *end ? end + 1 : end;
            }
            u->workers_given = true;
        } else {
            return -1;
        }
    }
    kfc_var_dir(var, u->var, sizeof(u->var));
    return u->cpu && u->ngpus ? -1 : 0;
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
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
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

/* Waits up to 30 s for /readyz 200 (PostgreSQL, Redis, and a live worker for each class);
 * else prints its last answer. */
static int wait_ready(const struct up *u) {
    char ready[300], *body = NULL;
    snprintf(ready, sizeof(ready), "%s/readyz", u->url);
    long code = -1;
    for (int i = 0; i < 150; i++) {
        free(body);
        body = NULL;
        if ((code = kfc_http("GET", ready, NULL, NULL, &body, 2, true)) == 200) {
            free(body);
            return 0;
        }
        sleep_ms(200);
    }
    fprintf(stderr, "kforge up: %s never answered 200 (last: %ld %s)\n", ready, code,
            body ? body : "");
    free(body);
    return -1;
}

static bool add_worker(struct wspec *w, int *n, const char *name, int gpu) {
    for (int i = 0; i < *n; i++) {
        if (strcmp(w[i].name, name) == 0)
            return true;
    }
    if (*n >= MAX_WORKERS)
        return false;
    snprintf(w[*n].name, sizeof(w[*n].name), "%s", name);
    w[(*n)++].gpu = gpu;
    return true;
}

/* The workers var/run records (worker-cpu[-K].pid, worker-gpuN[-K].pid), into w. */
static void recorded_workers(const struct up *u, struct wspec *w, int *n) {
    char dir[PATH_MAX + 8];
    path(dir, sizeof(dir), u, "run");
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char name[48];
        size_t len = strlen(e->d_name);
        int gpu, k;
        if (len < 5 || len >= sizeof(name) + 4 || strcmp(e->d_name + len - 4, ".pid") != 0)
            continue;
        snprintf(name, sizeof(name), "%.*s", (int)(len - 4), e->d_name);
        if (strcmp(name, "worker-cpu") == 0 || sscanf(name, "worker-cpu-%d", &k) == 1)
            add_worker(w, n, name, -1);
        else if (sscanf(name, "worker-gpu%d", &gpu) == 1 && gpu >= 0)
            add_worker(w, n, name, gpu);
    }
    if (d)
        closedir(d);
}

/* The stack's workers: the ones var/run records, plus the command line's (or, on a first run,
 * the default: --slots per detected GPU, else --cpu-workers cpu workers). */
static int worker_set(struct up *u, struct wspec *w) {
    int n = 0;
    recorded_workers(u, w, &n);
    if (n > 0 && !u->workers_given)
        return n;
    if (!u->cpu && u->ngpus == 0)
        u->ngpus = detect_gpus(u->gpus, MAX_GPUS);
    char name[48];
    for (int k = 0; u->ngpus == 0 && k < u->cpu_workers; k++) {
        snprintf(name, sizeof(name), k ? "worker-cpu-%d" : "worker-cpu", k);
        add_worker(w, &n, name, -1);
    }
    for (int i = 0; i < u->ngpus; i++) {
        for (int k = 0; k < u->slots; k++) {
            snprintf(name, sizeof(name), k ? "worker-gpu%d-%d" : "worker-gpu%d", u->gpus[i], k);
            add_worker(w, &n, name, u->gpus[i]);
        }
    }
    return n;
}

/* The server: kept when its pid file names a live kforge-server that answers /healthz on the
 * last run's URL, else (re)started. */
static int ensure_server(struct up *u, const char *bin) {
    char pidf[PATH_MAX + 64], server[PATH_MAX + 64], port[16], log[PATH_MAX + 64], probe[300];
    path(pidf, sizeof(pidf), u, "run/server.pid");
    pid_t pid = kfc_read_pid(pidf);
    bool alive = kfc_pid_is(pid, "kforge-server");
    snprintf(probe, sizeof(probe), "%s/healthz", u->prev_url);
    if (alive && u->prev_url[0] && kfc_http("GET", probe, NULL, NULL, NULL, 3, true) == 200) {
        snprintf(u->url, sizeof(u->url), "%s", u->prev_url);
        return 0;
    }
    if (alive) {
        fprintf(stderr, "kforge up: kforge-server (pid %d) does not answer: restarting it\n",
                (int)pid);
        kill(pid, SIGTERM);
        for (int i = 0; i < 100 && kfc_pid_is(pid, "kforge-server"); i++)
            sleep_ms(100);
        if (kfc_pid_is(pid, "kforge-server"))
            kill(pid, SIGKILL);
    } else if (pid > 0) {
        fprintf(stderr, "kforge up: kforge-server (pid %d) was not running: starting it\n",
                (int)pid);
    }
    long p = u->port;
    const char *colon = u->port_given || !u->prev_url[0] ? NULL : strrchr(u->prev_url, ':');
    if (colon && colon[1] >= '0' && colon[1] <= '9')
        p = strtol(colon + 1, NULL, 10); /* the last run's port: its URL stays the same */
    snprintf(server, sizeof(server), "%s/kforge-server", bin);
    snprintf(port, sizeof(port), "%ld", p);
    const char *sa[] = {server, "--port", port, NULL};
    struct stat st;
    path(log, sizeof(log), u, "log/server.log");
    size_t offset = stat(log, &st) == 0 ? (size_t)st.st_size : 0;
    pid_t sp = spawn(u, "server", sa);
    return sp < 0 ? -1 : wait_server(u, sp, offset);
}

/* true when /metrics (text) lists a live worker whose name holds ":PID:" (host:pid:class, the
 * default name). */
static bool beats(const char *text, pid_t pid) {
    char tag[32];
    snprintf(tag, sizeof(tag), ":%d:", (int)pid);
    for (const char *at = strstr(text, "kforge_worker_up{"); at;
         at = strstr(at + 1, "kforge_worker_up{")) {
        const char *end = strchr(at, '}');
        const char *hit = strstr(at, tag);
        if (end && hit && hit < end)
            return true;
    }
    return false;
}

/* Waits up to 60 s until each worker (pids[i], names[i]) has a live heartbeat: a new one can
 * reach PostgreSQL and Redis, its passwords included; a running one has beaten into a Redis
 * that started again. -1 naming the first that died or stays silent. Skipped where
 * KFORGE_WORKER_NAME names the workers without their pid. */
static int wait_heartbeats(const struct up *u, const pid_t *pids, const char *const *names, int n) {
    const char *fixed = getenv("KFORGE_WORKER_NAME");
    char metrics[300];
    snprintf(metrics, sizeof(metrics), "%s/metrics", u->url);
    for (int i = 0, tries = 0; i < n && !(fixed && fixed[0]);) {
        char *body = NULL;
        bool ok = kfc_http("GET", metrics, NULL, NULL, &body, 5, true) == 200 && body &&
                  beats(body, pids[i]);
        free(body);
        if (ok) {
            i++;
            continue;
        }
        int st; /* our child (it may not have exec'd yet), or a worker of an earlier run */
        pid_t r = waitpid(pids[i], &st, WNOHANG);
        bool died = r == pids[i] || (r < 0 && !kfc_pid_is(pids[i], "kforge-worker"));
        if (died || ++tries > 300) {
            fprintf(stderr, "kforge up: %s (pid %d) %s (see %s/log/%s.log)\n", names[i],
                    (int)pids[i], died ? "exited" : "sent no heartbeat in 60 s", u->var, names[i]);
            return -1;
        }
        sleep_ms(200);
    }
    return 0;
}

/* The server and every worker of worker_set, started where not running. restart: stop them
 * first (the URLs of PostgreSQL or Redis changed, and they read them once). */
static int ensure_programs(struct up *u, bool restart) {
    char worker[PATH_MAX + 64], bin[PATH_MAX], jail[PATH_MAX + 64];
    kfc_bin_dir(bin, sizeof(bin));
    snprintf(worker, sizeof(worker), "%s/kforge-worker", bin);
    setenv("KFORGE_DATABASE_URL", u->svc.db_url, 1);
    setenv("KFORGE_REDIS_URL", u->svc.redis_url, 1);
    setenv("KFORGE_VAR", u->var, 1);
    snprintf(jail, sizeof(jail), "%s/kforge-jail", bin);
    if (getenv("KFORGE_JAIL") == NULL && access(jail, X_OK) != 0) {
        fprintf(stderr, "kforge up: no %s: the workers run candidates without the jail\n", jail);
        setenv("KFORGE_JAIL", "", 1);
    }
    if (restart)
        kfc_programs_stop(u->var, true);
    if (ensure_server(u, bin) != 0)
        return -1;
    static struct wspec w[MAX_WORKERS];
    pid_t started[MAX_WORKERS]; /* every worker of the set, running or started now */
    const char *names[MAX_WORKERS];
    int n = worker_set(u, w), nstarted = 0;
    for (int i = 0; i < n; i++) {
        char pidf[PATH_MAX + 64], gpu[16];
        if (snprintf(pidf, sizeof(pidf), "%s/run/%s.pid", u->var, w[i].name) >= (int)sizeof(pidf))
            return -1;
        pid_t pid = kfc_read_pid(pidf);
        names[nstarted] = w[i].name;
        if (kfc_pid_is(pid, "kforge-worker")) {
            started[nstarted++] = pid;
            continue;
        }
        if (pid > 0)
            fprintf(stderr, "kforge up: %s (pid %d) was not running: starting it\n", w[i].name,
                    (int)pid);
        snprintf(gpu, sizeof(gpu), "%d", w[i].gpu);
        const char *cpu_args[] = {worker, "--cpu", NULL};
        const char *gpu_args[] = {worker, "--gpu", gpu, NULL};
        if ((started[nstarted++] = spawn(u, w[i].name, w[i].gpu < 0 ? cpu_args : gpu_args)) < 0)
            return -1;
    }
    return wait_ready(u) == 0 && wait_heartbeats(u, started, names, nstarted) == 0 ? 0 : -1;
}

/* var/api-key: kept while the database knows it, else a new key named "local". */
static int ensure_key(const struct up *u) {
    char file[PATH_MAX + 64], key[64];
    path(file, sizeof(file), u, "api-key");
    char *old = kfc_read_file(file, NULL);
    if (old) {
        old[strcspn(old, "\r\n")] = '\0';
        bool ok = kfc_key_active(u->svc.db_url, old);
        free(old);
        if (ok)
            return 0;
    }
    if (kfc_key_create(u->svc.db_url, "local", key) != 0)
        return -1;
    char text[80];
    snprintf(text, sizeof(text), "%s\n", key);
    return kfc_write_file(file, text, 0600);
}

/* The number after tag in the last run's stack.env value of key; 0 when absent. */
static int last_port(const struct up *u, const char *key, const char *tag) {
    char value[2 * PATH_MAX + 128];
    if (!kfc_stack_get(u->var, key, value, sizeof(value)))
        return 0;
    const char *at = strstr(value, tag);
    long p = at ? strtol(at + strlen(tag), NULL, 10) : 0;
    return p > 0 && p <= 65535 ? (int)p : 0;
}

/* An older kforge's var/ (a cluster but no secrets/): its stack used trusting rules and
 * other sockets, so all of it stops before var/ is locked down and started again. true when
 * var/ was such a one. */
static bool stop_older(const struct up *u) {
    char version[PATH_MAX + 64], secrets[PATH_MAX + 64];
    path(version, sizeof(version), u, "pg/PG_VERSION");
    path(secrets, sizeof(secrets), u, "secrets");
    if (access(version, F_OK) != 0 || access(secrets, F_OK) == 0)
        return false;
    fprintf(stderr,
            "kforge up: %s is an older kforge's (no passwords): stopping its stack to lock it "
            "down\n",
            u->var);
    kfc_stack_stop(u->var, u->pgbin, true);
    return true;
}

static int write_stack_env(const struct up *u) {
    char envf[PATH_MAX + 64], text[6 * PATH_MAX];
    int len =
        snprintf(text, sizeof(text),
                 "KFORGE_URL=%s\nKFORGE_DATABASE_URL=%s\nKFORGE_REDIS_URL=%s\nKFORGE_VAR=%s\n",
                 u->url, u->svc.db_url, u->svc.redis_url, u->var);
    path(envf, sizeof(envf), u, "stack.env");
    if (len >= (int)sizeof(text) || kfc_write_file(envf, text, 0600) != 0) {
        fprintf(stderr, "kforge up: %s: %s\n", envf, strerror(errno));
        return -1;
    }
    return 0;
}

int kfc_up_main(int argc, char **argv) {
    static struct up u;
    memset(&u, 0, sizeof(u));
    if (parse(&u, argc, argv) != 0) {
        fprintf(stderr,
                "usage: kforge up [--var DIR] [--port N] [--cpu [--cpu-workers N] | --gpus 0,1] "
                "[--slots N] [--pg-listen ADDRESSES]\n");
        return 2;
    }
    kfc_repo_root(u.root, sizeof(u.root));
    kfc_pg_bindir(u.pgbin, sizeof(u.pgbin));
    const char *redis = getenv("KFORGE_REDIS_BIN");
    snprintf(u.redis, sizeof(u.redis), "%s", redis && redis[0] ? redis : "redis-server");
    const char *pg_user = kfc_pg_user();
    if (pg_user && getpwnam(pg_user) == NULL) {
        fprintf(stderr, "kforge up: running as root needs a `postgres` or `nobody` user\n");
        return 1;
    }
    if (pg_user && strcmp(pg_user, "nobody") == 0)
        fprintf(stderr, "kforge up: no `postgres` user: PostgreSQL runs as nobody, whose other "
                        "processes could read its files (add a postgres user to avoid it)\n");
    bool older = stop_older(&u);
    if (kfc_var_lockdown(u.var, pg_user) != 0)
        return 1;
    if (!kfc_stack_get(u.var, "KFORGE_URL", u.prev_url, sizeof(u.prev_url)))
        u.prev_url[0] = '\0';
    u.svc = (struct kfc_services){.var = u.var,
                                  .pgbin = u.pgbin,
                                  .redis_bin = u.redis,
                                  .pg_user = pg_user,
                                  .pg_listen = u.pg_listen,
                                  .pg_port = last_port(&u, "KFORGE_DATABASE_URL", "port="),
                                  .redis_port = last_port(&u, "KFORGE_REDIS_URL", "127.0.0.1:")};
    int pg_was = u.svc.pg_port, redis_was = u.svc.redis_port;
    bool pg_started = false, redis_started = false;
    if (kfc_pg_ensure(&u.svc, &pg_started) != 0 || kfc_redis_ensure(&u.svc, &redis_started) != 0 ||
        ensure_key(&u) != 0)
        goto fail;
    if (pg_started && pg_was && !older)
        fprintf(stderr, "kforge up: PostgreSQL was not running: started it\n");
    if (redis_started && redis_was && !older)
        fprintf(stderr, "kforge up: Redis was not running: started it on port %d\n",
                u.svc.redis_port);
    bool moved = u.svc.pg_port != pg_was || u.svc.redis_port != redis_was;
    if (ensure_programs(&u, moved) != 0)
        goto fail;
    if (write_stack_env(&u) != 0)
        return 1;
    printf("%s\n", u.url);
    return 0;
fail:
    fprintf(stderr, "kforge up: failed; `kforge down --var %s` stops what started\n", u.var);
    return 1;
}
