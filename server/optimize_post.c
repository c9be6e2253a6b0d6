/* optimize_post.c: POST /v1/optimize. Everything is checked before anything is stored: the
 * task (inline or by id, as POST /v1/evaluations takes it), the policy, the limits and the
 * options. Then one transaction writes the task (when inline, with its check_task job), the
 * optimize job with its queued event, and its episode (queued); the XADDs follow the COMMIT.
 *
 * The job's payload is {"episode_id", "policy": {"name", ...}, "limits": {all five},
 * "options": {"budget_s"?, "no_compile"?}}; the episode stores the policy's name, its other
 * members as policy_config, and the limits. No API key travels in a request: the policy's
 * api_key_name names one in the worker's configuration, and a base_url with credentials in it
 * is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "enqueue.h"
#include "jspec.h"
#include "liveness.h"
#include "optimize_post.h"
#include "quota.h"
#include "reply.h"
#include "tasks_post.h"
#include "util.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define KF_URL_MAX 2048
#define KF_MODEL_MAX 256
#define KF_KEY_NAME_MAX 64
#define KF_STOP_MAX 4

/* The episode's limits: bounds and default of each (OptimizeLimits in openapi/openapi.yaml). */
struct limit_spec {
    const char *name;
    int64_t min, max, def;
};

static const struct limit_spec limit_specs[] = {
    {"max_turns", 1, 1000, 200},
    {"max_context_tokens", 1024, 1048576, 131072},
    {"max_wall_s", 10, 86400, 3600},
    {"max_gpu_s", 1, 86400, 1800},
    {"max_tool_output_bytes", 1024, 1048576, 16384},
};

struct opt_in {
    const char *task_id, *backend, *klass;
    const char *policy;  /* the policy's name */
    const char *publish; /* none, results or sources */
    const char *admin;   /* "true" or "false": the caller's key is an admin's */
    bool has_task;
    struct kf_new_task task;
    json_t *payload;   /* owned: the job's payload, but for episode_id (set by the transaction) */
    char *config_text; /* owned: the episode's policy_config (JSON) */
    char *limits_text; /* owned: the episode's limits (JSON) */
    /* filled by the transaction */
    char episode_id[37];
    struct kf_new_job job;
    bool task_invalid, task_missing;
    struct kf_quota quota;
};

/* JSON Schema counts 40.0 as the integer 40: when obj is an object whose member name is such a
 * real, it becomes an integer, so that KF_J_INT takes it and the stored JSON holds 40. Reals
 * with a fraction or out of range are left for KF_J_INT to refuse. */
static void integral_real(json_t *obj, const char *name) {
    json_t *v = json_is_object(obj) ? json_object_get(obj, name) : NULL;
    if (!json_is_real(v))
        return;
    double d = json_real_value(v);
    if (d >= -9.2e18 && d <= 9.2e18 && d == (double)(json_int_t)d)
        json_object_set_new(obj, name, json_integer((json_int_t)d));
}

/* An http:// or https:// URL with a host, no credentials and no blanks or control
 * characters; false with 400 invalid_field on policy.base_url queued. */
static bool url_ok(struct kf_req *r, const char *u) {
    size_t skip = strncmp(u, "http://", 7) == 0 ? 7 : strncmp(u, "https://", 8) == 0 ? 8 : 0;
    size_t host = skip ? strcspn(u + skip, "/?#") : 0;
    bool clean = true;
    for (const char *p = u; *p && clean; p++)
        clean = (unsigned char)*p > ' ' && *p != 0x7f;
    if (!skip || host == 0 || !clean) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "policy.base_url",
                       "policy.base_url: must be an http:// or https:// URL with a host and no "
                       "blanks, e.g. http://vllm:8000/v1");
        return false;
    }
    if (memchr(u + skip, '@', host)) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "policy.base_url",
                       "policy.base_url: must not carry credentials; name the worker's key "
                       "with policy.api_key_name");
        return false;
    }
    return true;
}

/* [A-Za-z0-9_]{1,64} (the length bound is the spec's max_len). */
static bool key_name_ok(const char *s) {
    if (!s[0])
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* Checks policy.sampling; false with the error queued. */
static bool sampling_ok(struct kf_req *r, json_t *sampling) {
    double temperature = 0, top_p = 1;
    int64_t max_tokens = 0, seed = 0;
    bool has_top_p = false;
    const char *stop_str = NULL;
    json_t *stop_arr = NULL;
    json_t *stop = json_object_get(sampling, "stop");
    bool stop_is_arr = json_is_array(stop);
    integral_real(sampling, "max_tokens");
    integral_real(sampling, "seed");
    struct kf_jfield fields[] = {
        {.name = "temperature", .type = KF_J_NUMBER, .out = &temperature, .min = 0, .max = 2},
        {.name = "top_p",
         .type = KF_J_NUMBER,
         .out = &top_p,
         .present = &has_top_p,
         .min = 0,
         .max = 1},
        {.name = "max_tokens", .type = KF_J_INT, .out = &max_tokens, .min = 1, .max = 1048576},
        {.name = "seed", .type = KF_J_INT, .out = &seed},
        {.name = "stop",
         .type = stop_is_arr ? KF_J_ARRAY : KF_J_STRING,
         .out = stop_is_arr ? (void *)&stop_arr : (void *)&stop_str,
         .max_len = stop_is_arr ? KF_STOP_MAX : 0},
    };
    struct kf_jerr err;
    if (kf_jspec_parse(sampling, fields, N(fields), "policy.sampling", false, &err)) {
        if (strcmp(err.field, "policy.sampling.stop") == 0)
            snprintf(err.message, sizeof err.message,
                     "policy.sampling.stop: must be a string or an array of at most %d strings",
                     KF_STOP_MAX);
        kf_reply_error(r, err.code, err.field, "%s", err.message);
        return false;
    }
    if (has_top_p && top_p <= 0) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "policy.sampling.top_p",
                       "policy.sampling.top_p: must be a number in (0, 1]");
        return false;
    }
    size_t i;
    json_t *item;
    json_array_foreach(stop_arr, i, item) {
        if (!json_is_string(item)) {
            kf_reply_error(r, KF_E_INVALID_FIELD, "policy.sampling.stop",
                           "policy.sampling.stop: must be a string or an array of at most %d "
                           "strings",
                           KF_STOP_MAX);
            return false;
        }
    }
    return true;
}

/* Checks the policy object (NULL: the expert policy with no settings) and sets in->policy;
 * the settings are in the object itself. false with the error queued. */
static bool policy_ok(struct kf_req *r, json_t *policy, struct opt_in *in) {
    static const char *const names[] = {"openai", "expert", NULL};
    const char *base_url = NULL, *model = NULL, *key_name = NULL;
    json_t *sampling = NULL;
    bool return_token_ids = false;
    int64_t logprobs = 0;
    in->policy = "expert";
    if (!policy)
        return true;
    integral_real(policy, "logprobs");
    struct kf_jfield fields[] = {
        {.name = "name", .type = KF_J_ENUM, .out = &in->policy, .choices = names},
        {.name = "base_url", .type = KF_J_STRING, .out = &base_url, .max_len = KF_URL_MAX},
        {.name = "model", .type = KF_J_STRING, .out = &model, .max_len = KF_MODEL_MAX},
        {.name = "api_key_name", .type = KF_J_STRING, .out = &key_name, .max_len = KF_KEY_NAME_MAX},
        {.name = "sampling", .type = KF_J_OBJECT, .out = &sampling},
        {.name = "return_token_ids", .type = KF_J_BOOL, .out = &return_token_ids},
        {.name = "logprobs", .type = KF_J_INT, .out = &logprobs, .min = 0, .max = 20},
    };
    struct kf_jerr err;
    if (kf_jspec_parse(policy, fields, N(fields), "policy", false, &err)) {
        kf_reply_error(r, err.code, err.field, "%s", err.message);
        return false;
    }
    if (strcmp(in->policy, "expert") == 0) {
        const char *extra = base_url ? "base_url" : model ? "model" : sampling ? "sampling" : NULL;
        if (extra) {
            char field[32];
            snprintf(field, sizeof field, "policy.%s", extra);
            kf_reply_error(r, KF_E_INVALID_FIELD, field,
                           "%s: the expert policy takes no endpoint (base_url, model, sampling "
                           "are for openai)",
                           field);
            return false;
        }
    } else if (!base_url || !model) {
        const char *field = !base_url ? "policy.base_url" : "policy.model";
        kf_reply_error(r, KF_E_MISSING_FIELD, field, "%s: the openai policy needs it", field);
        return false;
    }
    if (base_url && !url_ok(r, base_url))
        return false;
    if (model && !model[0]) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "policy.model", "policy.model: must not be empty");
        return false;
    }
    if (key_name && !key_name_ok(key_name)) {
        kf_reply_error(r, KF_E_INVALID_FIELD, "policy.api_key_name",
                       "policy.api_key_name: must match [A-Za-z0-9_]{1,%d} (the name of a key "
                       "in the worker's configuration, never the key)",
                       KF_KEY_NAME_MAX);
        return false;
    }
    return !sampling || sampling_ok(r, sampling);
}

/* Builds the payload (but for episode_id), policy_config and limits of in from the checked
 * request. false with the error queued (out of memory). */
static bool build(struct kf_req *r, struct opt_in *in, json_t *policy, const int64_t *limits,
                  json_t *options) {
    json_t *config = policy ? json_deep_copy(policy) : json_object();
    json_t *full = json_pack("{s:s}", "name", in->policy);
    json_t *lim = json_object();
    if (config)
        json_object_del(config, "name");
    for (size_t i = 0; lim && i < N(limit_specs); i++)
        json_object_set_new(lim, limit_specs[i].name, json_integer(limits[i]));
    if (full && config)
        json_object_update(full, config);
    in->config_text = config ? json_dumps(config, JSON_COMPACT) : NULL;
    in->limits_text = lim ? json_dumps(lim, JSON_COMPACT) : NULL;
    in->payload = full && lim && options ? json_pack("{s:O, s:O, s:O}", "policy", full, "limits",
                                                     lim, "options", options)
                                         : NULL;
    json_decref(config);
    json_decref(full);
    json_decref(lim);
    if (!in->payload || !in->config_text || !in->limits_text) {
        kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
        return false;
    }
    return true;
}

/* What the owner publishes of the episode (access.h): the leaderboard shows it from "results" */
static const char *const publish_levels[] = {"none", "results", "sources", NULL};

/* Parses the body into in; false with the error queued. */
static bool parse(struct kf_req *r, struct opt_in *in) {
    json_t *task = NULL, *policy = NULL, *limits = NULL, *opts = NULL;
    bool no_compile = false, has_no_compile = false, has_budget = false;
    double budget = 0;
    int64_t lim[N(limit_specs)];
    struct kf_jfield lfields[N(limit_specs)];
    for (size_t i = 0; i < N(limit_specs); i++) {
        lim[i] = limit_specs[i].def;
        lfields[i] = (struct kf_jfield){.name = limit_specs[i].name,
                                        .type = KF_J_INT,
                                        .out = &lim[i],
                                        .min = (double)limit_specs[i].min,
                                        .max = (double)limit_specs[i].max};
    }
    struct kf_jfield top[] = {
        {.name = "task_id", .type = KF_J_UUID, .out = &in->task_id},
        {.name = "task", .type = KF_J_OBJECT, .out = &task},
        {.name = "backend", .type = KF_J_STRING, .out = &in->backend},
        {.name = "policy", .type = KF_J_OBJECT, .out = &policy},
        {.name = "limits", .type = KF_J_OBJECT, .out = &limits},
        {.name = "options", .type = KF_J_OBJECT, .out = &opts},
        {.name = "publish", .type = KF_J_ENUM, .out = &in->publish, .choices = publish_levels},
    };
    struct kf_jfield tfields[] = {
        {.name = "source", .type = KF_J_STRING, .required = true, .out = &in->task.source},
        {.name = "name", .type = KF_J_STRING, .out = &in->task.name, .max_len = 128},
        {.name = "suite", .type = KF_J_STRING, .out = &in->task.suite},
    };
    struct kf_jfield ofields[] = {
        {.name = "budget_s",
         .type = KF_J_NUMBER,
         .out = &budget,
         .present = &has_budget,
         .min = 0.1,
         .max = 10},
        {.name = "no_compile", .type = KF_J_BOOL, .out = &no_compile, .present = &has_no_compile},
    };
    struct kf_jerr err;
    if (kf_jspec_parse(r->json, top, N(top), NULL, false, &err) ||
        (task && kf_jspec_parse(task, tfields, N(tfields), "task", false, &err))) {
        kf_reply_error(r, err.code, err.field, "%s", err.message);
        return false;
    }
    if (!policy_ok(r, policy, in))
        return false;
    for (size_t i = 0; i < N(limit_specs); i++)
        integral_real(limits, limit_specs[i].name);
    if ((limits && kf_jspec_parse(limits, lfields, N(lfields), "limits", false, &err)) ||
        (opts && kf_jspec_parse(opts, ofields, N(ofields), "options", false, &err))) {
        kf_reply_error(r, err.code, err.field, "%s", err.message);
        return false;
    }
    if (!in->task_id == !task) {
        kf_reply_error(r, in->task_id ? KF_E_INVALID_FIELD : KF_E_MISSING_FIELD,
                       in->task_id ? "task" : "task_id", "%s: give exactly one of task_id and task",
                       in->task_id ? "task" : "task_id");
        return false;
    }
    if (!kf_backend_ok(r, in->backend))
        return false;
    in->klass = kf_srv_class(r->srv, in->backend);
    in->has_task = task != NULL;
    if (task) {
        in->task.backend = in->backend;
        in->task.klass = in->klass;
    }
    json_t *options = json_object();
    if (options && has_budget)
        json_object_set_new(options, "budget_s", json_real(budget));
    if (options && has_no_compile)
        json_object_set_new(options, "no_compile", json_boolean(no_compile));
    bool ok = build(r, in, policy, lim, options);
    json_decref(options);
    return ok;
}

static int tx(struct kf_db *db, void *arg) {
    struct opt_in *in = arg;
    const char *task_id = in->task_id;
    int rc = kf_task_resolve(db, in->has_task ? &in->task : NULL, &task_id, in->admin,
                             in->task.owner, &in->task_missing, &in->task_invalid);
    if (rc != 0)
        return rc;
    if (kf_uuid_new(in->episode_id) != 0 ||
        json_object_set_new(in->payload, "episode_id", json_string(in->episode_id)) != 0)
        return -1;
    char *payload = json_dumps(in->payload, JSON_COMPACT);
    if (!payload)
        return -1;
    in->job.kind = "optimize";
    in->job.klass = in->klass;
    in->job.backend = in->backend;
    in->job.task_id = task_id;
    in->job.payload = payload;
    in->job.owner = in->task.owner;
    rc = kf_job_insert(db, &in->job);
    free(payload);
    in->job.payload = NULL;
    if (rc != 0)
        return rc;
    const char *e[] = {in->episode_id, in->job.id,      task_id,         in->backend,
                       in->policy,     in->config_text, in->limits_text, in->publish};
    PGresult *res = kf_db_exec(db, "episode_insert", 8, e);
    if (!res)
        return kf_tx_fail(db);
    PQclear(res);
    return kf_quota_tx(db, &in->quota);
}

/* 202 {"job", "episode": {"id", "status"}} with Location: /v1/jobs/ID, read back on db. */
static enum MHD_Result reply(struct kf_req *r, struct kf_db *db, const struct opt_in *in) {
    const char *p[] = {in->episode_id};
    PGresult *res = kf_db_exec(db, "optimize_pair", 1, p);
    if (!res)
        return kf_reply_db_error(r, db);
    if (PQntuples(res) != 1) {
        PQclear(res);
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "the episode just stored is gone");
    }
    size_t wlen = 0; /* with the liveness warnings, when there are some */
    char *with = kf_liveness_annotate(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0),
                                      r->warnings, &wlen);
    struct MHD_Response *resp =
        with ? MHD_create_response_from_buffer(wlen, with, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer((size_t)PQgetlength(res, 0, 0),
                                               PQgetvalue(res, 0, 0), MHD_RESPMEM_MUST_COPY);
    PQclear(res);
    if (!resp) {
        free(with);
        return MHD_NO;
    }
    char location[64];
    snprintf(location, sizeof location, "/v1/jobs/%s", in->job.id);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
    return kf_reply_queue(r, MHD_HTTP_ACCEPTED, resp);
}

enum MHD_Result kf_optimize_post(struct kf_req *r) {
    struct opt_in in = {.backend = r->srv->cfg->default_backend, .publish = "none"};
    kf_access_viewer(r, &in.admin, &in.task.owner); /* the job's, the episode's and the task's */
    kf_quota_init(&in.quota, r);
    char name_buf[16], sha[65];
    enum MHD_Result ret = MHD_YES;
    if (!parse(r, &in) || (in.has_task && !kf_task_fields_ok(r, "task", &in.task, name_buf, sha)))
        goto out;
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db) {
        ret = kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
        goto out;
    }
    if (kf_quota_write(db, &in.quota, tx, &in, KF_SRV_TX_TRIES) != 0) {
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
    if (in.has_task && in.task.created)
        kf_job_dispatch(r, in.klass, in.task.job_id);
    kf_job_dispatch(r, in.klass, in.job.id);
    ret = reply(r, db, &in);
    kf_srv_db_put(r->srv, db);
out:
    json_decref(in.payload);
    free(in.config_text);
    free(in.limits_text);
    return ret;
}
