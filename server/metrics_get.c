/* metrics_get.c: GET /metrics, Prometheus text (version 0.0.4): the HTTP metrics, then jobs by
 * status (PostgreSQL), queue depth and pending entries per class seen in jobs (Redis), and the
 * workers whose heartbeat is alive. A dependency that is down leaves its part out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "metrics_get.h"
#include "reply.h"

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

static void worker_line(const char *worker, const char *json, void *arg) {
    (void)json;
    FILE *out = arg;
    fputs("kforge_worker_up{worker=\"", out);
    for (const char *p = worker; *p; p++)
        if (*p != '"' && *p != '\\' && *p != '\n')
            fputc(*p, out);
    fputs("\"} 1\n", out);
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
    PQclear(classes);
    struct kf_queue *q = kf_srv_queue_get(r->srv);
    if (q) {
        fputs("# HELP kforge_worker_up Workers whose heartbeat is alive.\n"
              "# TYPE kforge_worker_up gauge\n",
              out);
        kf_queue_heartbeats(q, worker_line, out);
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
