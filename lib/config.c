/* config.c: the settings table and its loaders (defaults, environment, command line). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OFF(f) offsetof(struct kf_config, f)
#define MIB (1024.0 * 1024.0)

static const struct kf_cfg_def kf_cfg_defs[] = {
    {"database_url", KF_CFG_STR, "postgresql:///kforge", 0, 0, "KFORGE_DATABASE_URL",
     OFF(database_url), "PostgreSQL conninfo or URI"},
    {"redis_url", KF_CFG_STR, "redis://127.0.0.1:6379", 0, 0, "KFORGE_REDIS_URL", OFF(redis_url),
     "redis://HOST:PORT[/DB] or unix:///PATH; ?password_file=PATH sends AUTH"},
    {"listen_host", KF_CFG_STR, "127.0.0.1", 0, 0, "KFORGE_LISTEN_HOST", OFF(listen_host),
     "the server's listening address"},
    {"port", KF_CFG_INT, "8080", 0, 65535, "KFORGE_PORT", OFF(port),
     "the server's port; 0 picks a free one"},
    {"threads", KF_CFG_INT, "8", 1, 1024, "KFORGE_THREADS", OFF(threads), "server worker threads"},
    {"db_pool", KF_CFG_INT, "8", 1, 1024, "KFORGE_DB_POOL", OFF(db_pool),
     "server database connections"},
    {"max_body_bytes", KF_CFG_INT, "4194304", 1024, 1024 * MIB, "KFORGE_MAX_BODY_BYTES",
     OFF(max_body_bytes), "largest request body"},
    {"max_files", KF_CFG_INT, "64", 1, 100000, "KFORGE_MAX_FILES", OFF(max_files),
     "files per candidate"},
    {"max_file_bytes", KF_CFG_INT, "1048576", 1, 1024 * MIB, "KFORGE_MAX_FILE_BYTES",
     OFF(max_file_bytes), "bytes per candidate file"},
    {"max_source_bytes", KF_CFG_INT, "262144", 1, 1024 * MIB, "KFORGE_MAX_SOURCE_BYTES",
     OFF(max_source_bytes), "bytes of a task's source"},
    {"rate_limit", KF_CFG_INT, "600", 0, 1e9, "KFORGE_RATE_LIMIT", OFF(rate_limit),
     "writes per key per minute; 0 = no limit"},
    {"public_reads", KF_CFG_BOOL, "true", 0, 0, "KFORGE_PUBLIC_READS", OFF(public_reads),
     "GETs of published objects (the leaderboard, published episodes) without an API key;"
     " private objects always need their owner's key"},
    {"keep_alive", KF_CFG_BOOL, "false", 0, 0, "KFORGE_KEEP_ALIVE", OFF(keep_alive),
     "whether one connection carries several requests; off (every response says Connection:"
     " close), every request head passes the front door's check, so libmicrohttpd answers none"
     " itself (its refusals are HTML without a request id); on is faster for clients that send"
     " many small requests, and a malformed later head on a kept connection gets its answer"},
    {"quota_active_jobs", KF_CFG_INT, "256", 0, 1e9, "KFORGE_QUOTA_ACTIVE_JOBS",
     OFF(quota_active_jobs), "queued and running jobs per owner; 0 = no limit"},
    {"quota_gpu_s_per_day", KF_CFG_DOUBLE, "86400", 0, 1e12, "KFORGE_QUOTA_GPU_S_PER_DAY",
     OFF(quota_gpu_s_per_day), "judge GPU-seconds per owner over the last 24 hours; 0 = no limit"},
    {"wait_max_s", KF_CFG_INT, "120", 0, 3600, "KFORGE_WAIT_MAX_S", OFF(wait_max_s),
     "largest wait of POST /v1/evaluations"},
    {"max_streams", KF_CFG_INT, "64", 0, 100000, "KFORGE_MAX_STREAMS", OFF(max_streams),
     "open server-sent event streams, all clients together"},
    {"stream_max_s", KF_CFG_INT, "600", 1, 86400, "KFORGE_STREAM_MAX_S", OFF(stream_max_s),
     "an event stream's longest life; the client reconnects with Last-Event-ID"},
    {"max_streams_per_key", KF_CFG_INT, "16", 0, 100000, "KFORGE_MAX_STREAMS_PER_KEY",
     OFF(max_streams_per_key), "open event streams of one API key"},
    {"max_streams_anonymous", KF_CFG_INT, "16", 0, 100000, "KFORGE_MAX_STREAMS_ANONYMOUS",
     OFF(max_streams_anonymous), "open event streams of the clients without a key, together"},
    {"max_connections", KF_CFG_INT, "1024", 16, 1000000, "KFORGE_MAX_CONNECTIONS",
     OFF(max_connections), "open client connections, all clients together"},
    {"per_client_connections", KF_CFG_INT, "128", 0, 1000000, "KFORGE_PER_CLIENT_CONNECTIONS",
     OFF(per_client_connections),
     "open connections of one client address; 0 = no limit (behind a proxy)"},
    {"header_timeout_s", KF_CFG_INT, "10", 1, 3600, "KFORGE_HEADER_TIMEOUT_S",
     OFF(header_timeout_s),
     "from a connection's start (or its previous response) to the end of a request's headers"},
    {"max_header_bytes", KF_CFG_INT, "16384", 1024, 1048576, "KFORGE_MAX_HEADER_BYTES",
     OFF(max_header_bytes), "a request's line and headers together"},
    {"ready_classes", KF_CFG_STR, "", 0, 0, "KFORGE_READY_CLASSES", OFF(ready_classes),
     "job classes /readyz needs a live worker of, besides those workers registered (a,b)"},
    {"class_forget_s", KF_CFG_INT, "86400", 1, 365 * 86400, "KFORGE_CLASS_FORGET_S",
     OFF(class_forget_s), "a class no worker beat for this long is no longer needed by /readyz"},
    {"web_dir", KF_CFG_STR, "web", 0, 0, "KFORGE_WEB_DIR", OFF(web_dir),
     "static files served under /"},
    {"default_backend", KF_CFG_STR, "cpu", 0, 0, "KFORGE_DEFAULT_BACKEND", OFF(default_backend),
     "cuda or cpu"},
    {"gpu_class", KF_CFG_STR, "cuda", 0, 0, "KFORGE_GPU_CLASS", OFF(gpu_class),
     "the class a cuda worker serves"},
    {"gpu", KF_CFG_INT, "-1", -1, 1023, "KFORGE_GPU", OFF(gpu),
     "the worker's GPU index; -1 = cpu backend"},
    {"worker_name", KF_CFG_STR, "", 0, 0, "KFORGE_WORKER_NAME", OFF(worker_name),
     "the worker's consumer name (default host:pid)"},
    {"lease_s", KF_CFG_INT, "60", 1, 86400, "KFORGE_LEASE_S", OFF(lease_s), "a claim's lease"},
    {"heartbeat_s", KF_CFG_INT, "5", 1, 3600, "KFORGE_HEARTBEAT_S", OFF(heartbeat_s),
     "the worker's heartbeat period"},
    {"max_attempts", KF_CFG_INT, "3", 1, 100, "KFORGE_MAX_ATTEMPTS", OFF(max_attempts),
     "infrastructure failures before dead-letter"},
    {"reconcile_s", KF_CFG_INT, "10", 1, 86400, "KFORGE_RECONCILE_S", OFF(reconcile_s),
     "the reconciler's period"},
    {"job_timeout_s", KF_CFG_INT, "1800", 1, 7 * 86400, "KFORGE_JOB_TIMEOUT_S", OFF(job_timeout_s),
     "wall clock of one harness run"},
    {"pool_runners", KF_CFG_INT, "1", 0, 16, "KFORGE_POOL_RUNNERS", OFF(pool_runners),
     "warm runners a worker keeps in standby for its evaluations; 0 = none"},
    {"policy_timeout_s", KF_CFG_DOUBLE, "300", 1, 3600, "KFORGE_POLICY_TIMEOUT_S",
     OFF(policy_timeout_s), "one request to an openai policy endpoint"},
    {"policy_retries", KF_CFG_INT, "4", 0, 100, "KFORGE_POLICY_RETRIES", OFF(policy_retries),
     "retries of a policy request after 429, 5xx, timeouts and bad bodies"},
    {"policy_backoff_s", KF_CFG_DOUBLE, "1", 0.01, 60, "KFORGE_POLICY_BACKOFF_S",
     OFF(policy_backoff_s), "the first back-off between policy retries (then doubled)"},
    {"python", KF_CFG_STR, ".venv/bin/python", 0, 0, "KFORGE_PYTHON", OFF(python),
     "the interpreter with PyTorch for the harness"},
    {"harness_dir", KF_CFG_STR, "workers/harness", 0, 0, "KFORGE_HARNESS_DIR", OFF(harness_dir),
     "the folder holding kforge_harness/"},
    {"jail", KF_CFG_STR, "build/kforge-jail", 0, 0, "KFORGE_JAIL", OFF(jail),
     "kforge-jail binary; empty = no jail"},
    {"disk_mib", KF_CFG_INT, "8192", 16, 1 << 24, "KFORGE_DISK_MIB", OFF(disk_mib),
     "the most one jail's writable folder may hold (a build, a runner, a task, a bash call)"},
    {"var_dir", KF_CFG_STR, "var", 0, 0, "KFORGE_VAR", OFF(var_dir),
     "workspaces, logs, the local stack's data"},
    {"log_level", KF_CFG_STR, "info", 0, 0, "KFORGE_LOG_LEVEL", OFF(log_level),
     "debug, info, warn, error"},
};

#define KF_CFG_N (sizeof(kf_cfg_defs) / sizeof(kf_cfg_defs[0]))

const struct kf_cfg_def *kf_config_table(size_t *n) {
    *n = KF_CFG_N;
    return kf_cfg_defs;
}

static const struct kf_cfg_def *find_def(const char *name) {
    for (size_t i = 0; i < KF_CFG_N; i++) {
        if (strcmp(kf_cfg_defs[i].name, name) == 0)
            return &kf_cfg_defs[i];
    }
    return NULL;
}

static int parse_bool(const char *s, bool *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static int set_str(const struct kf_cfg_def *d, char *base, const char *value, char *err,
                   size_t errlen) {
    char *copy = strdup(value);
    if (copy == NULL) {
        snprintf(err, errlen, "%s: out of memory", d->name);
        return -1;
    }
    char **slot = (char **)(void *)(base + d->offset);
    free(*slot);
    *slot = copy;
    return 0;
}

static int set_int(const struct kf_cfg_def *d, char *base, const char *value, char *err,
                   size_t errlen) {
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0') {
        snprintf(err, errlen, "%s: expected an integer, got \"%s\"", d->name, value);
        return -1;
    }
    if ((double)v < d->min || (double)v > d->max) {
        snprintf(err, errlen, "%s: %ld is out of range [%.0f, %.0f]", d->name, v, d->min, d->max);
        return -1;
    }
    *(long *)(void *)(base + d->offset) = v;
    return 0;
}

static int set_double(const struct kf_cfg_def *d, char *base, const char *value, char *err,
                      size_t errlen) {
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (errno != 0 || end == value || *end != '\0' || !isfinite(v)) {
        snprintf(err, errlen, "%s: expected a number, got \"%s\"", d->name, value);
        return -1;
    }
    if (v < d->min || v > d->max) {
        snprintf(err, errlen, "%s: %g is out of range [%g, %g]", d->name, v, d->min, d->max);
        return -1;
    }
    *(double *)(void *)(base + d->offset) = v;
    return 0;
}

static int set_def(const struct kf_cfg_def *d, struct kf_config *c, const char *value, char *err,
                   size_t errlen) {
    char *base = (char *)c;
    switch (d->type) {
    case KF_CFG_STR:
        return set_str(d, base, value, err, errlen);
    case KF_CFG_INT:
        return set_int(d, base, value, err, errlen);
    case KF_CFG_DOUBLE:
        return set_double(d, base, value, err, errlen);
    case KF_CFG_BOOL:
        if (parse_bool(value, (bool *)(void *)(base + d->offset)) == 0)
            return 0;
        snprintf(err, errlen, "%s: expected true/false, 1/0 or yes/no, got \"%s\"", d->name, value);
        return -1;
    }
    snprintf(err, errlen, "%s: unknown type", d->name);
    return -1;
}

int kf_config_set(struct kf_config *c, const char *name, const char *value, char *err,
                  size_t errlen) {
    const struct kf_cfg_def *d = find_def(name);
    if (d == NULL) {
        snprintf(err, errlen, "%s: no such setting", name);
        return -1;
    }
    if (value == NULL) {
        snprintf(err, errlen, "%s: missing value", name);
        return -1;
    }
    return set_def(d, c, value, err, errlen);
}

int kf_config_load(struct kf_config *c, char *err, size_t errlen) {
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < KF_CFG_N; i++) {
        if (set_def(&kf_cfg_defs[i], c, kf_cfg_defs[i].def, err, errlen) != 0)
            goto fail;
    }
    for (size_t i = 0; i < KF_CFG_N; i++) {
        const char *v = getenv(kf_cfg_defs[i].env);
        if (v == NULL)
            continue;
        if (set_def(&kf_cfg_defs[i], c, v, err, errlen) != 0) {
            size_t len = strlen(err);
            if (len < errlen)
                snprintf(err + len, errlen - len, " (from %s)", kf_cfg_defs[i].env);
            goto fail;
        }
    }
    return 0;
fail:
    kf_config_free(c);
    return -1;
}

void kf_config_free(struct kf_config *c) {
    for (size_t i = 0; i < KF_CFG_N; i++) {
        if (kf_cfg_defs[i].type != KF_CFG_STR)
            continue;
        char **slot = (char **)(void *)((char *)c + kf_cfg_defs[i].offset);
        free(*slot);
        *slot = NULL;
    }
}
