/* queue.c: the Redis client (hiredis): job streams, dead letters, rate limits, heartbeats. */
#include "queue.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#define KF_HB_PREFIX "kforge:hb:"
#define KF_RL_PREFIX "kforge:rl:"
#define KF_ARGV_MAX 16

struct kf_queue {
    redisContext *c; /* NULL while disconnected */
    char host[256];
    int port;
    char path[256]; /* unix socket, or "" */
    char password[128];
    int db;
    int timeout_ms;      /* connect and command timeout */
    long cmd_timeout_ms; /* the command timeout in force (longer around blocking reads) */
    char error[256];
};

/* A command as argv; arguments are borrowed. */
struct cmd {
    int argc;
    const char *argv[KF_ARGV_MAX];
};

static void set_error(struct kf_queue *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(struct kf_queue *q, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->error, sizeof(q->error), fmt, ap);
    va_end(ap);
}

static struct timeval ms_to_tv(long ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

static struct cmd make_cmd(int argc, ...) {
    struct cmd c = {.argc = 0};
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc && i < KF_ARGV_MAX; i++)
        c.argv[c.argc++] = va_arg(ap, const char *);
    va_end(ap);
    return c;
}

/* hiredis writes with write(2): a server that went away raises SIGPIPE, which would kill a
 * program that did not ignore it. Around our I/O the signal is blocked in this thread and a
 * SIGPIPE that we caused is consumed (as libpq does). */
struct pipe_guard {
    sigset_t old;
    bool was_pending;
};

static void sigpipe_block(struct pipe_guard *g) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

static void sigpipe_restore(const struct pipe_guard *g) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- the URL and the connection ---- */

/* The password of a password_file: its first line, from a file that only its owner may read
 * (as libpq's passfile). 0, or -1 with the reason in err. */
static int read_password_file(struct kf_queue *q, const char *file, char *err, size_t errlen) {
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "Redis password_file %s: %s", file, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
        snprintf(err, errlen,
                 "Redis password_file %s: group or others may read it (mode %03o): chmod 600 it",
                 file, (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, q->password, sizeof(q->password) - 1);
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "Redis password_file %s: %s", file, strerror(errno));
        return -1;
    }
    q->password[n] = '\0';
    q->password[strcspn(q->password, "\r\n")] = '\0';
    if (q->password[0] == '\0') {
        snprintf(err, errlen, "Redis password_file %s: empty", file);
        return -1;
    }
    return 0;
}

/* The query of a URL: "password_file=PATH" is the only parameter (the password read from that
 * file, so that the URL itself holds no secret). 0, or -1 with the reason in err. */
static int parse_query(struct kf_queue *q, const char *query, char *err, size_t errlen) {
    const char *key = "password_file=";
    if (strncmp(query, key, strlen(key)) != 0 || query[strlen(key)] == '\0') {
        snprintf(err, errlen, "bad Redis URL parameter \"%s\": only password_file=PATH", query);
        return -1;
    }
    return read_password_file(q, query + strlen(key), err, errlen);
}

/* redis://[:PASSWORD@]HOST[:PORT][/DB][?password_file=PATH] or
 * unix:///PATH[?password_file=PATH]. 0, or -1 with the reason in err. */
static int parse_url(struct kf_queue *q, const char *url, char *err, size_t errlen) {
    q->port = 6379;
    char base[512];
    const char *query = strchr(url, '?');
    size_t blen = query != NULL ? (size_t)(query - url) : strlen(url);
    if (blen >= sizeof(base))
        goto bad;
    memcpy(base, url, blen);
    base[blen] = '\0';
    if (strncmp(base, "unix://", 7) == 0) {
        size_t plen = strlen(base + 7);
        if (base[7] != '/' || plen >= sizeof(q->path))
            goto bad;
        memcpy(q->path, base + 7, plen + 1);
        return query != NULL ? parse_query(q, query + 1, err, errlen) : 0;
    }
    if (strncmp(base, "redis://", 8) != 0)
        goto bad;
    const char *p = base + 8;
    const char *at = strchr(p, '@');
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon != NULL ? colon + 1 : p;
        snprintf(q->password, sizeof(q->password), "%.*s", (int)(at - pw), pw);
        p = at + 1;
    }
    size_t hl = strcspn(p, ":/");
    if (hl > 0)
        snprintf(q->host, sizeof(q->host), "%.*s", (int)hl, p);
    else
        snprintf(q->host, sizeof(q->host), "127.0.0.1");
    p += hl;
    char *end = NULL;
    if (*p == ':') {
        q->port = (int)strtol(p + 1, &end, 10);
        if (end == p + 1 || q->port <= 0 || q->port > 65535)
            goto bad;
        p = end;
    }
    if (*p == '/' && p[1] != '\0') {
        q->db = (int)strtol(p + 1, &end, 10);
        if (end == p + 1 || *end != '\0' || q->db < 0)
            goto bad;
        p = end;
    } else if (*p == '/') {
        p++;
    }
    if (*p != '\0')
        goto bad;
    return query != NULL ? parse_query(q, query + 1, err, errlen) : 0;
bad:
    snprintf(err, errlen,
             "bad Redis URL \"%s\": expected redis://HOST:PORT[/DB][?password_file=PATH] or "
             "unix:///PATH",
             url);
    return -1;
}

static void drop(struct kf_queue *q) {
    if (q->c != NULL)
        redisFree(q->c);
    q->c = NULL;
}

/* AUTH and SELECT on a fresh connection. 0 or -1. */
static int setup_session(struct kf_queue *q) {
    char db[16];
    snprintf(db, sizeof(db), "%d", q->db);
    struct cmd cmds[2] = {make_cmd(2, "AUTH", q->password), make_cmd(2, "SELECT", db)};
    bool want[2] = {q->password[0] != '\0', q->db != 0};
    for (int i = 0; i < 2; i++) {
        if (!want[i])
            continue;
        redisReply *r = redisCommandArgv(q->c, cmds[i].argc, cmds[i].argv, NULL);
        bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        if (!ok)
            set_error(q, "%s: %s", cmds[i].argv[0], r != NULL ? r->str : q->c->errstr);
        freeReplyObject(r);
        if (!ok)
            return -1;
    }
    return 0;
}

static int connect_now(struct kf_queue *q) {
    drop(q);
    struct timeval tv = ms_to_tv(q->timeout_ms);
    if (q->path[0] != '\0')
        q->c = redisConnectUnixWithTimeout(q->path, tv);
    else
        q->c = redisConnectWithTimeout(q->host, q->port, tv);
    if (q->c == NULL || q->c->err) {
        set_error(q, "connecting to Redis: %s", q->c != NULL ? q->c->errstr : "out of memory");
        drop(q);
        return -1;
    }
    if (redisSetTimeout(q->c, ms_to_tv(q->cmd_timeout_ms)) != REDIS_OK || setup_session(q) != 0) {
        if (q->error[0] == '\0')
            set_error(q, "connecting to Redis: cannot set the timeout");
        drop(q);
        return -1;
    }
    return 0;
}

struct kf_queue *kf_queue_open(const char *url, int timeout_ms, char *err, size_t errlen) {
    struct kf_queue *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        snprintf(err, errlen, "kf_queue_open: out of memory");
        return NULL;
    }
    q->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    q->cmd_timeout_ms = q->timeout_ms;
    if (url == NULL || parse_url(q, url, err, errlen) != 0) {
        if (url == NULL)
            snprintf(err, errlen, "no Redis URL");
        explicit_bzero(q->password, sizeof(q->password));
        free(q);
        return NULL;
    }
    struct pipe_guard g;
    sigpipe_block(&g);
    int rc = connect_now(q);
    sigpipe_restore(&g);
    if (rc != 0) {
        snprintf(err, errlen, "%s", q->error);
        explicit_bzero(q->password, sizeof(q->password));
        free(q);
        return NULL;
    }
    return q;
}

void kf_queue_close(struct kf_queue *q) {
    if (q == NULL)
        return;
    drop(q);
    explicit_bzero(q->password, sizeof(q->password));
    free(q);
}

const char *kf_queue_error(const struct kf_queue *q) {
    return q->error;
}

/* ---- commands ---- */

/* true when an error on a connection that used to work says the server went away. */
static bool lost_connection(const redisContext *c) {
    return c->err == REDIS_ERR_EOF ||
           (c->err == REDIS_ERR_IO &&
            (strstr(c->errstr, "reset") != NULL || strstr(c->errstr, "Broken pipe") != NULL));
}

/* Sends the commands (a pipeline) and reads their replies into r[0..n). 0, or -1 with the
 * connection dropped and the error set (r then holds nothing to free). */
static int exchange(struct kf_queue *q, const struct cmd *cmds, int n, redisReply **r) {
    for (int i = 0; i < n; i++)
        redisAppendCommandArgv(q->c, cmds[i].argc, (const char **)cmds[i].argv, NULL);
    for (int i = 0; i < n; i++) {
        void *reply = NULL;
        if (redisGetReply(q->c, &reply) != REDIS_OK) {
            for (int j = 0; j < i; j++)
                freeReplyObject(r[j]);
            return -1;
        }
        r[i] = reply;
    }
    return 0;
}

/* Runs a pipeline, (re)connecting first when needed and once more when a connection that
 * worked before turns out lost. Replies (error replies included) into r, owned by the caller
 * (freeReplyObject). 0 or -1. */
static int run_pipeline_io(struct kf_queue *q, const struct cmd *cmds, int n, redisReply **r) {
    q->error[0] = '\0';
    bool fresh = q->c == NULL;
    if (fresh && connect_now(q) != 0)
        return -1;
    if (exchange(q, cmds, n, r) == 0)
        return 0;
    bool retry = !fresh && lost_connection(q->c);
    set_error(q, "Redis: %s", q->c->errstr);
    drop(q);
    if (!retry || connect_now(q) != 0)
        return -1;
    if (exchange(q, cmds, n, r) == 0)
        return 0;
    set_error(q, "Redis: %s", q->c->errstr);
    drop(q);
    return -1;
}

static int run_pipeline(struct kf_queue *q, const struct cmd *cmds, int n, redisReply **r) {
    struct pipe_guard g;
    sigpipe_block(&g);
    int rc = run_pipeline_io(q, cmds, n, r);
    sigpipe_restore(&g);
    return rc;
}

/* One command; an error reply is returned as such. Owned by the caller; NULL on I/O error. */
static redisReply *command_raw(struct kf_queue *q, const struct cmd *c) {
    redisReply *r = NULL;
    return run_pipeline(q, c, 1, &r) == 0 ? r : NULL;
}

/* One command; an error reply gives NULL with the error set. Owned by the caller. */
static redisReply *command(struct kf_queue *q, const struct cmd *c) {
    redisReply *r = command_raw(q, c);
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        set_error(q, "%s: %s", c->argv[0], r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* A command whose reply only has to be a non-error. 0 or -1. */
static int command_ok(struct kf_queue *q, const struct cmd *c) {
    redisReply *r = command(q, c);
    freeReplyObject(r);
    return r != NULL ? 0 : -1;
}

int kf_queue_ping(struct kf_queue *q) {
    struct cmd c = make_cmd(1, "PING");
    return command_ok(q, &c);
}

void kf_queue_stream(const char *klass, char *out, size_t n) {
    snprintf(out, n, "kforge:jobs:%s", klass);
}

int kf_queue_ensure_group(struct kf_queue *q, const char *stream) {
    struct cmd c = make_cmd(6, "XGROUP", "CREATE", stream, KF_QUEUE_GROUP, "0", "MKSTREAM");
    redisReply *r = command_raw(q, &c);
    if (r == NULL)
        return -1;
    int rc = 0;
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYGROUP", 9) != 0) {
        set_error(q, "XGROUP CREATE %s: %s", stream, r->str);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

static void copy_id(char *out, const redisReply *r) {
    if (out != NULL)
        snprintf(out, KF_STREAM_ID_MAX, "%s", r->str != NULL ? r->str : "");
}

/* The set of the jobs that have an entry on the stream: STREAM ":ids". */
static void ids_key(const char *stream, char *out, size_t n) {
    snprintf(out, n, "%s:ids", stream);
}

int kf_queue_add(struct kf_queue *q, const char *stream, const char *job_id,
                 char id[KF_STREAM_ID_MAX]) {
    char ids[256];
    ids_key(stream, ids, sizeof(ids));
    struct cmd cmds[2] = {make_cmd(5, "XADD", stream, "*", "job", job_id),
                          make_cmd(3, "SADD", ids, job_id)};
    redisReply *r[2] = {NULL, NULL};
    if (run_pipeline(q, cmds, 2, r) != 0)
        return -1;
    int rc = 0;
    if (r[0]->type == REDIS_REPLY_STRING) {
        copy_id(id, r[0]);
    } else {
        set_error(q, "XADD %s: unexpected reply", stream);
        rc = -1;
    }
    if (r[1]->type == REDIS_REPLY_ERROR) {
        set_error(q, "SADD %s: %s", ids, r[1]->str);
        rc = -1;
    }
    freeReplyObject(r[0]);
    freeReplyObject(r[1]);
    return rc;
}

int kf_queue_ack(struct kf_queue *q, const char *stream, const char *id, const char *job_id) {
    char ids[256];
    ids_key(stream, ids, sizeof(ids));
    struct cmd cmds[3] = {make_cmd(4, "XACK", stream, KF_QUEUE_GROUP, id),
                          make_cmd(3, "XDEL", stream, id), make_cmd(3, "SREM", ids, job_id)};
    int n = job_id ? 3 : 2;
    redisReply *r[3] = {NULL, NULL, NULL};
    if (run_pipeline(q, cmds, n, r) != 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (r[i]->type == REDIS_REPLY_ERROR) {
            set_error(q, "%s %s: %s", cmds[i].argv[0], id, r[i]->str);
            rc = -1;
        }
        freeReplyObject(r[i]);
    }
    return rc;
}

int kf_queue_has_job(struct kf_queue *q, const char *stream, const char *job_id) {
    char ids[256];
    ids_key(stream, ids, sizeof(ids));
    struct cmd c = make_cmd(3, "SISMEMBER", ids, job_id);
    redisReply *r = command(q, &c);
    if (r == NULL)
        return -1;
    int rc = r->type == REDIS_REPLY_INTEGER ? (r->integer ? 1 : 0) : -1;
    if (rc < 0)
        set_error(q, "SISMEMBER %s: unexpected reply", ids);
    freeReplyObject(r);
    return rc;
}

/* The job id of one stream entry [id, [field, value, ...]]: 1 found, 0 not an entry with a
 * usable `job` field (its id is still copied when it has one). */
static int entry_job(const redisReply *e, char job_id[40], char id[KF_STREAM_ID_MAX]) {
    id[0] = '\0';
    if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
        e->element[0]->type != REDIS_REPLY_STRING)
        return 0;
    copy_id(id, e->element[0]);
    const redisReply *f = e->elements >= 2 ? e->element[1] : NULL;
    if (f == NULL || f->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, "job") == 0 &&
            v->type == REDIS_REPLY_STRING && v->len > 0 && v->len < 40) {
            memcpy(job_id, v->str, v->len);
            job_id[v->len] = '\0';
            return 1;
        }
    }
    return 0;
}

/* An entry without a job: acknowledged and deleted so that nobody reads it again. */
static void skip_entry(struct kf_queue *q, const char *stream, const char *id) {
    if (id[0] != '\0')
        kf_queue_ack(q, stream, id, NULL);
}

/* Sets the command timeout, also for connections made while it is in force. */
static void set_timeout(struct kf_queue *q, long ms) {
    q->cmd_timeout_ms = ms;
    if (q->c != NULL)
        redisSetTimeout(q->c, ms_to_tv(ms));
}

/* A command on a group's stream; when Redis lost the group (a restart without persistence),
 * creates it again and retries once. Owned by the caller; NULL with the error set. */
static redisReply *group_command(struct kf_queue *q, const char *stream, const struct cmd *c) {
    redisReply *r = command(q, c);
    if (r == NULL && strstr(q->error, "NOGROUP") != NULL && kf_queue_ensure_group(q, stream) == 0)
        r = command(q, c);
    return r;
}

/* The job of the first entry of an XREADGROUP reply [[stream, [[id, [f, v, ...]]]]] (or nil):
 * 1, or 0 (none, or one without a job, which is acknowledged and skipped). */
static int read_reply_job(struct kf_queue *q, const char *stream, const redisReply *r,
                          char job_id[40], char id[KF_STREAM_ID_MAX]) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 2)
        return 0;
    const redisReply *entries = r->element[0]->element[1];
    if (entries->type != REDIS_REPLY_ARRAY || entries->elements == 0)
        return 0;
    int rc = entry_job(entries->element[0], job_id, id);
    if (rc == 0)
        skip_entry(q, stream, id);
    return rc;
}

int kf_queue_read(struct kf_queue *q, const char *stream, const char *consumer, int block_ms,
                  char job_id[40], char id[KF_STREAM_ID_MAX]) {
    char block[24];
    snprintf(block, sizeof(block), "%d", block_ms);
    /* BLOCK 0 would wait forever: without a positive block_ms the read does not block */
    struct cmd c = block_ms > 0 ? make_cmd(11, "XREADGROUP", "GROUP", KF_QUEUE_GROUP, consumer,
                                           "COUNT", "1", "BLOCK", block, "STREAMS", stream, ">")
                                : make_cmd(9, "XREADGROUP", "GROUP", KF_QUEUE_GROUP, consumer,
                                           "COUNT", "1", "STREAMS", stream, ">");
    set_timeout(q, (long)q->timeout_ms + (block_ms > 0 ? block_ms : 0));
    redisReply *r = group_command(q, stream, &c);
    set_timeout(q, q->timeout_ms);
    if (r == NULL)
        return -1;
    int rc = read_reply_job(q, stream, r, job_id, id);
    freeReplyObject(r);
    return rc;
}

/* One XAUTOCLAIM step from *start: 1 claimed, 0 none here (start gets the next cursor, "0-0"
 * at the end), -1 error. */
static int autoclaim_step(struct kf_queue *q, const char *stream, const char *consumer,
                          const char *idle, char start[KF_STREAM_ID_MAX], char job_id[40],
                          char id[KF_STREAM_ID_MAX]) {
    char from[KF_STREAM_ID_MAX];
    snprintf(from, sizeof(from), "%s", start);
    struct cmd c =
        make_cmd(8, "XAUTOCLAIM", stream, KF_QUEUE_GROUP, consumer, idle, from, "COUNT", "1");
    redisReply *r = group_command(q, stream, &c);
    if (r == NULL)
        return -1;
    /* [next-id, [[id, [field, value, ...]] ...], [deleted ids]] */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
        set_error(q, "XAUTOCLAIM %s: unexpected reply", stream);
        freeReplyObject(r);
        return -1;
    }
    copy_id(start, r->element[0]);
    int rc = 0;
    const redisReply *entries = r->element[1];
    for (size_t i = 0; i < entries->elements && rc == 0; i++) {
        rc = entry_job(entries->element[i], job_id, id);
        if (rc == 0)
            skip_entry(q, stream, id);
    }
    freeReplyObject(r);
    return rc;
}

int kf_queue_autoclaim(struct kf_queue *q, const char *stream, const char *consumer,
                       long min_idle_ms, char job_id[40], char id[KF_STREAM_ID_MAX]) {
    char idle[24], start[KF_STREAM_ID_MAX] = "0-0";
    snprintf(idle, sizeof(idle), "%ld", min_idle_ms > 0 ? min_idle_ms : 0);
    for (int step = 0; step < 100; step++) {
        int rc = autoclaim_step(q, stream, consumer, idle, start, job_id, id);
        if (rc != 0 || strcmp(start, "0-0") == 0)
            return rc;
    }
    return 0;
}

int kf_queue_dead_letter(struct kf_queue *q, const char *job_id, const char *klass,
                         const char *reason) {
    struct cmd c = make_cmd(9, "XADD", KF_QUEUE_DEAD, "*", "job", job_id, "class",
                            klass != NULL ? klass : "", "reason", reason != NULL ? reason : "");
    return command_ok(q, &c);
}

long kf_queue_len(struct kf_queue *q, const char *stream) {
    struct cmd c = make_cmd(2, "XLEN", stream);
    redisReply *r = command(q, &c);
    long n = r != NULL && r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
    freeReplyObject(r);
    return n;
}

long kf_queue_pending(struct kf_queue *q, const char *stream) {
    struct cmd c = make_cmd(3, "XPENDING", stream, KF_QUEUE_GROUP);
    redisReply *r = command_raw(q, &c);
    if (r == NULL)
        return -1;
    long n = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER)
        n = (long)r->element[0]->integer;
    else if (r->type == REDIS_REPLY_ERROR &&
             (strncmp(r->str, "NOGROUP", 7) == 0 || strstr(r->str, "no such key") != NULL))
        n = 0; /* no stream or no group yet: nothing pending */
    else
        set_error(q, "XPENDING %s: %s", stream, r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    return n;
}

long kf_queue_rate_hit(struct kf_queue *q, const char *key_id, int *retry_after_s) {
    time_t now = time(NULL);
    char key[256];
    snprintf(key, sizeof(key), KF_RL_PREFIX "%s:%lld", key_id, (long long)(now / 60));
    if (retry_after_s != NULL)
        *retry_after_s = (int)(60 - now % 60);
    struct cmd cmds[4] = {make_cmd(1, "MULTI"), make_cmd(2, "INCR", key),
                          make_cmd(3, "EXPIRE", key, "120"), make_cmd(1, "EXEC")};
    redisReply *r[4] = {NULL, NULL, NULL, NULL};
    if (run_pipeline(q, cmds, 4, r) != 0)
        return -1;
    long count = -1;
    const redisReply *ex = r[3];
    if (ex->type == REDIS_REPLY_ARRAY && ex->elements >= 1 &&
        ex->element[0]->type == REDIS_REPLY_INTEGER)
        count = (long)ex->element[0]->integer;
    else
        set_error(q, "rate limit: %s", ex->type == REDIS_REPLY_ERROR ? ex->str : "bad reply");
    for (int i = 0; i < 4; i++)
        freeReplyObject(r[i]);
    return count;
}

int kf_queue_heartbeat(struct kf_queue *q, const char *worker, const char *json, int ttl_s) {
    char key[256], ttl[16];
    snprintf(key, sizeof(key), KF_HB_PREFIX "%s", worker);
    snprintf(ttl, sizeof(ttl), "%d", ttl_s > 0 ? ttl_s : 1);
    struct cmd c = make_cmd(5, "SET", key, json, "EX", ttl);
    return command_ok(q, &c);
}

/* GETs each key of a SCAN batch and calls fn for the live ones. The count, or -1. */
static long report_batch(struct kf_queue *q, const redisReply *keys, kf_queue_hb_fn fn, void *arg) {
    long count = 0;
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING)
            continue;
        struct cmd c = make_cmd(2, "GET", k->str);
        redisReply *v = command(q, &c);
        if (v == NULL)
            return -1;
        if (v->type == REDIS_REPLY_STRING) {
            if (fn != NULL)
                fn(k->str + strlen(KF_HB_PREFIX), v->str, arg);
            count++;
        }
        freeReplyObject(v);
    }
    return count;
}

long kf_queue_heartbeats(struct kf_queue *q, kf_queue_hb_fn fn, void *arg) {
    char cursor[32] = "0";
    long total = 0;
    do {
        struct cmd c = make_cmd(6, "SCAN", cursor, "MATCH", KF_HB_PREFIX "*", "COUNT", "100");
        redisReply *r = command(q, &c);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
            set_error(q, "SCAN: unexpected reply");
            freeReplyObject(r);
            return -1;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        long n = report_batch(q, r->element[1], fn, arg);
        freeReplyObject(r);
        if (n < 0)
            return -1;
        total += n;
    } while (strcmp(cursor, "0") != 0);
    return total;
}

#define KF_CLASSES_KEY "kforge:classes"

int kf_queue_class_beat(struct kf_queue *q, const char *klass) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char now[32];
    snprintf(now, sizeof(now), "%lld", (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000);
    struct cmd c = make_cmd(4, "ZADD", KF_CLASSES_KEY, now, klass);
    return command_ok(q, &c);
}

long kf_queue_classes(struct kf_queue *q, long long since_ms, kf_queue_class_fn fn, void *arg) {
    char since[32];
    snprintf(since, sizeof(since), "%lld", since_ms);
    struct cmd c = make_cmd(4, "ZRANGEBYSCORE", KF_CLASSES_KEY, since, "+inf");
    redisReply *r = command(q, &c);
    if (r == NULL)
        return -1;
    long n = -1;
    if (r->type == REDIS_REPLY_ARRAY) {
        n = 0;
        for (size_t i = 0; i < r->elements; i++) {
            if (r->element[i]->type != REDIS_REPLY_STRING)
                continue;
            if (fn != NULL)
                fn(r->element[i]->str, arg);
            n++;
        }
    } else {
        set_error(q, "ZRANGEBYSCORE: unexpected reply");
    }
    freeReplyObject(r);
    return n;
}

int kf_queue_class_forget(struct kf_queue *q, const char *klass) {
    struct cmd c = make_cmd(3, "ZREM", KF_CLASSES_KEY, klass);
    return command_ok(q, &c);
}

int kf_queue_heartbeat_end(struct kf_queue *q, const char *worker) {
    char key[256];
    snprintf(key, sizeof(key), KF_HB_PREFIX "%s", worker);
    struct cmd c = make_cmd(2, "DEL", key);
    return command_ok(q, &c);
}
