/* status.c: `kforge status [--var DIR] [--url U]`: the server's /readyz answer, a summary of
 * /metrics (queue depths, jobs by status, live workers) and, for the local stack (the URL of
 * var/stack.env), the programs var/run records. Exit 0 when the stack can do work: /readyz
 * says 200, some worker is alive, every class with jobs waiting has a live worker, and every
 * recorded worker runs. Else 1, each reason on its own line starting with "not ready:". */
#include "cli.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLASSES 64

/* What /metrics says per class: entries waiting (depth + pending) and live workers. */
struct klass {
    char name[64];
    long waiting;
    int workers;
};

struct health {
    struct klass k[MAX_CLASSES];
    int n;
    int workers; /* live workers, every class */
};

static bool wanted(const char *line) {
    static const char *const names[] = {"kforge_queue_depth", "kforge_queue_pending", "kforge_jobs",
                                        "kforge_worker_up"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (strncmp(line, names[i], n) == 0 && (line[n] == '{' || line[n] == ' '))
            return true;
    }
    return false;
}

static struct klass *klass_of(struct health *h, const char *name) {
    for (int i = 0; i < h->n; i++) {
        if (strcmp(h->k[i].name, name) == 0)
            return &h->k[i];
    }
    if (h->n >= MAX_CLASSES)
        return NULL;
    struct klass *k = &h->k[h->n++];
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->waiting = 0;
    k->workers = 0;
    return k;
}

/* One metrics line into h: kforge_queue_depth / _pending {class="C"} N, kforge_worker_up
 * {...,class="C"} 1. */
static void count(struct health *h, const char *line) {
    bool depth = strncmp(line, "kforge_queue_depth{", 19) == 0 ||
                 strncmp(line, "kforge_queue_pending{", 21) == 0;
    bool up = strncmp(line, "kforge_worker_up{", 17) == 0;
    const char *c = strstr(line, "class=\"");
    const char *close = strrchr(line, '}');
    if ((!depth && !up) || c == NULL || close == NULL)
        return;
    char name[64];
    c += 7;
    size_t len = strcspn(c, "\"");
    snprintf(name, sizeof(name), "%.*s", (int)len, c);
    long v = strtol(close + 1, NULL, 10);
    struct klass *k = klass_of(h, name);
    if (k == NULL)
        return;
    if (depth)
        k->waiting += v;
    if (up && v > 0) {
        k->workers++;
        h->workers++;
    }
}

/* Prints a "not ready:" line for each worker pid file of var/run whose process is gone; their
 * count. */
static int dead_workers(const char *var) {
    char dir[PATH_MAX + 8];
    snprintf(dir, sizeof(dir), "%s/run", var);
    DIR *d = opendir(dir);
    struct dirent *e;
    int dead = 0;
    while (d && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "worker-", 7) != 0 || len < 5 ||
            strcmp(e->d_name + len - 4, ".pid") != 0)
            continue;
        char pidf[PATH_MAX + 300];
        snprintf(pidf, sizeof(pidf), "%s/%s", dir, e->d_name);
        pid_t pid = kfc_read_pid(pidf);
        if (!kfc_pid_is(pid, "kforge-worker")) {
            printf("not ready: %.*s (pid %d) is not running (`kforge up` starts it again)\n",
                   (int)(len - 4), e->d_name, (int)pid);
            dead++;
        }
    }
    if (d)
        closedir(d);
    return dead;
}

int kfc_status_main(int argc, char **argv) {
    const char *var_opt = NULL, *url_opt = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--var") == 0 && i + 1 < argc) {
            var_opt = argv[++i];
        } else if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            url_opt = argv[++i];
        } else {
            fprintf(stderr, "usage: kforge status [--var DIR] [--url U]\n");
            return 2;
        }
    }
    char var[PATH_MAX], url[512], target[600];
    kfc_var_dir(var_opt, var, sizeof(var));
    const char *env = getenv("KFORGE_URL");
    bool local = false;
    if (url_opt)
        snprintf(url, sizeof(url), "%s", url_opt);
    else if (env && env[0])
        snprintf(url, sizeof(url), "%s", env);
    else if (kfc_stack_get(var, "KFORGE_URL", url, sizeof(url)))
        local = true;
    else {
        fprintf(stderr, "kforge status: no %s/stack.env: is the stack up (`kforge up`)?\n", var);
        return 1;
    }
    printf("url: %s\n", url);
    char *body = NULL;
    snprintf(target, sizeof(target), "%s/readyz", url);
    long code = kfc_http("GET", target, NULL, NULL, &body, 5, false);
    if (code < 0) {
        printf("not ready: the server does not answer (`kforge up` starts it again)\n");
        return 1;
    }
    printf("readyz: %ld %s", code, body ? body : "");
    if (body == NULL || body[0] == '\0' || body[strlen(body) - 1] != '\n')
        printf("\n");
    free(body);
    body = NULL;
    static struct health h;
    memset(&h, 0, sizeof(h));
    bool metrics = false;
    snprintf(target, sizeof(target), "%s/metrics", url);
    if (kfc_http("GET", target, NULL, NULL, &body, 5, false) == 200 && body) {
        metrics = true;
        for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
            if (wanted(line))
                printf("  %s\n", line);
            count(&h, line);
        }
    }
    free(body);
    int bad = code == 200 ? 0 : 1;
    if (code != 200)
        printf("not ready: /readyz answered %ld\n", code);
    if (!metrics) {
        printf("not ready: no /metrics\n");
        bad++;
    } else if (h.workers == 0) {
        printf("not ready: no live worker (no heartbeat in Redis)\n");
        bad++;
    }
    for (int i = 0; metrics && i < h.n; i++) {
        if (h.k[i].waiting > 0 && h.k[i].workers == 0) {
            printf("not ready: class %s has %ld job entries waiting and no live worker\n",
                   h.k[i].name, h.k[i].waiting);
            bad++;
        }
    }
    if (local)
        bad += dead_workers(var);
    return bad ? 1 : 0;
}
