/* metrics_get.c: GET /metrics, Prometheus text (version 0.0.4): the HTTP metrics, then jobs by
 * status (PostgreSQL), queue depth and pending entries per class seen in jobs (Redis), and the
 * workers whose heartbeat is alive (labelled by host, GPU and class) and whether each holds a
 * job, the live workers per class and the jobs accepted while none served their class, the
 * front door's connections and refusals, and the open event streams. A dependency that is
 * down leaves its part out. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn_guard.h"
#include "liveness.h"
#include "metrics.h"
#include "metrics_get.h"
#include "reply.h"
#include "slots.h"

static void write_jobs(struct kf_req *r, struct kf_db *db, FILE *out) {
    static const char *const statuses[] = {"queued", "running",   "succeeded",
                                           "failed", "cancelled", "dead"};
    PGresult *res = kf_db_exec(db, "jobs_by_status", 0, NULL);
    if (!res)
        return;
    (void)r;
    fputs("# HELP kforge_jobs Jobs by status.\n# TYPE kforge_jobs gauge\n", out);
    for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++) {
        const char *count = "0";
        for (int i = 0; i < PQntuples(res); i++)
            if (strcmp(PQgetvalue(res, i, 0), statuses[s]) == 0)
                count = PQgetvalue(res, i, 1);
        fprintf(out, "kforge_jobs{status=\"%s\"} %s\n", statuses[s], count);
    }
    PQclear(res);
}

static void write_queues(struct kf_req *r, PGresult *classes, FILE *out) {
    struct kf_queue *q = kf_srv_queue_get(r->srv);
    if (!q)
        return;
    int n = PQntuples(classes);
    long *len = calloc((size_t)n + 1, sizeof *len), *pend = calloc((size_t)n + 1, sizeof *pend);
    for (int i = 0; len && pend && i < n; i++) {
        char stream[160];
        kf_queue_stream(PQgetvalue(classes, i, 0), stream, sizeof stream);
        len[i] = kf_queue_len(q, stream);
        pend[i] = kf_queue_pending(q, stream);
    }
    kf_srv_queue_put(r->srv, q);
    if (!len || !pend) {
        free(len);
        free(pend);
        return;
    }
    fputs("# HELP kforge_queue_depth Entries in the class's stream.\n"
          "# TYPE kforge_queue_depth gauge\n",
          out);
    for (int i = 0; i < n; i++)
        if (len[i] >= 0)
            fprintf(out, "kforge_queue_depth{class=\"%s\"} %ld\n", PQgetvalue(classes, i, 0),
                    len[i]);
    fputs("# HELP kforge_queue_pending Entries delivered to a worker, not acknowledged.\n"
          "# TYPE kforge_queue_pending gauge\n",
          out);
    for (int i = 0; i < n; i++)
        if (pend[i] >= 0)
            fprintf(out, "kforge_queue_pending{class=\"%s\"} %ld\n", PQgetvalue(classes, i, 0),
                    pend[i]);
    free(len);
    free(pend);
}

/* One label value, with the characters the text format escapes left out. */
static void label(FILE *out, const char *name, const char *value, bool first) {
    fprintf(out, "%s%s=\"", first ? "" : ",", name);
    for (const char *p = value; *p; p++)
        if (*p != '"' && *p != '\\' && *p != '\n')
            fputc(*p, out);
    fputc('"', out);
}

struct worker_family {
    FILE *out;
    bool busy; /* kforge_worker_busy (1 while it holds a job), else kforge_worker_up */
};

/* One worker's line of a family, labelled by its heartbeat (lib/queue.h): worker, host, gpu
 * ("" for a cpu worker) and class, so that a host's GPUs can be told apart. */
static void worker_line(const char *worker, const char *json, void *arg) {
    const struct worker_family *f = arg;
    json_t *hb = json_loads(json ? json : "{}", 0, NULL);
    const char *host = json_string_value(json_object_get(hb, "host"));
    const char *klass = json_string_value(json_object_get(hb, "class"));
    json_t *gpu = json_object_get(hb, "gpu");
    char gpu_text[24] = "";
    if (json_is_integer(gpu))
        snprintf(gpu_text, sizeof gpu_text, "%lld", (long long)json_integer_value(gpu));
    fputs(f->busy ? "kforge_worker_busy{" : "kforge_worker_up{", f->out);
    label(f->out, "worker", worker, true);
    label(f->out, "host", host ? host : "", false);
    label(f->out, "gpu", gpu_text, false);
    label(f->out, "class", klass ? klass : "", false);
    fprintf(f->out, "} %d\n", f->busy ? json_is_string(json_object_get(hb, "job")) : 1);
    json_decref(hb);
}

/* The front door's connections and refusals, and the open event streams. */
static void write_connections(struct kf_req *r, FILE *out) {
    struct kf_guard_stats st;
    kf_guard_stats(r->srv->guard, &st);
    fprintf(
        out,
        "# HELP kforge_connections_open Client connections open now.\n"
        "# TYPE kforge_connections_open gauge\nkforge_connections_open %ld\n"
        "# HELP kforge_connections_refused_total Connections refused or cut by the front door.\n"
        "# TYPE kforge_connections_refused_total counter\n"
        "kforge_connections_refused_total{reason=\"per_client\"} %ld\n"
        "kforge_connections_refused_total{reason=\"busy\"} %ld\n"
        "kforge_connections_refused_total{reason=\"timeout\"} %ld\n"
        "kforge_connections_refused_total{reason=\"bad_head\"} %ld\n"
        "# HELP kforge_streams_open Server-sent event streams open now.\n"
        "# TYPE kforge_streams_open gauge\nkforge_streams_open %ld\n",
        st.open, st.refused_client, st.refused_busy, st.timed_out, st.bad_head,
        kf_slots_total(r->srv->streams_by));
}

/* Live workers of every class that jobs used or workers registered (0: none serves it). */
static void write_class_workers(struct kf_req *r, PGresult *classes, FILE *out) {
    struct kf_live live;
    kf_liveness_get(r->srv, false, &live);
    if (!live.ok)
        return;
    fputs("# HELP kforge_class_workers Live workers of a job class.\n"
          "# TYPE kforge_class_workers gauge\n",
          out);
    for (int i = 0; i < live.n; i++) {
        fputs("kforge_class_workers{", out);
        label(out, "class", live.c[i].name, true);
        fprintf(out, "} %ld\n", live.c[i].workers);
    }
    for (int i = 0; classes && i < PQntuples(classes); i++) {
        const char *k = PQgetvalue(classes, i, 0);
        bool listed = false;
        for (int j = 0; j < live.n && !listed; j++)
            listed = strcmp(live.c[j].name, k) == 0;
        if (listed)
            continue;
        fputs("kforge_class_workers{", out);
        label(out, "class", k, true);
        fputs("} 0\n", out);
    }
}

enum MHD_Result kf_metrics_get(struct kf_req *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    kf_metrics_write(r->srv->metrics, out);
    PGresult *classes = NULL;
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (db) {
        write_jobs(r, db, out);
        classes = kf_db_exec(db, "job_classes", 0, NULL);
        kf_srv_db_put(r->srv, db);
    }
    if (classes)
        write_queues(r, classes, out);
    write_class_workers(r, classes, out);
    PQclear(classes);
    kf_liveness_write_unserved(r->srv, out);
    write_connections(r, out);
    struct kf_queue *q = kf_srv_queue_get(r->srv);
    if (q) {
        struct worker_family up = {out, false}, busy = {out, true};
        fputs("# HELP kforge_worker_up Workers whose heartbeat is alive.\n"
              "# TYPE kforge_worker_up gauge\n",
              out);
        kf_queue_heartbeats(q, worker_line, &up);
        fputs("# HELP kforge_worker_busy 1 while the worker holds a job.\n"
              "# TYPE kforge_worker_busy gauge\n",
              out);
        kf_queue_heartbeats(q, worker_line, &busy);
        kf_srv_queue_put(r->srv, q);
    }
    fclose(out);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return kf_reply_queue(r, MHD_HTTP_OK, resp);
}
