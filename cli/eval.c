/* eval.c: `kforge eval TASK.py CANDIDATE [--backend cuda|cpu] [--url U] [--key K] [--wait S]
 * [--var DIR]`. POSTs /v1/evaluations with the task's source inline and every regular file under
 * CANDIDATE (a folder; a single .py file is a kernelbench candidate), follows the job by polling
 * GET /v1/jobs/{id}, and prints the evaluation (the verdict) as JSON. Exit 0 when a verdict
 * came, 1 otherwise. URL and key default to var/stack.env and var/api-key. */
#include "cli.h"

#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

struct opts {
    const char *task, *cand, *backend, *url, *key, *var;
    long wait_s;
};

/* nftw has no argument pointer: the walk fills this, one walk at a time. */
static struct walk {
    json_t *files;
    size_t root_len;
    int errors;
} walk_state;

static int add_file(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)f;
    if (flag != FTW_F || !S_ISREG(st->st_mode))
        return 0;
    const char *rel = path + walk_state.root_len;
    while (*rel == '/')
        rel++;
    size_t len;
    char *text = kfc_read_file(path, &len);
    json_t *s = text ? json_stringn(text, len) : NULL;
    free(text);
    if (s == NULL) {
        fprintf(stderr, "kforge eval: %s: unreadable or not UTF-8 text, skipped\n", path);
        walk_state.errors++;
        return 0;
    }
    json_object_set_new(walk_state.files, rel, s);
    return 0;
}

static int parse(struct opts *o, int argc, char **argv) {
    o->wait_s = 1800;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--backend") == 0 && v)
            o->backend = argv[++i];
        else if (strcmp(a, "--url") == 0 && v)
            o->url = argv[++i];
        else if (strcmp(a, "--key") == 0 && v)
            o->key = argv[++i];
        else if (strcmp(a, "--var") == 0 && v)
            o->var = argv[++i];
        else if (strcmp(a, "--wait") == 0 && v)
            o->wait_s = strtol(argv[++i], NULL, 10);
        else if (a[0] == '-')
            return -1;
        else if (!o->task)
            o->task = a;
        else if (!o->cand)
            o->cand = a;
        else
            return -1;
    }
    return o->task && o->cand ? 0 : -1;
}

/* The request body; NULL on error (said on stderr). */
static json_t *request(const struct opts *o) {
    char *source = kfc_read_file(o->task, NULL);
    if (source == NULL) {
        fprintf(stderr, "kforge eval: cannot read %s\n", o->task);
        return NULL;
    }
    char name[129];
    const char *base = strrchr(o->task, '/') ? strrchr(o->task, '/') + 1 : o->task;
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(base, "."), base);
    struct stat st;
    walk_state.files = json_object();
    walk_state.errors = 0;
    const char *format = "native";
    if (stat(o->cand, &st) == 0 && S_ISREG(st.st_mode)) {
        format = "kernelbench";
        size_t len;
        char *text = kfc_read_file(o->cand, &len);
        const char *cbase = strrchr(o->cand, '/') ? strrchr(o->cand, '/') + 1 : o->cand;
        if (text)
            json_object_set_new(walk_state.files, cbase, json_stringn(text, len));
        free(text);
    } else {
        walk_state.root_len = strlen(o->cand);
        if (nftw(o->cand, add_file, 16, FTW_PHYS) != 0) {
            fprintf(stderr, "kforge eval: cannot read %s\n", o->cand);
            free(source);
            json_decref(walk_state.files);
            return NULL;
        }
    }
    json_t *files = walk_state.files;
    const char *fname;
    json_t *fv;
    json_object_foreach(files, fname, fv) {
        if (strstr(fname, "_binding.cpp"))
            format = "cuda-agent"; /* CUDA Agent layout: NAME_binding.cpp */
    }
    json_t *req = json_pack("{s:{s:s, s:s}, s:{s:s, s:o}, s:i}", "task", "source", source, "name",
                            name, "candidate", "format", format, "files", files, "wait", 0);
    free(source);
    if (req && o->backend)
        json_object_set_new(req, "backend", json_string(o->backend));
    return req;
}

/* After JSON_DECODE_INT_AS_REAL: integral reals of integer size become integers again. */
static void ints_again(json_t *j) {
    const char *k;
    json_t *v;
    size_t i;
    if (json_is_object(j)) {
        json_object_foreach(j, k, v) {
            if (json_is_real(v) && fabs(json_real_value(v)) < 9e15 &&
                json_real_value(v) == floor(json_real_value(v)))
                json_object_set_new(j, k, json_integer((json_int_t)json_real_value(v)));
            else
                ints_again(v);
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) {
            if (json_is_real(v) && fabs(json_real_value(v)) < 9e15 &&
                json_real_value(v) == floor(json_real_value(v)))
                json_array_set_new(j, i, json_integer((json_int_t)json_real_value(v)));
            else
                ints_again(v);
        }
    }
}

static json_t *get_json(const char *url, const char *key, long *code) {
    char *body = NULL;
    *code = kfc_http("GET", url, key, NULL, &body, 30, false);
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    /* jsonb prints 1.1e23 as 24 digits, which jansson refuses as an integer */
    if (j == NULL && body) {
        j = json_loads(body, JSON_DECODE_INT_AS_REAL, NULL);
        ints_again(j);
    }
    free(body);
    return j;
}

static bool finished(const char *status) {
    return status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                      strcmp(status, "cancelled") == 0 || strcmp(status, "dead") == 0);
}

int kfc_eval_main(int argc, char **argv) {
    struct opts o = {0};
    if (parse(&o, argc, argv) != 0) {
        fprintf(stderr, "usage: kforge eval TASK.py CANDIDATE_DIR [--backend cuda|cpu] [--url U]"
                        " [--key K] [--wait S] [--var DIR]\n");
        return 2;
    }
    char var[PATH_MAX], url[512], key[128], path[PATH_MAX + 16], target[700];
    kfc_var_dir(o.var, var, sizeof(var));
    const char *env_url = getenv("KFORGE_URL"), *env_key = getenv("KFORGE_API_KEY");
    if (o.url)
        snprintf(url, sizeof(url), "%s", o.url);
    else if (env_url && env_url[0])
        snprintf(url, sizeof(url), "%s", env_url);
    else if (!kfc_stack_get(var, "KFORGE_URL", url, sizeof(url))) {
        fprintf(stderr, "kforge eval: no --url and no %s/stack.env\n", var);
        return 1;
    }
    key[0] = '\0';
    if (o.key) {
        snprintf(key, sizeof(key), "%s", o.key);
    } else if (env_key && env_key[0]) {
        snprintf(key, sizeof(key), "%s", env_key);
    } else {
        snprintf(path, sizeof(path), "%s/api-key", var);
        char *k = kfc_read_file(path, NULL);
        if (k)
            snprintf(key, sizeof(key), "%.*s", (int)strcspn(k, "\r\n"), k);
        free(k);
    }
    json_t *req = request(&o);
    if (req == NULL)
        return 1;
    char *body = json_dumps(req, JSON_COMPACT), *resp = NULL;
    json_decref(req);
    snprintf(target, sizeof(target), "%s/v1/evaluations", url);
    long code = kfc_http("POST", target, key[0] ? key : NULL, body, &resp, 60, false);
    free(body);
    json_t *created = resp ? json_loads(resp, 0, NULL) : NULL;
    if (code != 200 && code != 202) {
        if (code >= 0)
            fprintf(stderr, "kforge eval: POST %s: %ld %s\n", target, code, resp ? resp : "");
        free(resp);
        json_decref(created);
        return 1;
    }
    free(resp);
    char job_id[40], eval_id[40];
    snprintf(job_id, sizeof(job_id), "%s",
             json_string_value(json_object_get(json_object_get(created, "job"), "id"))
                 ? json_string_value(json_object_get(json_object_get(created, "job"), "id"))
                 : "");
    snprintf(eval_id, sizeof(eval_id), "%s",
             json_string_value(json_object_get(json_object_get(created, "evaluation"), "id"))
                 ? json_string_value(json_object_get(json_object_get(created, "evaluation"), "id"))
                 : "");
    json_decref(created);
    if (!kf_uuid_valid(job_id) || !kf_uuid_valid(eval_id)) {
        fprintf(stderr, "kforge eval: the answer has no job or evaluation id\n");
        return 1;
    }
    fprintf(stderr, "kforge eval: evaluation %s, job %s\n", eval_id, job_id);

    /* follow the job */
    int64_t until = kf_now_ms() + o.wait_s * 1000;
    json_t *job = NULL;
    const char *status = NULL;
    snprintf(target, sizeof(target), "%s/v1/jobs/%s", url, job_id);
    for (;;) {
        json_decref(job);
        job = get_json(target, key[0] ? key : NULL, &code);
        status = json_string_value(json_object_get(job, "status"));
        if (finished(status) || kf_now_ms() > until)
            break;
        struct timespec s = {0, 500000000L};
        nanosleep(&s, NULL);
    }
    if (!finished(status)) {
        fprintf(stderr, "kforge eval: no verdict within %ld s (job %s)\n", o.wait_s,
                status ? status : "unknown");
        json_decref(job);
        return 1;
    }
    int rc = strcmp(status, "succeeded") == 0 ? 0 : 1;
    if (rc != 0) {
        char *text = json_dumps(json_object_get(job, "error"), JSON_COMPACT | JSON_ENCODE_ANY);
        fprintf(stderr, "kforge eval: job %s: %s\n", status, text ? text : "");
        free(text);
    }
    json_decref(job);
    snprintf(target, sizeof(target), "%s/v1/evaluations/%s", url, eval_id);
    json_t *ev = get_json(target, key[0] ? key : NULL, &code);
    if (ev == NULL || code != 200) {
        fprintf(stderr, "kforge eval: GET %s: %ld\n", target, code);
        json_decref(ev);
        return 1;
    }
    json_object_del(ev, "candidate");
    json_dumpf(ev, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    printf("\n");
    json_decref(ev);
    return rc;
}
