/* export_get.c: GET /v1/export (see export_get.h for why export_seq pages have no gaps).
 *
 * The reply is NDJSON: one record per finished episode in export_seq order (trajectory or sft,
 * built by PostgreSQL, episode_sql.c), then one trailer line
 *
 *     {"next_cursor": C|null, "resume_cursor": C|null, "count": N, "schema_version": 1}
 *
 * next_cursor is null when this page reached the end of what is exported now; resume_cursor
 * is the position after this page's last record (the cursor given when the page is empty), to
 * poll later for episodes that finish after. The cursor travels in the trailer only: the body
 * is streamed, so it is not known when the headers go out. A failure after the headers ends the
 * stream with an error line ({"error": {...}}, the API's error shape) instead of the trailer.
 *
 * The handler checks the query and reads the first rows before it answers, so a bad query or
 * an unreachable database still gets a plain error reply. MHD then pulls the rest from
 * read_stream, which reads the next rows on a pooled connection taken per fetch, so a large
 * export never sits in memory: a fetch is sized to about KF_EXPORT_PAGE_BYTES of records.
 * With Accept-Encoding: gzip, the bytes go through zlib's deflate with a gzip header, flushed
 * after each fetch. It needs a key: the records are the key's owner's episodes (an admin key's:
 * every owner's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "auth.h"
#include "episode_sql.h"
#include "export_get.h"
#include "export_query.h"
#include "reply.h"

#define KF_EXPORT_FETCH_FIRST 4        /* records per fetch at first */
#define KF_EXPORT_FETCH_MAX 100        /* and at most */
#define KF_EXPORT_PAGE_BYTES (8 << 20) /* the size a fetch aims at */
#define KF_EXPORT_KEEP_BYTES (1 << 20) /* a drained buffer bigger than this is freed */

enum phase { ROWS, TRAILER, END };

struct stream {
    struct kf_server *srv;
    struct kf_log_ctx log;
    char request_id[65];
    struct kf_export_query q;
    char owner[72];    /* whose episodes ("" every owner's: an admin key) */
    char last_seq[24]; /* the export_seq of the last record given ("" none yet) */
    long left;         /* records this page may still give */
    long count;        /* records given */
    long fetch;        /* records per fetch, adapted to their size */
    bool has_more;
    enum phase phase;
    struct kf_buf plain; /* NDJSON not yet compressed (gzip only) */
    struct kf_buf out;   /* bytes for the client */
    size_t off;          /* how much of out was sent */
    bool gzip;
    z_stream z;
};

static void free_stream(void *cls) {
    struct stream *s = cls;
    if (s->gzip)
        deflateEnd(&s->z);
    kf_buf_free(&s->plain);
    kf_buf_free(&s->out);
    free(s);
}

/* Where new NDJSON goes: straight out, or into plain for deflate. */
static struct kf_buf *sink(struct stream *s) {
    return s->gzip ? &s->plain : &s->out;
}

/* Moves plain through deflate into out (Z_FINISH once the stream ends). 0 or -1. */
static int deflate_out(struct stream *s) {
    if (!s->gzip)
        return 0;
    int flush = s->phase == END ? Z_FINISH : Z_SYNC_FLUSH;
    unsigned char chunk[16384];
    s->z.next_in = (unsigned char *)(s->plain.data ? s->plain.data : "");
    s->z.avail_in = (uInt)s->plain.len;
    do {
        s->z.next_out = chunk;
        s->z.avail_out = sizeof chunk;
        if (deflate(&s->z, flush) == Z_STREAM_ERROR)
            return -1;
        size_t have = sizeof chunk - s->z.avail_out;
        if (have > 0 && !kf_buf_append(&s->out, chunk, have))
            return -1;
    } while (s->z.avail_out == 0);
    s->plain.len = 0;
    return 0;
}

/* The query's filters as parameters $1..$7 of the export statements, then $8 (n), $9 (the
 * owner). */
static void params_of(const struct stream *s, const char *p[9], char n[16], long rows) {
    const struct kf_export_query *q = &s->q;
    snprintf(n, 16, "%ld", rows);
    p[0] = s->last_seq[0] ? s->last_seq : q->after;
    p[1] = q->since[0] ? q->since : NULL;
    p[2] = q->until[0] ? q->until : NULL;
    p[3] = q->task_id[0] ? q->task_id : NULL;
    p[4] = q->policy[0] ? q->policy : NULL;
    p[5] = q->min_reward[0] ? q->min_reward : NULL;
    p[6] = q->rft ? "true" : "false";
    p[7] = n;
    p[8] = s->owner[0] ? s->owner : NULL;
}

/* One fetch of records into sink(s); at the end of the page, whether more follow. 0, or -1
 * when a statement failed (db says why) or memory ran out (db's error is empty then). */
static int fetch(struct stream *s, struct kf_db *db) {
    long want = s->left < s->fetch ? s->left : s->fetch;
    const char *p[9];
    char n[16];
    params_of(s, p, n, want);
    PGresult *res =
        kf_episode_sql_exec(db, s->q.sft ? "ep_export_sft" : "ep_export_trajectory", 9, p);
    if (!res)
        return -1;
    int rows = PQntuples(res);
    size_t bytes = 0;
    struct kf_buf *b = sink(s);
    for (int i = 0; i < rows; i++) {
        size_t len = (size_t)PQgetlength(res, i, 1), mark = b->len;
        if (!kf_buf_append(b, PQgetvalue(res, i, 1), len) || !kf_buf_append(b, "\n", 1)) {
            b->len = mark; /* no half line before the error line */
            if (b->data)
                b->data[mark] = '\0';
            PQclear(res);
            return -1;
        }
        bytes += len + 1;
        snprintf(s->last_seq, sizeof s->last_seq, "%s", PQgetvalue(res, i, 0));
    }
    PQclear(res);
    s->left -= rows;
    s->count += rows;
    if (bytes > KF_EXPORT_PAGE_BYTES && s->fetch > 1)
        s->fetch /= 2;
    else if (rows == want && bytes < KF_EXPORT_PAGE_BYTES / 4 && s->fetch < KF_EXPORT_FETCH_MAX)
        s->fetch = s->fetch * 2 > KF_EXPORT_FETCH_MAX ? KF_EXPORT_FETCH_MAX : s->fetch * 2;
    if (rows < want) {
        s->has_more = false;
        s->phase = TRAILER;
    } else if (s->left == 0) {
        params_of(s, p, n, 1);
        res = kf_episode_sql_exec(db, "ep_export_more", 9, p);
        if (!res)
            return -1;
        s->has_more = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        PQclear(res);
        s->phase = TRAILER;
    }
    return 0;
}

static bool trailer(struct stream *s) {
    char next[KF_EXPORT_CURSOR_MAX + 2] = "null", resume[KF_EXPORT_CURSOR_MAX + 2] = "null";
    char c[KF_EXPORT_CURSOR_MAX];
    if (s->last_seq[0]) {
        kf_export_cursor_encode(s->last_seq, c);
        snprintf(resume, sizeof resume, "\"%s\"", c);
    } else if (s->q.cursor[0])
        snprintf(resume, sizeof resume, "\"%s\"", s->q.cursor);
    if (s->has_more)
        snprintf(next, sizeof next, "%s", resume);
    char line[256];
    int n = snprintf(line, sizeof line,
                     "{\"next_cursor\":%s,\"resume_cursor\":%s,\"count\":%ld,\"schema_version\":1}"
                     "\n",
                     next, resume, s->count);
    return kf_buf_append(sink(s), line, (size_t)n);
}

/* The error line that ends a stream cut short (the API's error shape). */
static void error_line(struct stream *s, enum kf_err e, const char *message) {
    const struct kf_err_info *info = kf_err_info(e);
    json_t *line = json_pack("{s:{s:i, s:s, s:s, s:s}}", "error", "code", info->code, "name",
                             info->name, "message", message, "request_id", s->request_id);
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (text && kf_buf_append(sink(s), text, strlen(text)))
        kf_buf_append(sink(s), "\n", 1);
    free(text);
}

/* Makes more bytes for the client (or ends the stream). 0, or -1 to cut the connection. */
static int step(struct stream *s) {
    if (s->phase == ROWS) {
        struct kf_db *db = kf_srv_db_get(s->srv);
        int rc = db ? fetch(s, db) : -1;
        if (rc != 0) {
            bool down = !db || kf_db_down(db);
            kf_log(&s->log, KF_LOG_ERROR, "export cut short after %ld records: %s", s->count,
                   db ? kf_db_error(db) : "no database connection");
            error_line(s, down ? KF_E_DATABASE_UNAVAILABLE : KF_E_INTERNAL,
                       "the export was cut short; ask again from the last cursor");
            s->phase = END;
        }
        kf_srv_db_put(s->srv, db);
    } else if (s->phase == TRAILER) {
        if (!trailer(s))
            return -1;
        s->phase = END;
    }
    return deflate_out(s);
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    struct stream *s = cls;
    (void)pos;
    while (s->off >= s->out.len) {
        if (s->out.cap > KF_EXPORT_KEEP_BYTES)
            kf_buf_free(&s->out);
        s->off = s->out.len = 0;
        if (s->phase == END)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (atomic_load(&s->srv->stopping) || step(s) != 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->out.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static struct stream *stream_new(struct kf_req *r, const struct kf_export_query *q) {
    struct stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->srv = r->srv;
    snprintf(s->request_id, sizeof s->request_id, "%s", r->request_id);
    s->log = r->log;
    s->log.request_id = s->request_id;
    s->q = *q;
    if (!kf_auth_admin(r))
        snprintf(s->owner, sizeof s->owner, "%s", r->owner);
    s->left = q->limit;
    s->fetch = KF_EXPORT_FETCH_FIRST;
    s->phase = ROWS;
    if (q->gzip) {
        if (deflateInit2(&s->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            free(s);
            return NULL;
        }
        s->gzip = true;
    }
    return s;
}

enum MHD_Result kf_export_get(struct kf_req *r) {
    if (!kf_auth_admin(r) && !r->owner[0]) /* the route needs a key: never reached */
        return kf_reply_error(r, KF_E_UNAUTHORIZED, NULL, NULL);
    struct kf_export_query q;
    char msg[160];
    const char *bad = kf_export_query_parse(r->conn, &q, msg, sizeof msg);
    if (bad)
        return kf_reply_error(r, KF_E_INVALID_QUERY, bad, "%s", msg);
    struct stream *s = stream_new(r, &q);
    if (!s)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db) {
        free_stream(s);
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    }
    if (fetch(s, db) != 0) {
        const char *st = kf_db_sqlstate(db);
        enum MHD_Result ret =
            strncmp(st, "22", 2) == 0 /* a value PostgreSQL refused (a date out of its range) */
                ? kf_reply_error(r, KF_E_INVALID_QUERY, NULL, "a filter is out of range: %s",
                                 kf_db_error(db))
                : kf_reply_db_error(r, db);
        kf_srv_db_put(r->srv, db);
        free_stream(s);
        return ret;
    }
    kf_srv_db_put(r->srv, db);
    if (deflate_out(s) != 0) {
        free_stream(s);
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "could not compress the reply");
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, read_stream, s, free_stream);
    if (!resp) {
        free_stream(s);
        return MHD_NO;
    }
    /* the charset said: a client that guesses it (Python's requests does for a type it does not
     * know) can read UTF-8 text as another encoding */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/x-ndjson; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    if (s->gzip)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    return kf_reply_queue(r, MHD_HTTP_OK, resp);
}
