/* liveness.c: the classes' live workers, cached for a second (liveness.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "liveness.h"
#include "util.h"

#define KF_LIVE_TTL_MS 1000

struct unserved {
    char name[64];
    long jobs;
};

struct kf_liveness {
    pthread_mutex_t lock;
    int64_t at_ms; /* when live was read; 0: never */
    struct kf_live live;
    int nu;
    struct unserved u[KF_LIVE_CLASSES];
};

struct kf_liveness *kf_liveness_new(void) {
    struct kf_liveness *l = calloc(1, sizeof *l);
    if (l && pthread_mutex_init(&l->lock, NULL) != 0) {
        free(l);
        return NULL;
    }
    return l;
}

void kf_liveness_free(struct kf_liveness *l) {
    if (!l)
        return;
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* The entry of klass in live, added when there is room; NULL else. */
static struct kf_live_class *entry(struct kf_live *live, const char *klass) {
    for (int i = 0; i < live->n; i++)
        if (strcmp(live->c[i].name, klass) == 0)
            return &live->c[i];
    if (live->n == KF_LIVE_CLASSES || strlen(klass) >= sizeof live->c[0].name)
        return NULL;
    struct kf_live_class *c = &live->c[live->n++];
    memset(c, 0, sizeof *c);
    memcpy(c->name, klass, strlen(klass) + 1);
    return c;
}

static void on_heartbeat(const char *worker, const char *json, void *arg) {
    (void)worker;
    json_t *hb = json_loads(json ? json : "{}", 0, NULL);
    const char *klass = json_string_value(json_object_get(hb, "class"));
    struct kf_live_class *c = klass ? entry(arg, klass) : NULL;
    if (c)
        c->workers++;
    json_decref(hb);
}

static void on_class(const char *klass, void *arg) {
    struct kf_live_class *c = entry(arg, klass);
    if (c)
        c->registered = true;
}

/* Reads the heartbeats and the registered classes from Redis into live. */
static void read_live(struct kf_server *srv, struct kf_live *live) {
    memset(live, 0, sizeof *live);
    struct kf_queue *q = kf_srv_queue_get(srv);
    if (!q)
        return;
    long long since = (long long)kf_wall_ms() - (long long)srv->cfg->class_forget_s * 1000;
    live->ok = kf_queue_heartbeats(q, on_heartbeat, live) >= 0 &&
               kf_queue_classes(q, since, on_class, live) >= 0;
    kf_srv_queue_put(srv, q);
}

void kf_liveness_get(struct kf_server *srv, bool fresh, struct kf_live *out) {
    struct kf_liveness *l = srv->liveness;
    int64_t now = kf_now_ms();
    pthread_mutex_lock(&l->lock);
    /* one reader at a time: the others wait for its answer instead of asking Redis too */
    if (fresh || l->at_ms == 0 || now - l->at_ms >= KF_LIVE_TTL_MS) {
        read_live(srv, &l->live);
        l->at_ms = kf_now_ms();
    }
    *out = l->live;
    pthread_mutex_unlock(&l->lock);
}

long kf_live_workers(const struct kf_live *live, const char *klass) {
    for (int i = 0; i < live->n; i++)
        if (strcmp(live->c[i].name, klass) == 0)
            return live->c[i].workers;
    return 0;
}

void kf_liveness_note(struct kf_req *r, const char *klass) {
    struct kf_server *srv = r->srv;
    struct kf_live live;
    kf_liveness_get(srv, false, &live);
    if (!live.ok || kf_live_workers(&live, klass) > 0)
        return;
    struct kf_liveness *l = srv->liveness;
    pthread_mutex_lock(&l->lock);
    int i = 0;
    while (i < l->nu && strcmp(l->u[i].name, klass) != 0)
        i++;
    if (i == l->nu && l->nu < KF_LIVE_CLASSES && strlen(klass) < sizeof l->u[0].name)
        memcpy(l->u[l->nu++].name, klass, strlen(klass) + 1);
    if (i < l->nu)
        l->u[i].jobs++;
    pthread_mutex_unlock(&l->lock);
    size_t k;
    json_t *w;
    json_array_foreach(r->warnings, k, w) {
        const char *c = json_string_value(json_object_get(w, "class"));
        if (c && strcmp(c, klass) == 0)
            return;
    }
    if (!r->warnings && !(r->warnings = json_array()))
        return;
    char msg[200];
    snprintf(msg, sizeof msg,
             "no live worker serves class %s: the job waits until a worker of that class starts",
             klass);
    json_array_append_new(r->warnings, json_pack("{s:s, s:s, s:s}", "name", "no_live_worker",
                                                 "class", klass, "message", msg));
}

char *kf_liveness_annotate(const char *json, size_t len, json_t *warnings, size_t *out_len) {
    if (!warnings)
        return NULL;
    while (len > 0 && json[len - 1] != '}')
        len--;
    if (len < 2)
        return NULL;
    char *w = json_dumps(warnings, JSON_COMPACT);
    if (!w)
        return NULL;
    size_t wn = strlen(w);
    static const char key[] = ",\"warnings\":";
    char *out = malloc(len + sizeof key + wn + 1);
    if (out) {
        size_t n = len - 1; /* the object without its closing brace */
        memcpy(out, json, n);
        size_t last = n;
        while (last > 0 && (json[last - 1] == ' ' || json[last - 1] == '\n'))
            last--;
        bool empty = last > 0 && json[last - 1] == '{';
        memcpy(out + n, key + empty, sizeof key - 1 - empty);
        n += sizeof key - 1 - empty;
        memcpy(out + n, w, wn);
        n += wn;
        out[n++] = '}';
        out[n] = '\0';
        *out_len = n;
    }
    free(w);
    return out;
}

void kf_liveness_write_unserved(struct kf_server *srv, FILE *out) {
    struct kf_liveness *l = srv->liveness;
    fputs("# HELP kforge_jobs_unserved_total Jobs accepted while no live worker served their "
          "class.\n# TYPE kforge_jobs_unserved_total counter\n",
          out);
    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < l->nu; i++)
        fprintf(out, "kforge_jobs_unserved_total{class=\"%s\"} %ld\n", l->u[i].name, l->u[i].jobs);
    pthread_mutex_unlock(&l->lock);
}
