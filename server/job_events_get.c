/* job_events_get.c: GET /v1/jobs/{id}/events, server-sent events. MHD pulls the stream from
 * read_events: it polls job_events (seq > last) every 100 ms on a pooled connection taken per
 * poll, and between polls parks the connection (park.h), so an open stream holds no thread.
 * It writes `: keepalive` every 15 s and ends after the `done` event, when the job is gone, or
 * stream_max_s after it started (a client reconnects with Last-Event-ID and misses nothing; a
 * stream holds its slot no longer than that).
 * Streams are counted per API key (a request that sends one), the clients without a key
 * together as one holder, and in all: max_streams_per_key, max_streams_anonymous and
 * max_streams (503 too_many_streams, naming the limit it met). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_events_get.h"

#include "auth.h"
#include "buf.h"
#include "park.h"
#include "reply.h"
#include "slots.h"
#include "util.h"

#define KF_SSE_POLL_MS 100
#define KF_SSE_KEEPALIVE_MS 15000

struct stream {
    struct kf_server *srv;
    struct MHD_Connection *conn;
    char job_id[40];
    char last_seq[16];
    struct kf_buf out; /* events not yet written */
    size_t off;        /* how much of out was written */
    bool done;         /* end once buf is written */
    int64_t last_write_ms;
    int64_t end_ms;  /* stream_max_s after its start: the stream ends (the client reconnects) */
    char holder[40]; /* the slot's holder: the key's id, "" without a key */
};

/* One poll of the job's new events into s->out. */
static void poll_events(struct stream *s) {
    struct kf_db *db = kf_srv_db_get(s->srv);
    if (!db)
        return; /* PostgreSQL away: keep the stream, try again */
    const char *p[] = {s->job_id, s->last_seq};
    PGresult *res = kf_db_exec(db, "job_events", 2, p);
    kf_srv_db_put(s->srv, db);
    if (!res)
        return;
    int rows = PQntuples(res);
    if (rows == 0)
        s->done = true; /* the job no longer exists */
    for (int i = 0; i < rows; i++) {
        if (PQgetisnull(res, i, 0)) {
            if (strcmp(PQgetvalue(res, i, 3), "t") == 0)
                s->done = true; /* resumed after `done`: nothing more will come */
            continue;
        }
        const char *seq = PQgetvalue(res, i, 0), *kind = PQgetvalue(res, i, 1);
        char head[128];
        int n = snprintf(head, sizeof head, "id: %s\nevent: %s\ndata: ", seq, kind);
        if (!kf_buf_append(&s->out, head, (size_t)n) ||
            !kf_buf_append(&s->out, PQgetvalue(res, i, 2), (size_t)PQgetlength(res, i, 2)) ||
            !kf_buf_append(&s->out, "\n\n", 2)) {
            s->done = true;
            break;
        }
        snprintf(s->last_seq, sizeof s->last_seq, "%s", seq);
        if (strcmp(kind, "done") == 0)
            s->done = true;
    }
    PQclear(res);
}

static ssize_t drain(struct stream *s, char *buf, size_t max) {
    size_t n = s->out.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    if (s->off == s->out.len)
        s->off = s->out.len = 0;
    s->last_write_ms = kf_now_ms();
    return (ssize_t)n;
}

static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max) {
    struct stream *s = cls;
    (void)pos;
    if (s->off < s->out.len)
        return drain(s, buf, max);
    if (s->done || s->srv->stopping || kf_now_ms() >= s->end_ms)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (kf_peer_gone(s->conn))
        return MHD_CONTENT_READER_END_WITH_ERROR;
    poll_events(s);
    if (s->out.len > 0)
        return drain(s, buf, max);
    if (s->done)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (kf_now_ms() - s->last_write_ms >= KF_SSE_KEEPALIVE_MS) {
        if (!kf_buf_append(&s->out, ": keepalive\n\n", 13))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        return drain(s, buf, max);
    }
    if (kf_park(s->srv->park, s->conn, KF_SSE_POLL_MS) != 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    return 0;
}

static void free_stream(void *cls) {
    struct stream *s = cls;
    kf_slots_give(s->srv->streams_by, s->holder);
    kf_buf_free(&s->out);
    free(s);
}

static long last_event_id(struct MHD_Connection *conn) {
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
    if (!h)
        return 0;
    size_t n = strspn(h, "0123456789");
    if (n == 0 || n > 9 || h[n])
        return 0;
    return strtol(h, NULL, 10);
}

enum MHD_Result kf_job_events_get(struct kf_req *r) {
    struct kf_server *srv = r->srv;
    /* a key sent with the request holds the stream's slot: checked here unless the dispatcher
     * did (on failure the error is queued) */
    if (!r->key_id[0] &&
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization") != NULL &&
        !kf_auth_check(r, 0))
        return MHD_YES;
    const char *p[] = {r->id};
    struct kf_db *db = kf_srv_db_get(srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    PGresult *res = kf_db_exec(db, "job_exists", 1, p);
    if (!res) {
        enum MHD_Result ret = kf_reply_db_error(r, db);
        kf_srv_db_put(srv, db);
        return ret;
    }
    kf_srv_db_put(srv, db);
    bool exists = PQntuples(res) == 1;
    PQclear(res);
    if (!exists)
        return kf_reply_error(r, KF_E_JOB_NOT_FOUND, NULL, NULL);
    const struct kf_config *cfg = srv->cfg;
    bool keyed = r->key_id[0] != '\0';
    long per = keyed ? cfg->max_streams_per_key : cfg->max_streams_anonymous;
    enum kf_slot_take took = kf_slots_take(srv->streams_by, r->key_id, per, cfg->max_streams);
    if (took != KF_SLOT_TAKEN)
        return kf_reply_error(
            r, KF_E_TOO_MANY_STREAMS, NULL, "%s; retry later",
            took == KF_SLOT_ALL_FULL ? "the server has max_streams event streams open"
            : keyed                  ? "this key has max_streams_per_key event streams open"
                    : "the clients without a key have max_streams_anonymous event streams open");
    struct stream *s = calloc(1, sizeof *s);
    if (!s) {
        kf_slots_give(srv->streams_by, r->key_id);
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    }
    snprintf(s->holder, sizeof s->holder, "%s", r->key_id);
    s->srv = srv;
    s->conn = r->conn;
    snprintf(s->job_id, sizeof s->job_id, "%s", r->id);
    snprintf(s->last_seq, sizeof s->last_seq, "%ld", last_event_id(r->conn));
    s->last_write_ms = kf_now_ms();
    s->end_ms = s->last_write_ms + srv->cfg->stream_max_s * 1000;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_events, s, free_stream);
    if (!resp) {
        free_stream(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return kf_reply_queue(r, MHD_HTTP_OK, resp);
}
