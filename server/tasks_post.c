/* tasks_post.c: POST /v1/tasks. A new source gives 201 {"task", "job"} (its check_task job);
 * a source already stored gives 200 {"task", "job": null} and stores nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "enqueue.h"
#include "jspec.h"
#include "quota.h"
#include "reply.h"
#include "tasks_post.h"
#include "util.h"

struct task_in {
    struct kf_new_task t;
    struct kf_quota quota;
};

/* The task, and the owner's quota when it made a check job. */
static int tx(struct kf_db *db, void *arg) {
    struct task_in *in = arg;
    int rc = kf_task_upsert(db, &in->t);
    return rc != 0 || !in->t.created ? rc : kf_quota_tx(db, &in->quota);
}

static char *one_value(struct kf_db *db, const char *stmt, const char *id) {
    const char *p[] = {id};
    PGresult *res = kf_db_exec(db, stmt, 1, p);
    char *v = res && PQntuples(res) == 1 ? strdup(PQgetvalue(res, 0, 0)) : NULL;
    PQclear(res);
    return v;
}

static enum MHD_Result reply(struct kf_req *r, struct kf_db *db, const struct kf_new_task *t) {
    char *task = one_value(db, "task_json", t->id);
    char *job = t->created ? one_value(db, "job_get", t->job_id) : NULL;
    enum MHD_Result ret;
    char *out = NULL;
    if (!task || (t->created && !job))
        ret = kf_reply_db_error(r, db);
    else if (asprintf(&out, "{\"task\":%s,\"job\":%s}", task, job ? job : "null") < 0)
        ret = kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    else
        ret = kf_reply_text(r, t->created ? MHD_HTTP_CREATED : MHD_HTTP_OK, out, 0);
    free(out);
    free(task);
    free(job);
    return ret;
}

bool kf_suite_valid(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64 || s[0] == '.' || s[0] == '_' || s[0] == '-')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* Checks a task's source, name and suite as POST /v1/tasks and the "task" of POST
 * /v1/evaluations take them; fills t (name into name_buf when defaulted). Returns true, or
 * false with the error queued. */
bool kf_task_fields_ok(struct kf_req *r, const char *prefix, struct kf_new_task *t,
                       char name_buf[16], char sha[65]) {
    char field[64];
    if (t->suite && !kf_suite_valid(t->suite)) {
        snprintf(field, sizeof field, "%s%ssuite", prefix ? prefix : "", prefix ? "." : "");
        kf_reply_error(r, KF_E_INVALID_FIELD, field,
                       "%s: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (e.g. examples, user)", field);
        return false;
    }
    size_t len = strlen(t->source);
    snprintf(field, sizeof field, "%s%ssource", prefix ? prefix : "", prefix ? "." : "");
    if (len == 0) {
        kf_reply_error(r, KF_E_INVALID_FIELD, field, "%s: must not be empty", field);
        return false;
    }
    if ((long)len > r->srv->cfg->max_source_bytes) {
        kf_reply_error(r, KF_E_TASK_SOURCE_TOO_LARGE, field, "%s: longer than %ld bytes", field,
                       r->srv->cfg->max_source_bytes);
        return false;
    }
    if (t->name && !t->name[0]) {
        snprintf(field, sizeof field, "%s%sname", prefix ? prefix : "", prefix ? "." : "");
        kf_reply_error(r, KF_E_INVALID_FIELD, field, "%s: must not be empty", field);
        return false;
    }
    kf_sha256_hex(t->source, len, sha);
    t->sha256 = sha;
    if (!t->name) {
        snprintf(name_buf, 16, "task-%.8s", sha);
        t->name = name_buf;
    }
    return true;
}

/* Checks a backend; false with 400 unsupported_backend queued. */
bool kf_backend_ok(struct kf_req *r, const char *backend) {
    if (strcmp(backend, "cuda") == 0 || strcmp(backend, "cpu") == 0)
        return true;
    kf_reply_error(r, KF_E_UNSUPPORTED_BACKEND, "backend", "backend: must be one of cuda, cpu");
    return false;
}

enum MHD_Result kf_tasks_post(struct kf_req *r) {
    struct task_in in = {0};
    struct kf_new_task *t = &in.t;
    const char *source = NULL, *name = NULL, *backend = r->srv->cfg->default_backend;
    struct kf_jfield fields[] = {
        {.name = "source", .type = KF_J_STRING, .required = true, .out = &source},
        {.name = "name", .type = KF_J_STRING, .out = &name, .max_len = 128},
        {.name = "backend", .type = KF_J_STRING, .out = &backend},
        {.name = "suite", .type = KF_J_STRING, .out = &t->suite},
    };
    struct kf_jerr err;
    if (kf_jspec_parse(r->json, fields, sizeof fields / sizeof fields[0], NULL, false, &err))
        return kf_reply_error(r, err.code, err.field, "%s", err.message);
    if (!kf_backend_ok(r, backend))
        return MHD_YES;
    t->source = source;
    t->name = name;
    t->backend = backend;
    t->klass = kf_srv_class(r->srv, backend);
    t->owner = r->owner[0] ? r->owner : NULL;
    kf_quota_init(&in.quota, r);
    char name_buf[16], sha[65];
    if (!kf_task_fields_ok(r, NULL, t, name_buf, sha))
        return MHD_YES;
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    enum MHD_Result ret;
    if (kf_quota_write(db, &in.quota, tx, &in, KF_SRV_TX_TRIES) != 0)
        ret = in.quota.over ? kf_quota_reply(r, &in.quota) : kf_reply_db_error(r, db);
    else {
        if (t->created)
            kf_job_dispatch(r, t->klass, t->job_id);
        ret = reply(r, db, t);
    }
    kf_srv_db_put(r->srv, db);
    return ret;
}
