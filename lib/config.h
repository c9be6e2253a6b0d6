/* config.h: every setting of kforge in one table (name, type, default, bounds, environment
 * variable, help). Programs fill a struct kf_config from the defaults, then the environment,
 * then their command line (kf_config_set), and pass it down: there is no global copy. */
#ifndef KF_CONFIG_H
#define KF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

enum kf_cfg_type { KF_CFG_STR, KF_CFG_INT, KF_CFG_BOOL, KF_CFG_DOUBLE };

/* The settings. Strings point into storage owned by the struct (kf_config_free frees it). */
struct kf_config {
    char *database_url;         /* KFORGE_DATABASE_URL, libpq conninfo or URI */
    char *redis_url;            /* KFORGE_REDIS_URL, redis://HOST:PORT[/DB] or unix:///PATH */
    char *listen_host;          /* KFORGE_LISTEN_HOST (server) */
    long port;                  /* KFORGE_PORT; 0 picks a free port (printed at start) */
    long threads;               /* KFORGE_THREADS: server worker threads */
    long db_pool;               /* KFORGE_DB_POOL: server database connections */
    long max_body_bytes;        /* KFORGE_MAX_BODY_BYTES */
    long max_files;             /* KFORGE_MAX_FILES: files per candidate */
    long max_file_bytes;        /* KFORGE_MAX_FILE_BYTES: bytes per candidate file */
    long max_source_bytes;      /* KFORGE_MAX_SOURCE_BYTES: a task's source */
    long rate_limit;            /* KFORGE_RATE_LIMIT: writes per key per minute; 0 = none */
    bool public_reads;          /* KFORGE_PUBLIC_READS: GETs of published objects without a key */
    bool keep_alive;            /* KFORGE_KEEP_ALIVE: several requests per connection */
    long quota_active_jobs;     /* KFORGE_QUOTA_ACTIVE_JOBS: queued + running per owner; 0 = none */
    double quota_gpu_s_per_day; /* KFORGE_QUOTA_GPU_S_PER_DAY: per owner, last 24 h; 0 = none */
    long wait_max_s;            /* KFORGE_WAIT_MAX_S: largest "wait" of POST /v1/evaluations */
    long max_streams;           /* KFORGE_MAX_STREAMS: open server-sent event streams */
    long stream_max_s;          /* KFORGE_STREAM_MAX_S: an event stream's longest life */
    long max_streams_per_key;   /* KFORGE_MAX_STREAMS_PER_KEY: open streams of one key */
    long max_streams_anonymous; /* KFORGE_MAX_STREAMS_ANONYMOUS: of all keyless clients */
    long max_connections;       /* KFORGE_MAX_CONNECTIONS: client connections in all */
    long per_client_connections; /* KFORGE_PER_CLIENT_CONNECTIONS: per address; 0 = none */
    long header_timeout_s;       /* KFORGE_HEADER_TIMEOUT_S: until a request's headers end */
    long max_header_bytes;       /* KFORGE_MAX_HEADER_BYTES: request line + headers */
    char *ready_classes;         /* KFORGE_READY_CLASSES: classes /readyz needs ("a,b") */
    long class_forget_s;         /* KFORGE_CLASS_FORGET_S: a registered class's lifetime */
    char *web_dir;               /* KFORGE_WEB_DIR: static files served under / */
    char *default_backend;       /* KFORGE_DEFAULT_BACKEND: cuda or cpu (tasks' check jobs) */
    char *gpu_class;             /* KFORGE_GPU_CLASS: the class a cuda worker serves, e.g. h200 */
    long gpu;                    /* KFORGE_GPU: the worker's GPU index; -1 = cpu backend */
    char *worker_name;           /* KFORGE_WORKER_NAME: consumer name (default host:pid) */
    long lease_s;                /* KFORGE_LEASE_S: a claim's lease */
    long heartbeat_s;            /* KFORGE_HEARTBEAT_S */
    long max_attempts;       /* KFORGE_MAX_ATTEMPTS: infrastructure failures before dead-letter */
    long reconcile_s;        /* KFORGE_RECONCILE_S: the reconciler's period */
    long job_timeout_s;      /* KFORGE_JOB_TIMEOUT_S: wall clock of one harness run */
    long pool_runners;       /* KFORGE_POOL_RUNNERS: warm runners in standby per worker */
    double policy_timeout_s; /* KFORGE_POLICY_TIMEOUT_S: one request to an openai policy */
    long policy_retries;     /* KFORGE_POLICY_RETRIES: after 429, 5xx, timeouts, bad bodies */
    double policy_backoff_s; /* KFORGE_POLICY_BACKOFF_S: the first back-off, then doubled */
    char *python;            /* KFORGE_PYTHON: the interpreter with PyTorch for the harness */
    char *harness_dir;       /* KFORGE_HARNESS_DIR: the folder holding kforge_harness/ */
    char *jail;              /* KFORGE_JAIL: kforge-jail binary; empty = no jail (logged) */
    long disk_mib;           /* KFORGE_DISK_MIB: quota of one jail's writable folder */
    char *var_dir;           /* KFORGE_VAR: workspaces, logs, the local stack's data */
    char *log_level;         /* KFORGE_LOG_LEVEL: debug, info, warn, error */
};

struct kf_cfg_def {
    const char *name; /* the option's name, e.g. "port" (command line: --port) */
    enum kf_cfg_type type;
    const char *def; /* default, as text */
    double min, max; /* bounds for INT and DOUBLE */
    const char *env; /* environment variable */
    size_t offset;   /* into struct kf_config */
    const char *help;
};

/* The table, and its length. */
const struct kf_cfg_def *kf_config_table(size_t *n);

/* Fills *c with the defaults, then the environment. Returns 0, or -1 with a message naming the
 * setting in err (a value out of bounds or of the wrong type). */
int kf_config_load(struct kf_config *c, char *err, size_t errlen);

/* Sets one setting by name from text (the command line). Same errors as kf_config_load. */
int kf_config_set(struct kf_config *c, const char *name, const char *value, char *err,
                  size_t errlen);

/* Frees the strings; *c is then unusable until loaded again. */
void kf_config_free(struct kf_config *c);

#endif
