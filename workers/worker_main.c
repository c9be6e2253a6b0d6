/* worker_main.c: kforge-worker's options, settings, identity, signals and main loop.
 *
 *   kforge-worker (--gpu N | --cpu) [--SETTING VALUE ...]
 *
 * One job at a time per worker process; kforge up runs several per GPU, and the harness's GPU
 * lock (--gpu-lock) lets one at a time use the GPU while the others build. SIGTERM/SIGINT stop
 * taking jobs; a running job may finish within ~10 s, else it is handed back (queued again). */
#include "worker.h"

#include <curl/curl.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crash.h"

static void usage(FILE *f) {
    fprintf(f, "usage: kforge-worker (--gpu N | --cpu) [--SETTING VALUE ...]\n"
               "settings (also from the environment):\n");
    size_t n;
    const struct kf_cfg_def *d = kf_config_table(&n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  --%-18s %-24s %s (default \"%s\")\n", d[i].name, d[i].env, d[i].help,
                d[i].def);
}

/* --gpu N, --cpu, --help, and every setting as --name value or --name=value ('-' or '_'). */
static int parse_args(struct kfw *w, int argc, char **argv) {
    char err[256];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--cpu") == 0) {
            w->cfg.gpu = -1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "kforge-worker: unexpected argument %s\n", a);
            return -1;
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof(name)) {
            fprintf(stderr, "kforge-worker: unknown option %s\n", a);
            return -1;
        }
        for (size_t k = 0; k < len; k++)
            name[k] = a[2 + k] == '-' ? '_' : a[2 + k];
        name[len] = '\0';
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            fprintf(stderr, "kforge-worker: %s needs a value\n", a);
            return -1;
        }
        if (kf_config_set(&w->cfg, name, value, err, sizeof(err)) != 0) {
            fprintf(stderr, "kforge-worker: %s\n", err);
            return -1;
        }
    }
    return 0;
}

/* A relative path (with a '/', or any for dirs) made absolute against the current directory,
 * without resolving links (a venv's python is a link that must stay one). */
static int absolutize(char **path, bool dirs_only_with_slash) {
    if ((*path)[0] == '\0' || (*path)[0] == '/')
        return 0;
    if (dirs_only_with_slash && strchr(*path, '/') == NULL)
        return 0; /* "python3": looked up on PATH */
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == NULL)
        return -1;
    const char *rel = *path;
    while (strncmp(rel, "./", 2) == 0)
        rel += 2;
    size_t n = strlen(cwd) + strlen(rel) + 2;
    char *abs = malloc(n);
    if (abs == NULL)
        return -1;
    snprintf(abs, n, "%s/%s", cwd, rel);
    free(*path);
    *path = abs;
    return 0;
}

static int setup_identity(struct kfw *w) {
    if (absolutize(&w->cfg.python, true) || absolutize(&w->cfg.harness_dir, false) ||
        absolutize(&w->cfg.jail, false) || absolutize(&w->cfg.var_dir, false))
        return -1;
    if (gethostname(w->host, sizeof(w->host)) != 0)
        snprintf(w->host, sizeof(w->host), "localhost");
    w->host[sizeof(w->host) - 1] = '\0';
    w->gpu = w->cfg.gpu;
    w->backend = w->gpu >= 0 ? "cuda" : "cpu";
    snprintf(w->klass, sizeof(w->klass), "%s", w->gpu >= 0 ? w->cfg.gpu_class : "cpu");
    kf_queue_stream(w->klass, w->stream, sizeof(w->stream));
    if (w->cfg.worker_name[0])
        snprintf(w->name, sizeof(w->name), "%s", w->cfg.worker_name);
    else if (w->gpu >= 0)
        snprintf(w->name, sizeof(w->name), "%s:%d:gpu%ld", w->host, (int)getpid(), w->gpu);
    else
        snprintf(w->name, sizeof(w->name), "%s:%d:cpu", w->host, (int)getpid());
    w->log.worker = w->name;
    w->log.min_level = kf_log_parse_level(w->cfg.log_level);
    char work[PATH_MAX];
    snprintf(work, sizeof(work), "%s/work", w->cfg.var_dir);
    if ((mkdir(w->cfg.var_dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(work, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "kforge-worker: %s: %s\n", work, strerror(errno));
        return -1;
    }
    return 0;
}

static int init_shared(struct kfw_shared *sh) {
    pthread_condattr_t ca;
    if (pthread_mutex_init(&sh->mu, NULL) != 0 || pthread_condattr_init(&ca) != 0 ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&sh->wake, &ca) != 0)
        return -1;
    pthread_condattr_destroy(&ca);
    return 0;
}

static void set_active(struct kfw *w, const struct kfw_job *job) {
    pthread_mutex_lock(&w->sh.mu);
    w->sh.active = job != NULL;
    snprintf(w->sh.job_id, sizeof(w->sh.job_id), "%s", job ? job->id : "");
    w->sh.attempt = job ? job->attempt : 0;
    w->sh.lost = false;
    w->sh.cancel = false;
    pthread_mutex_unlock(&w->sh.mu);
}

/* Claims and runs jobs until a stop signal. */
static void main_loop(struct kfw *w) {
    while (!kfw_pause(w, 0)) {
        kfw_pool_tend(w);
        struct kfw_job job;
        int r = kfw_claim_next(w, &job, 1000);
        if (r < 0)
            kfw_pause(w, 1000);
        if (r <= 0)
            continue;
        set_active(w, &job);
        struct kfw_run run;
        if (kfw_pause(w, 0)) {
            memset(&run, 0, sizeof(run));
            run.outcome = KFW_HANDBACK;
            snprintf(run.reason, sizeof(run.reason), "the worker stopped");
        } else {
            if (strcmp(job.kind, "optimize") == 0)
                kfw_episode_run(w, &job, &run);
            else
                kfw_job_run(w, &job, &run);
        }
        kfw_job_finish(w, &job, &run);
        set_active(w, NULL);
        if (run.outcome == KFW_INFRA)
            kfw_pause(w, 1000); /* a broken host should not spin through the queue */
        json_decref(run.verdict);
        kfw_job_free(&job);
    }
}

int main(int argc, char **argv) {
    kf_crash_install("kforge-worker"); /* a fault leaves its call stack in the log */
    struct kfw w;
    memset(&w, 0, sizeof(w));
    char err[256];
    curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread: the policy's HTTP client */
    if (kf_config_load(&w.cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "kforge-worker: %s\n", err);
        return 2;
    }
    if (parse_args(&w, argc, argv) != 0 || setup_identity(&w) != 0 || init_shared(&w.sh) != 0)
        return 2;
    /* stop signals are blocked in every thread and polled by the main one (kfw_pause) */
    signal(SIGINT, SIG_DFL); /* blocked below; an inherited SIG_IGN would discard them */
    signal(SIGTERM, SIG_DFL);
    sigemptyset(&w.sigs);
    sigaddset(&w.sigs, SIGTERM);
    sigaddset(&w.sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &w.sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    kf_log(&w.log, KF_LOG_INFO, "starting: class=%s backend=%s stream=%s", w.klass, w.backend,
           w.stream);
    kf_log(&w.log, KF_LOG_INFO, "python=%s harness_dir=%s var_dir=%s", w.cfg.python,
           w.cfg.harness_dir, w.cfg.var_dir);
    if (w.cfg.jail[0])
        kf_log(&w.log, KF_LOG_INFO, "jail=%s", w.cfg.jail);
    else
        kf_log(&w.log, KF_LOG_WARN, "no jail: candidates run unconfined");

    w.db = kfw_db_connect(&w, false);
    w.q = w.db ? kfw_queue_connect(&w, false) : NULL;
    pthread_t hb, rc;
    bool hb_ok = false, rc_ok = false;
    if (w.q) {
        if (kf_queue_ensure_group(w.q, w.stream) != 0)
            kf_log(&w.log, KF_LOG_WARN, "consumer group: %s", kf_queue_error(w.q));
        hb_ok = pthread_create(&hb, NULL, kfw_heartbeat_main, &w) == 0;
        rc_ok = pthread_create(&rc, NULL, kfw_reconcile_main, &w) == 0;
        if (hb_ok && rc_ok) {
            kfw_pool_start(&w);
            kf_log(&w.log, KF_LOG_INFO, "ready");
            main_loop(&w);
            kfw_pool_stop(&w);
        } else {
            kf_log(&w.log, KF_LOG_ERROR, "cannot start the helper threads");
        }
    }
    pthread_mutex_lock(&w.sh.mu);
    w.sh.quit = true;
    pthread_cond_broadcast(&w.sh.wake);
    pthread_mutex_unlock(&w.sh.mu);
    if (hb_ok)
        pthread_join(hb, NULL);
    if (rc_ok)
        pthread_join(rc, NULL);
    if (w.q)
        kf_queue_close(w.q);
    if (w.db)
        kf_db_close(w.db);
    kf_log(&w.log, KF_LOG_INFO, "stopped");
    kf_config_free(&w.cfg);
    return 0;
}
