/* evaluations_post.c: POST /v1/evaluations. Everything is checked before anything is stored;
 * then one transaction writes the task (when given inline), the candidate, the job with its
 * queued event and the evaluation; the XADDs follow the COMMIT. With "wait", the request is
 * parked and the job polled every 25 ms until it finished or the wait ran out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "enqueue.h"
#include "evaluations_post.h"
#include "jspec.h"
#include "park.h"
#include "quota.h"
#include "reply.h"
#include "tasks_post.h"
#include "util.h"

#define KF_WAIT_POLL_MS 25

struct eval_in {
    const char *task_id, *format, *backend, *klass;
    json_t *files;
    char *files_text;  /* JSON of files, for the candidates row */
    char *payload;     /* the job's payload */
    const char *admin; /* "true" or "false": the caller's key is an admin's */
    bool has_task;
    struct kf_new_task task;
    char cand_sha[65];
    /* filled by the transaction */
    char cand_id[37], eval_id[37];
    struct kf_new_job job;
    bool task_invalid, task_missing;
    struct kf_quota quota;
};

struct eval_wait {
    char eval_id[37];
    int64_t deadline_ms;
};

static bool name_ok(const char *n) {
    if (!n[0] || n[0] == '/' || strlen(n) > 255)
        return false;
    for (const char *p = n; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '/'))
            return false;
    }
    /* no empty parts, no ".." (nor "." parts) */
    const char *part = n;
    for (;;) {
        size_t len = strcspn(part, "/");
        if (len == 0 || (len == 2 && strncmp(part, "..", 2) == 0) || (len == 1 && part[0] == '.'))
            return false;
        if (!part[len])
            return true;
        part += len + 1;
    }
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks candidate.files and hashes them (sorted names and contents). false: error queued. */
static bool files_ok(struct kf_req *r, struct eval_in *in) {
    const struct kf_config *cfg = r->srv->cfg;
    size_t n = json_object_size(in->files);
    if (n == 0) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "candidate.files",
                       "candidate.files: at least one file");
        return false;
    }
    if ((long)n > cfg->max_files) {
        kf_reply_error(r, KF_E_TOO_MANY_FILES, "candidate.files",
                       "candidate.files: more than %ld files", cfg->max_files);
        return false;
    }
    const char **names = calloc(n, sizeof *names);
    if (!names) {
        kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
        return false;
    }
    size_t i = 0, total = 0;
    const char *key;
    json_t *val;
    json_object_foreach(in->files, key, val) {
        names[i++] = key;
    }
    qsort(names, n, sizeof *names, cmp_str);
    bool ok = true;
    for (i = 0; i < n && ok; i++) {
        val = json_object_get(in->files, names[i]);
        if (!name_ok(names[i])) {
            ok = false;
            kf_reply_error(r, KF_E_INVALID_FILE_NAME, "candidate.files",
                           "candidate.files: bad file name \"%.100s\"", names[i]);
        } else if (!json_is_string(val)) {
            ok = false;
            kf_reply_error(r, KF_E_INVALID_FIELD, "candidate.files",
                           "candidate.files: \"%.100s\" must be a string", names[i]);
        } else if ((long)json_string_length(val) > cfg->max_file_bytes) {
            ok = false;
            kf_reply_error(r, KF_E_FILE_TOO_LARGE, "candidate.files",
                           "candidate.files: \"%.100s\" is longer than %ld bytes", names[i],
                           cfg->max_file_bytes);
        } else
            total += strlen(names[i]) + json_string_length(val) + 2;
    }
    char *buf = ok ? malloc(total + 1) : NULL;
    if (ok && !buf) {
        ok = false;
        kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    }
    if (ok) {
        size_t len = 0;
        for (i = 0; i < n; i++) {
            val = json_object_get(in->files, names[i]);
            size_t kl = strlen(names[i]) + 1, vl = json_string_length(val);
            memcpy(buf + len, names[i], kl);
            len += kl;
            memcpy(buf + len, json_string_value(val), vl);
            len += vl;
            buf[len++] = '\0';
        }
        kf_sha256_hex(buf, len, in->cand_sha);
    }
    free(buf);
    free(names);
    return ok;
}

static int tx(struct kf_db *db, void *arg) {
    struct eval_in *in = arg;
    const char *task_id = in->task_id;
    int rc = kf_task_resolve(db, in->has_task ? &in->task : NULL, &task_id, in->admin,
                             in->task.owner, &in->task_missing, &in->task_invalid);
    if (rc != 0)
        return rc;
    if (kf_uuid_new(in->cand_id) != 0 || kf_uuid_new(in->eval_id) != 0)
        return -1;
    const char *c[] = {in->cand_id, task_id, in->format, in->files_text, in->cand_sha};
    PGresult *res = kf_db_exec(db, "candidate_insert", 5, c);
    if (!res)
        return kf_tx_fail(db);
    PQclear(res);
    json_t *pl = json_loads(in->payload, 0, NULL);
    json_object_set_new(pl, "evaluation_id", json_string(in->eval_id));
    json_object_set_new(pl, "candidate_id", json_string(in->cand_id));
    char *payload = json_dumps(pl, JSON_COMPACT);
    json_decref(pl);
    in->job.kind = "evaluate";
    in->job.klass = in->klass;
    in->job.backend = in->backend;
    in->job.task_id = task_id;
    in->job.payload = payload;
    in->job.owner = in->task.owner;
    rc = payload ? kf_job_insert(db, &in->job) : -1;
    free(payload);
    in->job.payload = NULL;
    if (rc != 0)
        return rc;
    const char *e[] = {in->eval_id, in->job.id, task_id, in->cand_id, in->backend};
    res = kf_db_exec(db, "evaluation_insert", 5, e);
    if (!res)
        return kf_tx_fail(db);
    PQclear(res);
    return kf_quota_tx(db, &in->quota);
}

/* Answers with {"evaluation", "job"}: 200 when the job finished, else 202 (or, while waiting
 * and time is left, parks the request again). */
static enum MHD_Result reply_pair(struct kf_req *r, const char *eval_id, bool may_park) {
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *p[] = {eval_id};
    PGresult *res = kf_db_exec(db, "evaluation_pair", 1, p);
    if (!res) {
        enum MHD_Result ret = kf_reply_db_error(r, db);
        kf_srv_db_put(r->srv, db);
        return ret;
    }
    kf_srv_db_put(r->srv, db);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return kf_reply_error(r, KF_E_EVALUATION_NOT_FOUND, NULL, NULL);
    }
    bool finished = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    enum MHD_Result ret = MHD_YES;
    if (!finished && may_park && kf_park(r->srv->park, r->conn, KF_WAIT_POLL_MS) == 0)
        ret = MHD_YES;
    else
        ret = kf_reply_text(r, finished ? MHD_HTTP_OK : MHD_HTTP_ACCEPTED, PQgetvalue(res, 0, 0),
                            (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    return ret;
}

static enum MHD_Result resume_wait(struct kf_req *r) {
    struct eval_wait *w = r->hstate;
    if (kf_peer_gone(r->conn))
        return MHD_NO; /* the client left: close, nothing to answer */
    bool more = kf_now_ms() + KF_WAIT_POLL_MS < w->deadline_ms && !r->srv->stopping;
    return reply_pair(r, w->eval_id, more);
}

/* Parses the body into in; false with the error queued. */
static bool parse(struct kf_req *r, struct eval_in *in, int64_t *wait) {
    const struct kf_config *cfg = r->srv->cfg;
    static const char *const formats[] = {"native", "kernelbench", "cuda-agent", NULL};
    json_t *task = NULL, *cand = NULL, *opts = NULL;
    bool no_compile = false, has_budget = false;
    double budget = 0, wait_d = 0;
    struct kf_jfield top[] = {
        {.name = "task_id", .type = KF_J_UUID, .out = &in->task_id},
        {.name = "task", .type = KF_J_OBJECT, .out = &task},
        {.name = "candidate", .type = KF_J_OBJECT, .required = true, .out = &cand},
        {.name = "backend", .type = KF_J_STRING, .out = &in->backend},
        {.name = "wait",
         .type = KF_J_NUMBER,
         .out = &wait_d,
         .min = 0,
         .max = (double)cfg->wait_max_s},
        {.name = "options", .type = KF_J_OBJECT, .out = &opts},
    };
    struct kf_jfield tfields[] = {
        {.name = "source", .type = KF_J_STRING, .required = true, .out = &in->task.source},
        {.name = "name", .type = KF_J_STRING, .out = &in->task.name, .max_len = 128},
        {.name = "suite", .type = KF_J_STRING, .out = &in->task.suite},
    };
    struct kf_jfield cfields[] = {
        {.name = "format", .type = KF_J_ENUM, .out = &in->format, .choices = formats},
        {.name = "files", .type = KF_J_OBJECT, .required = true, .out = &in->files},
    };
    struct kf_jfield ofields[] = {
        {.name = "no_compile", .type = KF_J_BOOL, .out = &no_compile},
        {.name = "budget_s",
         .type = KF_J_NUMBER,
         .out = &budget,
         .present = &has_budget,
         .min = 0.05,
         .max = 60},
    };
    struct kf_jerr err;
#define N(a) (sizeof(a) / sizeof((a)[0]))
    if (kf_jspec_parse(r->json, top, N(top), NULL, false, &err) ||
        (task && kf_jspec_parse(task, tfields, N(tfields), "task", false, &err)) ||
        kf_jspec_parse(cand, cfields, N(cfields), "candidate", false, &err) ||
        (opts && kf_jspec_parse(opts, ofields, N(ofields), "options", false, &err))) {
        kf_reply_error(r, err.code, err.field, "%s", err.message);
        return false;
    }
    /* a number, so that 40.0 counts as the integer JSON Schema says it is (the bounds above,
     * or the first test when there are none, keep the cast defined) */
    if ((cfg->wait_max_s == 0 && wait_d != 0) || wait_d != (double)(int64_t)wait_d) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "wait", "wait: must be an integer in [0, %ld]",
                       cfg->wait_max_s);
        return false;
    }
    *wait = (int64_t)wait_d;
    if (!in->task_id == !task) {
        kf_reply_error(r, in->task_id ? KF_E_INVALID_FIELD : KF_E_MISSING_FIELD,
                       in->task_id ? "task" : "task_id", "give exactly one of task_id and task");
        return false;
    }
    if (!kf_backend_ok(r, in->backend) || !files_ok(r, in))
        return false;
    in->klass = kf_srv_class(r->srv, in->backend);
    in->has_task = task != NULL;
    if (task) {
        in->task.backend = in->backend;
        in->task.klass = in->klass;
    }
    json_t *pl =
        json_pack("{s:s, s:{s:b}}", "format", in->format, "options", "no_compile", no_compile);
    if (pl && has_budget)
        json_object_set_new(json_object_get(pl, "options"), "budget_s", json_real(budget));
    in->payload = pl ? json_dumps(pl, JSON_COMPACT) : NULL;
    json_decref(pl);
    in->files_text = json_dumps(in->files, JSON_COMPACT);
    if (!in->payload || !in->files_text) {
        kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
        return false;
    }
    return true;
}

static enum MHD_Result create(struct kf_req *r) {
    struct eval_in in = {.format = "native", .backend = r->srv->cfg->default_backend};
    kf_access_viewer(r, &in.admin, &in.task.owner); /* the job's and the task's */
    kf_quota_init(&in.quota, r);
    int64_t wait = 0;
    char name_buf[16], sha[65];
    enum MHD_Result ret = MHD_YES;
    if (!parse(r, &in, &wait) ||
        (in.has_task && !kf_task_fields_ok(r, "task", &in.task, name_buf, sha)))
        goto out;
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db) {
        ret = kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
        goto out;
    }
    int rc = kf_quota_write(db, &in.quota, tx, &in, KF_SRV_TX_TRIES);
    if (rc != 0) {
        if (in.quota.over)
            ret = kf_quota_reply(r, &in.quota);
        else if (in.task_missing)
            ret = kf_reply_error(r, KF_E_TASK_NOT_FOUND, "task_id", NULL);
        else if (in.task_invalid)
            ret = kf_reply_task_invalid(r, db, in.has_task ? in.task.id : in.task_id,
                                        in.has_task ? "task" : "task_id");
        else
            ret = kf_reply_db_error(r, db);
        kf_srv_db_put(r->srv, db);
        goto out;
    }
    kf_srv_db_put(r->srv, db);
    if (in.has_task && in.task.created)
        kf_job_dispatch(r, in.klass, in.task.job_id);
    kf_job_dispatch(r, in.klass, in.job.id);
    struct eval_wait *w = NULL;
    if (wait > 0 && (w = calloc(1, sizeof *w))) {
        snprintf(w->eval_id, sizeof w->eval_id, "%s", in.eval_id);
        w->deadline_ms = kf_now_ms() + wait * 1000;
        r->hstate = w;
        r->hstate_free = free;
    }
    ret = reply_pair(r, in.eval_id, w != NULL);
out:
    free(in.files_text);
    free(in.payload);
    return ret;
}

enum MHD_Result kf_evaluations_post(struct kf_req *r) {
    return r->hstate ? resume_wait(r) : create(r);
}
