/* main.c: kforge-server. Reads the settings (defaults, environment, then --name value), starts
 * libmicrohttpd on a thread pool, prints "kforge-server: listening on http://HOST:PORT" and
 * waits for SIGTERM/SIGINT; then it stops accepting, finishes the requests and exits 0. */
#include <arpa/inet.h>
#include <libgen.h>
#include <limits.h>
#include <netdb.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_guard.h"
#include "crash.h"
#include "dispatch.h"
#include "liveness.h"
#include "metrics.h"
#include "park.h"
#include "server.h"
#include "slots.h"

static void usage(FILE *out) {
    size_t n = 0;
    const struct kf_cfg_def *defs = kf_config_table(&n);
    fprintf(out, "usage: kforge-server [--host H] [--port N] [--SETTING VALUE]...\nsettings:\n");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  --%-18s %s (%s, default \"%s\")\n", defs[i].name, defs[i].help, defs[i].env,
                defs[i].def);
}

/* --name value, --name=value; "host" is listen_host; dashes may stand for underscores. */
static int parse_args(struct kf_config *cfg, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(argv[i], "--", 2) != 0) {
            fprintf(stderr, "kforge-server: unexpected argument %s\n", argv[i]);
            return -1;
        }
        char name[64];
        const char *value;
        const char *eq = strchr(argv[i], '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - argv[i] - 2), argv[i] + 2);
            value = eq + 1;
        } else {
            if (i + 1 >= argc) {
                fprintf(stderr, "kforge-server: %s needs a value\n", argv[i]);
                return -1;
            }
            snprintf(name, sizeof name, "%s", argv[i] + 2);
            value = argv[++i];
        }
        for (char *p = name; *p; p++)
            if (*p == '-')
                *p = '_';
        if (strcmp(name, "host") == 0)
            snprintf(name, sizeof name, "listen_host");
        char err[256];
        if (kf_config_set(cfg, name, value, err, sizeof err) != 0) {
            fprintf(stderr, "kforge-server: %s\n", err);
            return -1;
        }
    }
    return 0;
}

/* openapi/openapi.yaml beside the build folder holding this binary, if it is there. */
static void find_openapi(struct kf_server *srv) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    srv->openapi_path[0] = '\0';
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *dir = dirname(dirname(exe));
    snprintf(srv->openapi_path, sizeof srv->openapi_path, "%.4000s/openapi/openapi.yaml", dir);
    if (access(srv->openapi_path, R_OK) != 0)
        srv->openapi_path[0] = '\0';
}

/* libmicrohttpd's own messages, as log lines (most are about clients that went away). */
static void mhd_logger(void *cls, const char *fmt, va_list ap) {
    const struct kf_server *srv = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    kf_log(&srv->log, KF_LOG_DEBUG, "microhttpd: %s", msg);
}

/* libmicrohttpd takes its connections from the guard (conn_guard.h), which owns the socket. */
static struct MHD_Daemon *start_daemon(struct kf_server *srv) {
    const struct kf_config *cfg = srv->cfg;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | MHD_USE_TURBO | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    unsigned threads = cfg->threads > 0 ? (unsigned)cfg->threads : 1;
    /* the guard keeps to max_connections; this is a backstop */
    unsigned limit = (unsigned)cfg->max_connections + 64;
    /* room for a head of max_header_bytes, the parsed headers and the reply's headers */
    size_t pool = (size_t)cfg->max_header_bytes * 2 + 16384;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, kf_dispatch, srv, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool < 32768 ? (size_t)32768 : pool,
        MHD_OPTION_NOTIFY_COMPLETED, kf_dispatch_completed, srv, MHD_OPTION_NOTIFY_CONNECTION,
        kf_guard_notify, srv->guard, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, srv, MHD_OPTION_END);
}

/* The guard's socket and settings (the daemon comes next). */
static struct kf_guard *open_guard(struct kf_server *srv, const struct sockaddr_storage *addr) {
    const struct kf_config *cfg = srv->cfg;
    struct kf_guard_settings gs = {
        .max_connections = cfg->max_connections,
        .per_client = cfg->per_client_connections,
        .header_timeout_ms = cfg->header_timeout_s * 1000,
        .max_head = (size_t)cfg->max_header_bytes,
        .max_body = cfg->max_body_bytes,
    };
    socklen_t len =
        addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return kf_guard_open((const struct sockaddr *)addr, len, &gs, &srv->log);
}

/* Room for max_connections descriptors besides the pools' and the files': the soft limit of
 * open files is raised toward the hard one. */
static void raise_nofile(const struct kf_config *cfg) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)cfg->max_connections + 1024;
    if (rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

static int resolve(const char *host, long port, struct sockaddr_storage *out) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%ld", port);
    if (getaddrinfo(host && host[0] ? host : NULL, ps, &hints, &ai) != 0 || !ai)
        return -1;
    memset(out, 0, sizeof *out);
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

int main(int argc, char **argv) {
    kf_crash_install("kforge-server"); /* a fault leaves its call stack in the log */
    struct kf_config cfg;
    char err[256];
    if (kf_config_load(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "kforge-server: %s\n", err);
        return 2;
    }
    if (parse_args(&cfg, argc, argv) != 0) {
        kf_config_free(&cfg);
        return 2;
    }
    /* the signals are taken by sigwait below; the threads created from here inherit the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct kf_server *srv = calloc(1, sizeof *srv);
    struct sockaddr_storage addr;
    int rc = 1;
    if (!srv)
        goto out;
    srv->cfg = &cfg;
    srv->log.min_level = kf_log_parse_level(cfg.log_level);
    atomic_init(&srv->stopping, false);
    kf_dispatch_init(srv);
    find_openapi(srv);
    if (resolve(cfg.listen_host, cfg.port, &addr) != 0) {
        fprintf(stderr, "kforge-server: cannot resolve host %s\n", cfg.listen_host);
        goto out_srv;
    }
    srv->metrics = kf_metrics_new(srv->labels, srv->nlabels);
    srv->park = kf_park_start();
    srv->streams_by = kf_slots_new();
    srv->liveness = kf_liveness_new();
    if (!srv->metrics || !srv->park || !srv->streams_by || !srv->liveness ||
        kf_srv_pools_init(srv) != 0) {
        fprintf(stderr, "kforge-server: out of memory\n");
        goto out_srv;
    }
    raise_nofile(&cfg);
    srv->guard = open_guard(srv, &addr);
    if (!srv->guard) {
        fprintf(stderr, "kforge-server: cannot listen on %s:%ld: %s\n", cfg.listen_host, cfg.port,
                strerror(errno));
        goto out_pools;
    }
    srv->daemon = start_daemon(srv);
    if (!srv->daemon || kf_guard_start(srv->guard, srv->daemon) != 0) {
        fprintf(stderr, "kforge-server: cannot start the HTTP daemon\n");
        if (srv->daemon)
            MHD_stop_daemon(srv->daemon);
        goto out_pools;
    }
    unsigned port = kf_guard_port(srv->guard);
    bool v6 = addr.ss_family == AF_INET6;
    printf("kforge-server: listening on http://%s%s%s:%u\n", v6 ? "[" : "", cfg.listen_host,
           v6 ? "]" : "", port);
    fflush(stdout);
    kf_log(&srv->log, KF_LOG_INFO, "listening on %s:%u threads=%ld db_pool=%ld", cfg.listen_host,
           port, cfg.threads, cfg.db_pool);

    int sig = 0;
    sigwait(&sigs, &sig);
    kf_log(&srv->log, KF_LOG_INFO, "signal %d: stopping", sig);
    atomic_store(&srv->stopping, true);
    kf_guard_stop(srv->guard); /* no new connection; those reading a head are closed */
    kf_park_stop(srv->park);
    kf_log(&srv->log, KF_LOG_DEBUG, "parked connections resumed");
    MHD_stop_daemon(srv->daemon);
    kf_log(&srv->log, KF_LOG_DEBUG, "daemon stopped");
    rc = 0;
out_pools:
    kf_guard_free(srv->guard);
    kf_srv_pools_free(srv);
out_srv:
    kf_park_stop(srv->park);
    kf_park_free(srv->park);
    kf_slots_free(srv->streams_by);
    kf_liveness_free(srv->liveness);
    kf_metrics_free(srv->metrics);
    free(srv);
out:
    kf_log(NULL, KF_LOG_DEBUG, "exit %d", rc);
    kf_config_free(&cfg);
    return rc;
}
