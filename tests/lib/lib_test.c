/* lib_test.c: tests of libkforge against a real PostgreSQL and Redis (run by test_lib.py).
 *
 *   lib_test unit                 config, log, errors, jspec, util (no servers)
 *   lib_test db PG_URL            statements, errors, transactions that retry real conflicts
 *   lib_test queue REDIS_URL      streams, groups, claims, dead letters, rate limits, heartbeats
 *   lib_test outage PG_URL REDIS_URL
 *                                 talks to the driver on stdin/stdout: "up" (both servers
 *                                 running), then after a line on stdin "down" (both stopped),
 *                                 then after another line "again" (both restarted)
 *   lib_test crash null|overflow  installs the fault report (crash.h), then writes through a
 *                                 null pointer or overflows the stack: it must die of SIGSEGV
 *                                 with the report on stderr
 *
 * Prints "ok NAME" per passed check and "FAIL file:line: ..." per failed one; exits 1 when any
 * check failed. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis.h>

#include "buf.h"
#include "config.h"
#include "crash.h"
#include "db.h"
#include "jspec.h"
#include "kf_errors.h"
#include "log.h"
#include "queue.h"
#include "util.h"

struct t {
    int checks, fails;
};

#define CHECK(t, cond, ...)                                                                        \
    do {                                                                                           \
        (t)->checks++;                                                                             \
        if (!(cond)) {                                                                             \
            (t)->fails++;                                                                          \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

static void ok(const char *name) {
    printf("ok %s\n", name);
    fflush(stdout);
}

/* ---- config ---- */

static void test_config_defaults(struct t *t) {
    struct kf_config c;
    char err[256] = "";
    CHECK(t, kf_config_load(&c, err, sizeof(err)) == 0, "%s", err);
    CHECK(t, strcmp(c.database_url, "postgresql:///kforge") == 0, "%s", c.database_url);
    CHECK(t, strcmp(c.redis_url, "redis://127.0.0.1:6379") == 0, "%s", c.redis_url);
    CHECK(t, strcmp(c.listen_host, "127.0.0.1") == 0, "%s", c.listen_host);
    CHECK(t, c.port == 8080 && c.threads == 8 && c.db_pool == 8, "%ld", c.port);
    CHECK(t, c.max_body_bytes == 4 << 20 && c.max_files == 64 && c.max_file_bytes == 1 << 20, "%ld",
          c.max_body_bytes);
    CHECK(t,
          c.max_source_bytes == 256 << 10 && c.rate_limit == 600 && c.public_reads && !c.keep_alive,
          "%ld", c.max_source_bytes);
    CHECK(t, c.quota_active_jobs == 256 && c.quota_gpu_s_per_day == 86400, "%ld %g",
          c.quota_active_jobs, c.quota_gpu_s_per_day);
    CHECK(t, c.wait_max_s == 120 && c.max_streams == 64 && c.gpu == -1, "%ld", c.wait_max_s);
    CHECK(t, strcmp(c.web_dir, "web") == 0 && strcmp(c.default_backend, "cpu") == 0, "%s",
          c.web_dir);
    CHECK(t, strcmp(c.gpu_class, "cuda") == 0 && strcmp(c.worker_name, "") == 0, "%s", c.gpu_class);
    CHECK(t, c.lease_s == 60 && c.heartbeat_s == 5 && c.max_attempts == 3, "%ld", c.lease_s);
    CHECK(t, c.reconcile_s == 10 && c.job_timeout_s == 1800, "%ld", c.reconcile_s);
    CHECK(t, c.pool_runners == 1, "%ld", c.pool_runners);
    CHECK(t, strcmp(c.python, ".venv/bin/python") == 0, "%s", c.python);
    CHECK(t, strcmp(c.harness_dir, "workers/harness") == 0, "%s", c.harness_dir);
    CHECK(t, strcmp(c.jail, "build/kforge-jail") == 0 && strcmp(c.var_dir, "var") == 0, "%s",
          c.jail);
    CHECK(t, strcmp(c.log_level, "info") == 0, "%s", c.log_level);
    CHECK(t, c.policy_timeout_s == 300 && c.policy_retries == 4 && c.policy_backoff_s == 1,
          "%g %ld %g", c.policy_timeout_s, c.policy_retries, c.policy_backoff_s);
    kf_config_free(&c);
    ok("config_defaults");
}

static void test_config_table(struct t *t) {
    size_t n = 0;
    const struct kf_cfg_def *d = kf_config_table(&n);
    CHECK(t, n == 46, "%zu settings", n);
    size_t covered = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(t, d[i].env != NULL && strncmp(d[i].env, "KFORGE_", 7) == 0, "%s", d[i].name);
        CHECK(t, d[i].help != NULL && d[i].def != NULL, "%s", d[i].name);
        covered += d[i].type == KF_CFG_STR    ? sizeof(char *)
                   : d[i].type == KF_CFG_BOOL ? sizeof(bool)
                                              : sizeof(long);
        for (size_t j = 0; j < i; j++)
            CHECK(t, d[i].offset != d[j].offset, "%s and %s", d[i].name, d[j].name);
    }
    CHECK(t, covered <= sizeof(struct kf_config), "%zu", covered);
    ok("config_table");
}

static void test_config_env(struct t *t) {
    struct kf_config c;
    char err[256] = "";
    setenv("KFORGE_PORT", "9001", 1);
    setenv("KFORGE_PUBLIC_READS", "no", 1);
    setenv("KFORGE_REDIS_URL", "unix:///tmp/r.sock", 1);
    CHECK(t, kf_config_load(&c, err, sizeof(err)) == 0, "%s", err);
    CHECK(t, c.port == 9001 && !c.public_reads, "%ld", c.port);
    CHECK(t, strcmp(c.redis_url, "unix:///tmp/r.sock") == 0, "%s", c.redis_url);
    CHECK(t, kf_config_set(&c, "public_reads", "YES", err, sizeof(err)) == 0 && c.public_reads,
          "%s", err);
    CHECK(t, kf_config_set(&c, "public_reads", "0", err, sizeof(err)) == 0 && !c.public_reads, "%s",
          err);
    CHECK(t, kf_config_set(&c, "threads", "3", err, sizeof(err)) == 0 && c.threads == 3, "%s", err);
    CHECK(t, kf_config_set(&c, "web_dir", "/srv/web", err, sizeof(err)) == 0, "%s", err);
    CHECK(t, strcmp(c.web_dir, "/srv/web") == 0, "%s", c.web_dir);
    CHECK(t, kf_config_set(&c, "threads", "abc", err, sizeof(err)) == -1, "accepted");
    CHECK(t, strstr(err, "threads") != NULL, "%s", err);
    CHECK(t, kf_config_set(&c, "port", "65536", err, sizeof(err)) == -1, "accepted");
    CHECK(t, strstr(err, "port") != NULL && strstr(err, "range") != NULL, "%s", err);
    CHECK(t, kf_config_set(&c, "no_such", "1", err, sizeof(err)) == -1, "accepted");
    CHECK(t, strstr(err, "no_such") != NULL, "%s", err);
    CHECK(t, kf_config_set(&c, "public_reads", "maybe", err, sizeof(err)) == -1, "accepted");
    kf_config_free(&c);
    setenv("KFORGE_PORT", "70000", 1);
    CHECK(t, kf_config_load(&c, err, sizeof(err)) == -1, "accepted port 70000");
    CHECK(t, strstr(err, "port") != NULL && strstr(err, "KFORGE_PORT") != NULL, "%s", err);
    setenv("KFORGE_PORT", "80x", 1);
    CHECK(t, kf_config_load(&c, err, sizeof(err)) == -1, "accepted 80x");
    unsetenv("KFORGE_PORT");
    setenv("KFORGE_THREADS", "0", 1);
    CHECK(t, kf_config_load(&c, err, sizeof(err)) == -1, "accepted threads 0");
    unsetenv("KFORGE_THREADS");
    setenv("KFORGE_PUBLIC_READS", "2", 1);
    CHECK(t, kf_config_load(&c, err, sizeof(err)) == -1, "accepted public_reads 2");
    CHECK(t, strstr(err, "public_reads") != NULL, "%s", err);
    unsetenv("KFORGE_PUBLIC_READS");
    unsetenv("KFORGE_REDIS_URL");
    ok("config_env");
}

/* ---- log ---- */

/* Runs one kf_log call with stderr sent to a file and reads the line back into out. */
static void capture_log(const struct kf_log_ctx *ctx, enum kf_log_level level, const char *msg,
                        char *out, size_t n) {
    char path[] = "/tmp/kf-lib-test-log-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(STDERR_FILENO);
    fflush(stderr);
    dup2(fd, STDERR_FILENO);
    kf_log(ctx, level, "%s", msg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t r = pread(fd, out, n - 1, 0);
    out[r > 0 ? r : 0] = '\0';
    close(fd);
    unlink(path);
}

static void test_log(struct t *t) {
    char line[1024];
    struct kf_log_ctx ctx = {.request_id = "r1", .job_id = "j 2", .min_level = KF_LOG_INFO};
    capture_log(&ctx, KF_LOG_WARN, "say \"hi\"\nbye", line, sizeof(line));
    CHECK(t, strncmp(line, "ts=", 3) == 0 && line[13] == 'T' && line[26] == 'Z', "%s", line);
    CHECK(t, strstr(line, " level=warn req=r1 job=\"j 2\" msg=\"say \\\"hi\\\"\\nbye\"\n") != NULL,
          "%s", line);
    CHECK(t, strchr(line, '\n') == line + strlen(line) - 1, "%s", line);
    capture_log(&ctx, KF_LOG_DEBUG, "hidden", line, sizeof(line));
    CHECK(t, line[0] == '\0', "%s", line);
    capture_log(NULL, KF_LOG_INFO, "plain", line, sizeof(line));
    CHECK(t, strstr(line, "level=info msg=\"plain\"") != NULL, "%s", line);
    CHECK(t, kf_log_parse_level("debug") == KF_LOG_DEBUG, "debug");
    CHECK(t, kf_log_parse_level("error") == KF_LOG_ERROR, "error");
    CHECK(t, kf_log_parse_level("bogus") == KF_LOG_INFO, "bogus");
    ok("log");
}

/* ---- errors ---- */

static void test_errors(struct t *t) {
    const struct kf_err_info *e = kf_err_info(KF_E_INVALID_FIELD);
    CHECK(t, e != NULL && e->code == 1003 && e->http_status == 400, "invalid_field");
    CHECK(t, e != NULL && strcmp(e->name, "invalid_field") == 0, "name");
    e = kf_err_info(KF_E_DATABASE_UNAVAILABLE);
    CHECK(t, e != NULL && e->http_status == 503 && e->code == 5001, "database_unavailable");
    CHECK(t, kf_err_info((enum kf_err)1234) == NULL, "unknown code");
    CHECK(t, kf_err_info(KF_E_OK) == NULL, "ok has no row");
    size_t n = 0;
    const struct kf_err_info *all = kf_err_table(&n);
    CHECK(t, n >= 25 && all[0].code == KF_E_NOT_FOUND, "%zu rows", n);
    ok("errors");
}

/* ---- jspec ---- */

static const char *const kf_backends[] = {"cuda", "cpu", NULL};

/* The body's fields, parsed by one spec covering every type. */
struct body {
    const char *name, *id, *backend;
    int64_t wait;
    double budget;
    bool flag, name_given;
    json_t *obj, *arr;
};

static int parse_body(const char *text, struct body *b, struct kf_jerr *err) {
    memset(b, 0, sizeof(*b));
    b->wait = -7;
    const struct kf_jfield fields[] = {
        {"name", KF_J_STRING, true, &b->name, &b->name_given, 0, 0, 8, NULL},
        {"wait", KF_J_INT, false, &b->wait, NULL, 0, 120, 0, NULL},
        {"budget", KF_J_NUMBER, false, &b->budget, NULL, 0.05, 60, 0, NULL},
        {"flag", KF_J_BOOL, false, &b->flag, NULL, 0, 0, 0, NULL},
        {"options", KF_J_OBJECT, false, &b->obj, NULL, 0, 0, 0, NULL},
        {"list", KF_J_ARRAY, false, &b->arr, NULL, 0, 0, 2, NULL},
        {"task_id", KF_J_UUID, false, &b->id, NULL, 0, 0, 0, NULL},
        {"backend", KF_J_ENUM, false, &b->backend, NULL, 0, 0, 0, kf_backends},
    };
    json_t *root = kf_jspec_load_body(text, strlen(text), err);
    if (root == NULL)
        return -1;
    int rc = kf_jspec_parse(root, fields, sizeof(fields) / sizeof(fields[0]), NULL, false, err);
    json_decref(root); /* the outputs die with it: the tests only compare before this point */
    return rc;
}

/* Expects text to fail with code on field, the message naming the field and containing what. */
static void expect_bad(struct t *t, const char *text, enum kf_err code, const char *field,
                       const char *what) {
    struct body b;
    struct kf_jerr err = {0};
    int rc = parse_body(text, &b, &err);
    CHECK(t, rc == -1, "accepted %s", text);
    CHECK(t, err.code == code, "%s: code %d", text, (int)err.code);
    CHECK(t, strcmp(err.field, field) == 0, "%s: field %s", text, err.field);
    CHECK(t, field[0] == '\0' || strstr(err.message, field) != NULL, "%s: %s", text, err.message);
    CHECK(t, strstr(err.message, what) != NULL, "%s: message %s", text, err.message);
}

static void test_jspec_good(struct t *t) {
    const char *text = "{\"name\":\"abc\",\"wait\":120,\"budget\":1,\"flag\":true,"
                       "\"options\":{},\"list\":[1,2],"
                       "\"task_id\":\"0A1B2C3D-0000-4000-8000-00000000000F\",\"backend\":\"cpu\"}";
    struct kf_jerr err = {0};
    json_t *root = kf_jspec_load_body(text, strlen(text), &err);
    CHECK(t, root != NULL, "%s", err.message);
    struct body b = {0};
    b.wait = -7;
    const struct kf_jfield fields[] = {
        {"name", KF_J_STRING, true, &b.name, &b.name_given, 0, 0, 8, NULL},
        {"wait", KF_J_INT, false, &b.wait, NULL, 0, 120, 0, NULL},
        {"budget", KF_J_NUMBER, false, &b.budget, NULL, 0.05, 60, 0, NULL},
        {"flag", KF_J_BOOL, false, &b.flag, NULL, 0, 0, 0, NULL},
        {"options", KF_J_OBJECT, false, &b.obj, NULL, 0, 0, 0, NULL},
        {"list", KF_J_ARRAY, false, &b.arr, NULL, 0, 0, 2, NULL},
        {"task_id", KF_J_UUID, false, &b.id, NULL, 0, 0, 0, NULL},
        {"backend", KF_J_ENUM, false, &b.backend, NULL, 0, 0, 0, kf_backends},
    };
    CHECK(t, kf_jspec_parse(root, fields, 8, NULL, false, &err) == 0, "%s", err.message);
    CHECK(t, b.name != NULL && strcmp(b.name, "abc") == 0 && b.name_given, "name");
    CHECK(t, b.wait == 120 && b.budget == 1.0 && b.flag, "%lld", (long long)b.wait);
    CHECK(t, json_is_object(b.obj) && json_array_size(b.arr) == 2, "obj/arr");
    CHECK(t, b.id != NULL && strcmp(b.id, "0a1b2c3d-0000-4000-8000-00000000000f") == 0, "%s", b.id);
    CHECK(t, b.backend != NULL && strcmp(b.backend, "cpu") == 0, "backend");
    json_decref(root);
    /* optional fields absent or null: outputs untouched, present false */
    struct body c;
    CHECK(t, parse_body("{\"name\":\"x\",\"wait\":null}", &c, &err) == 0, "%s", err.message);
    CHECK(t, c.wait == -7 && c.backend == NULL, "%lld", (long long)c.wait);
    ok("jspec_good");
}

static void test_jspec_bad(struct t *t) {
    expect_bad(t, "{}", KF_E_MISSING_FIELD, "name", "required");
    expect_bad(t, "{\"name\":null}", KF_E_MISSING_FIELD, "name", "required");
    expect_bad(t, "{\"name\":\"a\",\"color\":1}", KF_E_UNKNOWN_FIELD, "color", "unknown");
    expect_bad(t, "{\"name\":5}", KF_E_INVALID_FIELD, "name", "string");
    expect_bad(t, "{\"name\":\"123456789\"}", KF_E_INVALID_FIELD, "name", "at most 8");
    expect_bad(t, "{\"name\":\"a\",\"wait\":121}", KF_E_INVALID_FIELD, "wait", "[0, 120]");
    expect_bad(t, "{\"name\":\"a\",\"wait\":-1}", KF_E_INVALID_FIELD, "wait", "integer");
    expect_bad(t, "{\"name\":\"a\",\"wait\":1.5}", KF_E_INVALID_FIELD, "wait", "integer");
    expect_bad(t, "{\"name\":\"a\",\"wait\":\"1\"}", KF_E_INVALID_FIELD, "wait", "integer");
    expect_bad(t, "{\"name\":\"a\",\"budget\":0.01}", KF_E_INVALID_FIELD, "budget", "number");
    expect_bad(t, "{\"name\":\"a\",\"budget\":true}", KF_E_INVALID_FIELD, "budget", "number");
    expect_bad(t, "{\"name\":\"a\",\"flag\":1}", KF_E_INVALID_FIELD, "flag", "true or false");
    expect_bad(t, "{\"name\":\"a\",\"options\":[]}", KF_E_INVALID_FIELD, "options", "object");
    expect_bad(t, "{\"name\":\"a\",\"list\":{}}", KF_E_INVALID_FIELD, "list", "array");
    expect_bad(t, "{\"name\":\"a\",\"list\":[1,2,3]}", KF_E_INVALID_FIELD, "list", "at most 2");
    expect_bad(t, "{\"name\":\"a\",\"task_id\":\"nope\"}", KF_E_INVALID_FIELD, "task_id", "UUID");
    expect_bad(t, "{\"name\":\"a\",\"task_id\":\"0a1b2c3d-0000-4000-8000-00000000000\"}",
               KF_E_INVALID_FIELD, "task_id", "UUID");
    expect_bad(t, "{\"name\":\"a\",\"task_id\":7}", KF_E_INVALID_FIELD, "task_id", "UUID");
    expect_bad(t, "{\"name\":\"a\",\"backend\":\"tpu\"}", KF_E_INVALID_FIELD, "backend",
               "must be one of cuda, cpu");
    ok("jspec_bad");
}

static void test_jspec_body(struct t *t) {
    expect_bad(t, "[1]", KF_E_INVALID_JSON, "", "object");
    expect_bad(t, "\"name\"", KF_E_INVALID_JSON, "", "object");
    expect_bad(t, "{\"name\":", KF_E_INVALID_JSON, "", "invalid JSON");
    expect_bad(t, "", KF_E_INVALID_JSON, "", "empty");
    expect_bad(t, "{\"name\":\"\xff\xfe\"}", KF_E_INVALID_JSON, "", "invalid JSON");
    expect_bad(t, "{\"name\":\"\xc3\x28\"}", KF_E_INVALID_JSON, "", "invalid JSON");
    expect_bad(t, "{\"name\":\"\xed\xa0\x80\"}", KF_E_INVALID_JSON, "", "invalid JSON");
    expect_bad(t, "{\"name\":\"a\\u0000b\"}", KF_E_INVALID_JSON, "", "invalid JSON");
    struct kf_jerr err = {0};
    const char nul[] = "{\"name\":\"a\"}\0";
    CHECK(t, kf_jspec_load_body(nul, sizeof(nul) - 1, &err) == NULL, "embedded NUL");
    CHECK(t, err.code == KF_E_INVALID_JSON && strstr(err.message, "NUL") != NULL, "%s",
          err.message);
    const char *utf8 = "{\"name\":\"\xc3\xa9t\xc3\xa9\"}";
    json_t *root = kf_jspec_load_body(utf8, strlen(utf8), &err);
    CHECK(t, root != NULL, "valid UTF-8 refused: %s", err.message);
    json_decref(root);
    ok("jspec_body");
}

static void test_jspec_nested(struct t *t) {
    const char *text = "{\"candidate\":{\"format\":\"native\",\"files\":7}}";
    struct kf_jerr err = {0};
    json_t *root = kf_jspec_load_body(text, strlen(text), &err);
    json_t *cand = NULL, *files = NULL;
    const char *format = NULL;
    static const char *const formats[] = {"native", "kernelbench", NULL};
    const struct kf_jfield outer[] = {{"candidate", KF_J_OBJECT, true, &cand, NULL, 0, 0, 0, NULL}};
    const struct kf_jfield inner[] = {{"format", KF_J_ENUM, false, &format, NULL, 0, 0, 0, formats},
                                      {"files", KF_J_OBJECT, true, &files, NULL, 0, 0, 0, NULL}};
    CHECK(t, kf_jspec_parse(root, outer, 1, NULL, false, &err) == 0, "%s", err.message);
    CHECK(t, kf_jspec_parse(cand, inner, 2, "candidate", false, &err) == -1, "accepted");
    CHECK(t, strcmp(err.field, "candidate.files") == 0, "%s", err.field);
    CHECK(t, strstr(err.message, "candidate.files") != NULL && strstr(err.message, "object"), "%s",
          err.message);
    json_object_set_new(cand, "extra", json_true());
    json_object_set_new(cand, "files", json_object());
    CHECK(t, kf_jspec_parse(cand, inner, 2, "candidate", false, &err) == -1, "accepted extra");
    CHECK(t, strcmp(err.field, "candidate.extra") == 0 && err.code == KF_E_UNKNOWN_FIELD, "%s",
          err.field);
    CHECK(t, kf_jspec_parse(cand, inner, 2, "candidate", true, &err) == 0, "%s", err.message);
    CHECK(t, format != NULL && strcmp(format, "native") == 0, "format");
    CHECK(t,
          kf_jspec_parse(json_object_get(cand, "extra"), inner, 2, "candidate", false, &err) == -1,
          "a non-object");
    CHECK(t, strcmp(err.field, "candidate") == 0, "%s", err.field);
    json_decref(root);
    ok("jspec_nested");
}

/* ---- util ---- */

static void test_util(struct t *t) {
    char out[65];
    kf_sha256_hex("abc", 3, out);
    CHECK(t, strcmp(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
          "%s", out);
    kf_sha256_hex("", 0, out);
    CHECK(t, strcmp(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
          "%s", out);
    char a[37], b[37];
    CHECK(t, kf_uuid_new(a) == 0 && kf_uuid_new(b) == 0, "uuid_new");
    CHECK(t, strlen(a) == KF_UUID_LEN && kf_uuid_valid(a) && strcmp(a, b) != 0, "%s %s", a, b);
    CHECK(t, a[14] == '4' && strchr("89ab", a[19]) != NULL, "%s", a);
    for (const char *p = a; *p; p++)
        CHECK(t, *p == '-' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'), "%s", a);
    CHECK(t, kf_uuid_valid("0A1B2C3D-0000-4000-8000-00000000000F"), "upper case");
    CHECK(t, !kf_uuid_valid("0a1b2c3d-0000-4000-8000-00000000000"), "short");
    CHECK(t, !kf_uuid_valid("0a1b2c3d-0000-4000-8000-00000000000ff"), "long");
    CHECK(t, !kf_uuid_valid("0a1b2c3d00000-4000-8000-00000000000f"), "dash");
    CHECK(t, !kf_uuid_valid("0a1b2c3g-0000-4000-8000-00000000000f"), "hex");
    CHECK(t, !kf_uuid_valid(NULL), "NULL");
    char key[64], prefix[9], again[9];
    CHECK(t, kf_apikey_new(key, prefix) == 0, "apikey_new");
    CHECK(t, strlen(key) == 52 && strncmp(key, "kf_", 3) == 0 && key[11] == '_', "%s", key);
    CHECK(t, strlen(prefix) == 8 && strncmp(key + 3, prefix, 8) == 0, "%s %s", key, prefix);
    CHECK(t, kf_apikey_prefix(key, again) && strcmp(again, prefix) == 0, "%s", again);
    key[20] = 'X';
    CHECK(t, !kf_apikey_prefix(key, again), "accepted %s", key);
    CHECK(t, !kf_apikey_prefix("kf_1234_abc", again), "accepted short");
    int64_t m1 = kf_now_ms(), w = kf_wall_ms();
    CHECK(t, m1 >= 0 && w > 1700000000000LL && kf_now_ms() >= m1, "%lld", (long long)w);
    ok("util");
}

static void test_buf(struct t *t) {
    struct kf_buf b = {0};
    CHECK(t, kf_buf_append(&b, "", 0) && b.data && b.data[0] == '\0', "empty append");
    char big[5000];
    memset(big, 'x', sizeof(big));
    CHECK(t, kf_buf_append(&b, "ab", 2) && kf_buf_append(&b, big, sizeof(big)), "grow");
    CHECK(t, b.len == 5002 && b.cap >= 5003 && b.data[5002] == '\0', "len %zu", b.len);
    CHECK(t, memcmp(b.data, "abx", 3) == 0, "content");
    kf_buf_keep_tail(&b, 3);
    CHECK(t, b.len == 3 && strcmp(b.data, "xxx") == 0, "tail %s", b.data);
    kf_buf_free(&b);
    CHECK(t, b.data == NULL && b.len == 0 && b.cap == 0, "freed");
    CHECK(t, kf_buf_printf(&b, "%s=%d;", "k", 7) && strcmp(b.data, "k=7;") == 0, "printf %s",
          b.data);
    CHECK(t, kf_buf_printf(&b, "%.*s", 3000, big) && b.len == 3004 && b.data[3003] == 'x',
          "long printf %zu", b.len); /* past the 512-byte fast path */
    kf_buf_free(&b);
    ok("buf");
}

static int run_unit(void) {
    struct t t = {0};
    test_config_defaults(&t);
    test_config_table(&t);
    test_config_env(&t);
    test_log(&t);
    test_errors(&t);
    test_jspec_good(&t);
    test_jspec_bad(&t);
    test_jspec_body(&t);
    test_jspec_nested(&t);
    test_util(&t);
    test_buf(&t);
    printf("checks %d fails %d\n", t.checks, t.fails);
    return t.fails == 0 ? 0 : 1;
}

/* ---- db ---- */

static const struct kf_stmt kf_test_stmts[] = {
    {"add_one", "SELECT $1::int + 1"},
    {"put", "INSERT INTO kv (k, v) VALUES ($1, $2)"},
    {"get", "SELECT v FROM kv WHERE k = $1"},
    {"read_n", "SELECT n FROM acc WHERE id = $1"},
    {"bump", "UPDATE acc SET n = n + 1 WHERE id = $1"},
    {"sum", "SELECT sum(n) FROM acc"},
};
#define KF_TEST_NSTMTS (sizeof(kf_test_stmts) / sizeof(kf_test_stmts[0]))

static bool exec_ok(struct kf_db *db, const char *sql) {
    PGresult *r = kf_db_exec_sql(db, sql);
    PQclear(r);
    return r != NULL;
}

static void test_db_basic(struct t *t, struct kf_db *db) {
    const char *p1[] = {"41"};
    PGresult *r = kf_db_exec(db, "add_one", 1, p1);
    CHECK(t, r != NULL && strcmp(PQgetvalue(r, 0, 0), "42") == 0, "%s", kf_db_error(db));
    PQclear(r);
    const char *put[] = {"a", NULL};
    r = kf_db_exec(db, "put", 2, put);
    CHECK(t, r != NULL && strcmp(PQcmdTuples(r), "1") == 0, "%s", kf_db_error(db));
    PQclear(r);
    const char *get[] = {"a"};
    r = kf_db_exec(db, "get", 1, get);
    CHECK(t, r != NULL && PQntuples(r) == 1 && PQgetisnull(r, 0, 0), "NULL param");
    PQclear(r);
    r = kf_db_exec(db, "put", 2, put);
    CHECK(t, r == NULL, "duplicate key accepted");
    CHECK(t, strcmp(kf_db_sqlstate(db), "23505") == 0, "sqlstate %s", kf_db_sqlstate(db));
    CHECK(t, strstr(kf_db_error(db), "duplicate") != NULL, "%s", kf_db_error(db));
    CHECK(t, !kf_db_retryable(db) && kf_db_ok(db), "still up");
    r = kf_db_exec(db, "no_such_statement", 0, NULL);
    CHECK(t, r == NULL && strcmp(kf_db_sqlstate(db), "26000") == 0, "%s", kf_db_sqlstate(db));
    r = kf_db_exec_sql(db, "SELEC 1");
    CHECK(t, r == NULL && strcmp(kf_db_sqlstate(db), "42601") == 0, "%s", kf_db_sqlstate(db));
    r = kf_db_exec_sql(db, "SELECT 1");
    CHECK(t, r != NULL && kf_db_error(db)[0] == '\0' && kf_db_sqlstate(db)[0] == '\0', "%s",
          kf_db_error(db));
    PQclear(r);
    ok("db_basic");
}

static void test_db_open_errors(struct t *t, const char *url) {
    char err[512] = "";
    const struct kf_stmt bad[] = {{"broken", "SELECT FROM nowhere_at_all"}};
    struct kf_db *db = kf_db_open(url, bad, 1, err, sizeof(err));
    CHECK(t, db == NULL, "a bad statement was prepared");
    CHECK(t, strstr(err, "broken") != NULL, "%s", err);
    kf_db_close(db);
    ok("db_open_errors");
}

/* What a transaction function sees: the other connection to conflict with and the tries. */
struct tx_arg {
    struct kf_db *other;
    int tries, conflicts;
    bool fail;
};

/* Reads acc 1, lets the other connection bump it (on the first `conflicts` tries), then bumps
 * it: a real serialization failure (40001) on those tries. */
static int tx_bump(struct kf_db *db, void *argp) {
    struct tx_arg *a = argp;
    a->tries++;
    const char *id[] = {"1"};
    PGresult *r = kf_db_exec(db, "read_n", 1, id);
    if (r == NULL)
        return -1;
    PQclear(r);
    if (a->tries <= a->conflicts)
        PQclear(kf_db_exec(a->other, "bump", 1, id));
    r = kf_db_exec(db, "bump", 1, id);
    if (r == NULL)
        return kf_db_retryable(db) ? KF_DB_RETRY : -1;
    PQclear(r);
    return a->fail ? -1 : 0;
}

/* Write skew: reads the sum, lets the other connection run a serializable transaction that
 * also reads it and writes acc 2, then writes acc 1; the failure comes at COMMIT or earlier. */
static int tx_skew(struct kf_db *db, void *argp) {
    struct tx_arg *a = argp;
    a->tries++;
    PGresult *r = kf_db_exec(db, "sum", 0, NULL);
    if (r == NULL)
        return -1;
    PQclear(r);
    if (a->tries <= a->conflicts) {
        const char *two[] = {"2"};
        PQclear(kf_db_exec_sql(a->other, "BEGIN ISOLATION LEVEL SERIALIZABLE"));
        PQclear(kf_db_exec(a->other, "sum", 0, NULL));
        PQclear(kf_db_exec(a->other, "bump", 1, two));
        PQclear(kf_db_exec_sql(a->other, "COMMIT"));
    }
    const char *one[] = {"1"};
    r = kf_db_exec(db, "bump", 1, one);
    if (r == NULL)
        return kf_db_retryable(db) ? KF_DB_RETRY : -1;
    PQclear(r);
    return 0;
}

static long read_acc(struct kf_db *db, const char *id) {
    const char *p[] = {id};
    PGresult *r = kf_db_exec(db, "read_n", 1, p);
    long n = r != NULL && PQntuples(r) == 1 ? atol(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
}

static void test_db_tx(struct t *t, struct kf_db *a, struct kf_db *b) {
    struct tx_arg arg = {.other = b, .tries = 0, .conflicts = 1, .fail = false};
    CHECK(t, kf_db_tx(a, tx_bump, &arg, 5) == 0, "%s", kf_db_error(a));
    CHECK(t, arg.tries == 2, "tries %d", arg.tries);
    CHECK(t, read_acc(a, "1") == 2, "n = %ld", read_acc(a, "1"));
    arg = (struct tx_arg){.other = b, .tries = 0, .conflicts = 9, .fail = false};
    CHECK(t, kf_db_tx(a, tx_bump, &arg, 3) == -1, "committed despite conflicts");
    CHECK(t, arg.tries == 3 && strcmp(kf_db_sqlstate(a), "40001") == 0, "tries %d state %s",
          arg.tries, kf_db_sqlstate(a));
    CHECK(t, kf_db_retryable(a), "retryable");
    CHECK(t, read_acc(a, "1") == 5, "n = %ld", read_acc(a, "1"));
    arg = (struct tx_arg){.other = b, .tries = 0, .conflicts = 0, .fail = true};
    CHECK(t, kf_db_tx(a, tx_bump, &arg, 3) == -1 && arg.tries == 1, "tries %d", arg.tries);
    CHECK(t, read_acc(a, "1") == 5, "rolled back: n = %ld", read_acc(a, "1"));
    arg = (struct tx_arg){.other = b, .tries = 0, .conflicts = 1, .fail = false};
    CHECK(t, kf_db_tx(a, tx_skew, &arg, 5) == 0, "%s", kf_db_error(a));
    CHECK(t, arg.tries == 2, "write skew tries %d", arg.tries);
    CHECK(t, read_acc(a, "1") == 6 && read_acc(a, "2") == 1, "n = %ld", read_acc(a, "1"));
    ok("db_tx");
}

/* Ends a's server process from b, as a crash or an administrator would. */
static void kill_backend(struct kf_db *a, struct kf_db *b) {
    PGresult *r = kf_db_exec_sql(a, "SELECT pg_backend_pid()");
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%s)",
             r != NULL ? PQgetvalue(r, 0, 0) : "0");
    PQclear(r);
    PQclear(kf_db_exec_sql(b, sql));
    usleep(50000);
}

static void test_db_reconnect(struct t *t, struct kf_db *a, struct kf_db *b) {
    const char *one[] = {"1"};
    /* lost while idle: the next call re-opens, re-prepares and runs */
    kill_backend(a, b);
    PGresult *r = kf_db_exec(a, "add_one", 1, one);
    CHECK(t, r != NULL && strcmp(PQgetvalue(r, 0, 0), "2") == 0, "%s", kf_db_error(a));
    PQclear(r);
    /* lost inside a transaction: nothing runs outside it until the caller ends it */
    CHECK(t, exec_ok(a, "BEGIN"), "%s", kf_db_error(a));
    kill_backend(a, b);
    CHECK(t, kf_db_exec(a, "add_one", 1, one) == NULL, "ran in a dead transaction");
    CHECK(t, kf_db_exec(a, "add_one", 1, one) == NULL, "ran outside the lost transaction");
    CHECK(t, strstr(kf_db_error(a), "transaction") != NULL, "%s", kf_db_error(a));
    CHECK(t, !exec_ok(a, "COMMIT"), "committed a lost transaction");
    r = kf_db_exec(a, "add_one", 1, one);
    CHECK(t, r != NULL, "after the COMMIT: %s", kf_db_error(a));
    PQclear(r);
    /* the same inside kf_db_tx: it fails, and the next call works */
    struct tx_arg arg = {.other = b, .tries = 0, .conflicts = 0, .fail = false};
    CHECK(t, exec_ok(a, "SELECT 1"), "%s", kf_db_error(a));
    kill_backend(a, b);
    CHECK(t, kf_db_tx(a, tx_bump, &arg, 3) == 0 && arg.tries == 1, "tx after a kill: %s",
          kf_db_error(a));
    ok("db_reconnect");
}

static void test_db_pool(struct t *t, const char *url) {
    char err[256] = "";
    CHECK(t, kf_db_pool_open(url, kf_test_stmts, KF_TEST_NSTMTS, 0, err, sizeof(err)) == NULL,
          "n = 0 accepted");
    struct kf_db_pool *p = kf_db_pool_open(url, kf_test_stmts, KF_TEST_NSTMTS, 2, err, sizeof(err));
    CHECK(t, p != NULL, "%s", err);
    if (p == NULL)
        return;
    struct kf_db *a = kf_db_pool_get(p, 1000), *b = kf_db_pool_get(p, 1000);
    CHECK(t, a != NULL && b != NULL && a != b, "two connections");
    int64_t t0 = kf_now_ms();
    CHECK(t, kf_db_pool_get(p, 200) == NULL, "a third one from a pool of two");
    int64_t waited = kf_now_ms() - t0;
    CHECK(t, waited >= 150 && waited < 1500, "waited %lld ms", (long long)waited);
    PQclear(kf_db_exec_sql(a, "BEGIN"));
    kf_db_pool_put(p, a);
    struct kf_db *c = kf_db_pool_get(p, 1000);
    CHECK(t, c == a, "not the returned one");
    PGresult *in_tx = kf_db_exec_sql(c, "SELECT now() = statement_timestamp()");
    CHECK(t, in_tx != NULL && strcmp(PQgetvalue(in_tx, 0, 0), "t") == 0, "put left a BEGIN open");
    PQclear(in_tx);
    const char *p1[] = {"1"};
    PGresult *r = kf_db_exec(c, "add_one", 1, p1);
    CHECK(t, r != NULL, "%s", kf_db_error(c));
    PQclear(r);
    kf_db_pool_put(p, c);
    kf_db_pool_put(p, b);
    kf_db_pool_close(p);
    ok("db_pool");
}

static int run_db(const char *url) {
    struct t t = {0};
    char err[512] = "";
    struct kf_db *setup = kf_db_open(url, NULL, 0, err, sizeof(err));
    CHECK(&t, setup != NULL, "%s", err);
    if (setup == NULL)
        return 1;
    CHECK(&t, exec_ok(setup, "DROP TABLE IF EXISTS kv, acc"), "%s", kf_db_error(setup));
    CHECK(&t, exec_ok(setup, "CREATE TABLE kv (k text PRIMARY KEY, v text)"), "kv");
    CHECK(&t, exec_ok(setup, "CREATE TABLE acc (id int PRIMARY KEY, n int NOT NULL)"), "acc");
    CHECK(&t, exec_ok(setup, "INSERT INTO acc VALUES (1, 0), (2, 0)"), "rows");
    kf_db_close(setup);
    struct kf_db *a = kf_db_open(url, kf_test_stmts, KF_TEST_NSTMTS, err, sizeof(err));
    struct kf_db *b = kf_db_open(url, kf_test_stmts, KF_TEST_NSTMTS, err, sizeof(err));
    CHECK(&t, a != NULL && b != NULL, "%s", err);
    if (a != NULL && b != NULL) {
        test_db_basic(&t, a);
        test_db_open_errors(&t, url);
        test_db_tx(&t, a, b);
        test_db_reconnect(&t, a, b);
        test_db_pool(&t, url);
    }
    kf_db_close(a);
    kf_db_close(b);
    printf("checks %d fails %d\n", t.checks, t.fails);
    return t.fails == 0 ? 0 : 1;
}

/* ---- queue ---- */

/* A raw command on a second connection, for what the library does not do itself. */
static redisReply *raw(redisContext *c, const char *fmt, const char *a, const char *b) {
    return redisCommand(c, fmt, a, b);
}

static void test_queue_stream(struct t *t, struct kf_queue *q, redisContext *rc) {
    char stream[64], id[KF_STREAM_ID_MAX], id2[KF_STREAM_ID_MAX], job[40];
    kf_queue_stream("cpu", stream, sizeof(stream));
    CHECK(t, strcmp(stream, "kforge:jobs:cpu") == 0, "%s", stream);
    CHECK(t, kf_queue_pending(q, stream) == 0, "pending without a stream");
    CHECK(t, kf_queue_ensure_group(q, stream) == 0, "%s", kf_queue_error(q));
    CHECK(t, kf_queue_ensure_group(q, stream) == 0, "again: %s", kf_queue_error(q));
    CHECK(t, kf_queue_add(q, stream, "job-1", id) == 0 && strchr(id, '-') != NULL, "%s", id);
    CHECK(t, kf_queue_len(q, stream) == 1, "len %ld", kf_queue_len(q, stream));
    CHECK(t, kf_queue_has_job(q, stream, "job-1") == 1, "job-1 has an entry");
    CHECK(t, kf_queue_has_job(q, stream, "job-9") == 0, "job-9 has none");
    CHECK(t, kf_queue_read(q, stream, "c1", 100, job, id2) == 1, "%s", kf_queue_error(q));
    CHECK(t, strcmp(job, "job-1") == 0 && strcmp(id, id2) == 0, "%s %s", job, id2);
    CHECK(t, kf_queue_pending(q, stream) == 1, "pending %ld", kf_queue_pending(q, stream));
    int64_t t0 = kf_now_ms();
    CHECK(t, kf_queue_read(q, stream, "c1", 300, job, id2) == 0, "read an empty stream");
    CHECK(t, kf_now_ms() - t0 >= 250, "did not block");
    CHECK(t, kf_queue_autoclaim(q, stream, "c2", 60000, job, id2) == 0, "claimed a fresh one");
    usleep(20000);
    CHECK(t, kf_queue_autoclaim(q, stream, "c2", 10, job, id2) == 1, "%s", kf_queue_error(q));
    CHECK(t, strcmp(job, "job-1") == 0 && strcmp(id, id2) == 0, "%s %s", job, id2);
    CHECK(t, kf_queue_ack(q, stream, id, "job-1") == 0, "%s", kf_queue_error(q));
    CHECK(t, kf_queue_pending(q, stream) == 0 && kf_queue_len(q, stream) == 0, "after ack");
    CHECK(t, kf_queue_has_job(q, stream, "job-1") == 0, "job-1's entry is gone after its ack");
    /* entries without a job field are acknowledged and skipped */
    freeReplyObject(raw(rc, "XADD %s * %s x", stream, "junk"));
    CHECK(t, kf_queue_read(q, stream, "c1", 100, job, id2) == 0, "read a junk entry");
    CHECK(t, kf_queue_pending(q, stream) == 0 && kf_queue_len(q, stream) == 0, "junk stays");
    freeReplyObject(raw(rc, "XADD %s * %s x", stream, "junk"));
    freeReplyObject(redisCommand(rc, "XREADGROUP GROUP workers c3 COUNT 1 STREAMS %s >", stream));
    CHECK(t, kf_queue_pending(q, stream) == 1, "junk pending");
    usleep(20000);
    CHECK(t, kf_queue_autoclaim(q, stream, "c2", 10, job, id2) == 0, "claimed junk");
    CHECK(t, kf_queue_pending(q, stream) == 0 && kf_queue_len(q, stream) == 0, "junk claimed");
    /* block_ms 0 does not block; a lost group (Redis restarted empty) is created again */
    freeReplyObject(raw(rc, "DEL %s", stream, NULL));
    t0 = kf_now_ms();
    CHECK(t, kf_queue_read(q, stream, "c1", 0, job, id2) == 0, "%s", kf_queue_error(q));
    CHECK(t, kf_now_ms() - t0 < 500, "blocked for %lld ms", (long long)(kf_now_ms() - t0));
    redisReply *groups = raw(rc, "XINFO GROUPS %s", stream, NULL);
    CHECK(t, groups != NULL && groups->type == REDIS_REPLY_ARRAY && groups->elements == 1,
          "group not created again");
    freeReplyObject(groups);
    CHECK(t, kf_queue_add(q, stream, "job-2", id) == 0, "%s", kf_queue_error(q));
    CHECK(t, kf_queue_read(q, stream, "c1", 0, job, id2) == 1 && strcmp(job, "job-2") == 0, "%s",
          kf_queue_error(q));
    CHECK(t, kf_queue_ack(q, stream, id2, NULL) == 0, "%s", kf_queue_error(q));
    ok("queue_stream");
}

static void test_queue_dead(struct t *t, struct kf_queue *q, redisContext *rc) {
    CHECK(t, kf_queue_dead_letter(q, "job-9", "cpu", "harness exit 2, 3 times") == 0, "%s",
          kf_queue_error(q));
    CHECK(t, kf_queue_len(q, KF_QUEUE_DEAD) == 1, "dead len");
    redisReply *r = redisCommand(rc, "XRANGE %s - +", KF_QUEUE_DEAD);
    bool shape = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
                 r->element[0]->element[1]->elements == 6;
    CHECK(t, shape, "dead entry shape");
    if (shape) {
        redisReply *f = r->element[0]->element[1];
        CHECK(t, strcmp(f->element[0]->str, "job") == 0 && strcmp(f->element[1]->str, "job-9") == 0,
              "job");
        CHECK(t, strcmp(f->element[3]->str, "cpu") == 0, "class");
        CHECK(t, strcmp(f->element[5]->str, "harness exit 2, 3 times") == 0, "reason");
    }
    freeReplyObject(r);
    ok("queue_dead");
}

static void test_queue_rate(struct t *t, struct kf_queue *q, redisContext *rc) {
    int retry = -1;
    long n1 = kf_queue_rate_hit(q, "key1", &retry);
    long n2 = kf_queue_rate_hit(q, "key1", &retry);
    long other = kf_queue_rate_hit(q, "key2", NULL);
    /* a minute boundary between the calls restarts the count */
    CHECK(t, n1 >= 1 && (n2 == n1 + 1 || n2 == 1) && other == 1, "%ld %ld %ld", n1, n2, other);
    CHECK(t, retry >= 1 && retry <= 60, "retry after %d", retry);
    redisReply *r = redisCommand(rc, "KEYS kforge:rl:key1:*");
    CHECK(t, r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1, "rate key");
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1) {
        redisReply *ttl = redisCommand(rc, "TTL %s", r->element[0]->str);
        CHECK(t, ttl != NULL && ttl->integer > 60 && ttl->integer <= 120, "ttl");
        freeReplyObject(ttl);
    }
    freeReplyObject(r);
    ok("queue_rate");
}

/* Collects the heartbeats seen. */
struct hb_seen {
    int count;
    bool gpu0, cpu;
};

static void hb_collect(const char *worker, const char *json, void *arg) {
    struct hb_seen *s = arg;
    s->count++;
    if (strcmp(worker, "gpu0") == 0 && strcmp(json, "{\"gpu\":0}") == 0)
        s->gpu0 = true;
    if (strcmp(worker, "host:1:cpu") == 0 && strcmp(json, "{}") == 0)
        s->cpu = true;
}

static void test_queue_heartbeats(struct t *t, struct kf_queue *q, redisContext *rc) {
    CHECK(t, kf_queue_heartbeat(q, "gpu0", "{\"gpu\":0}", 15) == 0, "%s", kf_queue_error(q));
    CHECK(t, kf_queue_heartbeat(q, "host:1:cpu", "{}", 15) == 0, "%s", kf_queue_error(q));
    redisReply *r = redisCommand(rc, "TTL kforge:hb:gpu0");
    CHECK(t, r != NULL && r->integer > 0 && r->integer <= 15, "ttl");
    freeReplyObject(r);
    struct hb_seen seen = {0};
    CHECK(t, kf_queue_heartbeats(q, hb_collect, &seen) == 2, "count");
    CHECK(t, seen.count == 2 && seen.gpu0 && seen.cpu, "seen %d", seen.count);
    freeReplyObject(redisCommand(rc, "DEL kforge:hb:gpu0"));
    CHECK(t, kf_queue_heartbeats(q, NULL, NULL) == 1, "after one expired");
    ok("queue_heartbeats");
}

static void test_queue_open_errors(struct t *t) {
    char err[256] = "";
    CHECK(t, kf_queue_open("http://x", 500, err, sizeof(err)) == NULL, "bad scheme");
    CHECK(t, strstr(err, "redis://") != NULL, "%s", err);
    CHECK(t, kf_queue_open("redis://127.0.0.1:99999", 500, err, sizeof(err)) == NULL, "port");
    int64_t t0 = kf_now_ms();
    CHECK(t, kf_queue_open("redis://127.0.0.1:1", 500, err, sizeof(err)) == NULL, "port 1");
    CHECK(t, kf_now_ms() - t0 < 1500 && err[0] != '\0', "%s", err);
    ok("queue_open_errors");
}

static int run_queue(const char *url, const char *host, int port) {
    struct t t = {0};
    char err[256] = "";
    struct kf_queue *q = kf_queue_open(url, 1000, err, sizeof(err));
    redisContext *rc = redisConnect(host, port);
    CHECK(&t, q != NULL && rc != NULL && rc->err == 0, "%s", err);
    if (q == NULL || rc == NULL || rc->err)
        return 1;
    freeReplyObject(redisCommand(rc, "SELECT 3"));
    freeReplyObject(redisCommand(rc, "FLUSHDB"));
    CHECK(&t, kf_queue_ping(q) == 0, "%s", kf_queue_error(q));
    test_queue_stream(&t, q, rc);
    test_queue_dead(&t, q, rc);
    test_queue_rate(&t, q, rc);
    test_queue_heartbeats(&t, q, rc);
    test_queue_open_errors(&t);
    redisFree(rc);
    kf_queue_close(q);
    printf("checks %d fails %d\n", t.checks, t.fails);
    return t.fails == 0 ? 0 : 1;
}

/* ---- outage ---- */

static void wait_line(void) {
    char line[64];
    if (fgets(line, sizeof(line), stdin) == NULL)
        exit(2);
}

static bool add_one_works(struct kf_db *db) {
    const char *p[] = {"1"};
    PGresult *r = kf_db_exec(db, "add_one", 1, p);
    bool good = r != NULL && strcmp(PQgetvalue(r, 0, 0), "2") == 0;
    PQclear(r);
    return good;
}

static void outage_down(struct t *t, const char *pg, struct kf_db *db, struct kf_queue *q) {
    int64_t t0 = kf_now_ms();
    CHECK(t, !add_one_works(db), "exec worked with the server stopped");
    CHECK(t, kf_now_ms() - t0 < 3000, "exec took %lld ms", (long long)(kf_now_ms() - t0));
    CHECK(t, kf_db_error(db)[0] != '\0' && kf_db_sqlstate(db)[0] == '\0', "%s / %s",
          kf_db_error(db), kf_db_sqlstate(db));
    CHECK(t, !kf_db_ok(db), "ok while down");
    char err[512] = "";
    t0 = kf_now_ms();
    struct kf_db *other = kf_db_open(pg, kf_test_stmts, KF_TEST_NSTMTS, err, sizeof(err));
    CHECK(t, other == NULL && err[0] != '\0' && kf_now_ms() - t0 < 3000, "open while down");
    kf_db_close(other);
    struct kf_db_pool *p = kf_db_pool_open(pg, kf_test_stmts, KF_TEST_NSTMTS, 2, err, sizeof(err));
    CHECK(t, p != NULL, "pool_open while down: %s", err);
    t0 = kf_now_ms();
    CHECK(t, p == NULL || kf_db_pool_get(p, 1000) == NULL, "a connection while down");
    CHECK(t, kf_now_ms() - t0 < 2500, "pool_get took %lld ms", (long long)(kf_now_ms() - t0));
    kf_db_pool_close(p);
    t0 = kf_now_ms();
    CHECK(t, kf_queue_ping(q) == -1 && kf_queue_error(q)[0] != '\0', "ping while down");
    CHECK(t, kf_queue_ping(q) == -1, "ping again while down");
    CHECK(t, kf_now_ms() - t0 < 2500, "ping took %lld ms", (long long)(kf_now_ms() - t0));
    ok("outage_down");
}

static void outage_again(struct t *t, const char *pg, struct kf_db *db, struct kf_queue *q) {
    CHECK(t, add_one_works(db), "after the restart: %s", kf_db_error(db));
    CHECK(t, kf_db_ok(db), "ok after the restart");
    char err[512] = "";
    struct kf_db_pool *p = kf_db_pool_open(pg, kf_test_stmts, KF_TEST_NSTMTS, 1, err, sizeof(err));
    struct kf_db *c = p != NULL ? kf_db_pool_get(p, 1000) : NULL;
    CHECK(t, c != NULL && add_one_works(c), "pool after the restart");
    kf_db_pool_put(p, c);
    kf_db_pool_close(p);
    CHECK(t, kf_queue_ping(q) == 0, "ping after the restart: %s", kf_queue_error(q));
    ok("outage_again");
}

static int run_outage(const char *pg, const char *redis) {
    struct t t = {0};
    char err[512] = "";
    struct kf_db *db = kf_db_open(pg, kf_test_stmts, KF_TEST_NSTMTS, err, sizeof(err));
    struct kf_queue *q = kf_queue_open(redis, 1000, err, sizeof(err));
    CHECK(&t, db != NULL && q != NULL, "%s", err);
    if (db == NULL || q == NULL)
        return 1;
    CHECK(&t, add_one_works(db) && kf_queue_ping(q) == 0, "up");
    printf("up\n");
    fflush(stdout);
    wait_line();
    outage_down(&t, pg, db, q);
    printf("down\n");
    fflush(stdout);
    wait_line();
    outage_again(&t, pg, db, q);
    kf_db_close(db);
    kf_queue_close(q);
    printf("checks %d fails %d\n", t.checks, t.fails);
    return t.fails == 0 ? 0 : 1;
}

/* The faults of "lib_test crash": named functions, so the report's frames can be checked. */
__attribute__((noinline)) static void crash_null(volatile int *p) {
    *p = 1;
}

__attribute__((noinline)) static int crash_overflow(int depth) {
    volatile char pad[4096]; /* 4 KiB a frame: 8 MiB of stack runs out in ~2000 calls */
    pad[0] = (char)depth;
    return depth < (1 << 30) ? crash_overflow(depth + 1) + pad[0]
                             : 0; /* bounded for the compiler */
}

static int run_crash(const char *kind) {
    if (kf_crash_install("lib_test") != 0)
        return 3;
    if (strcmp(kind, "null") == 0) {
        /* the first page is never mapped; parsed, so the analysers see no constant null */
        volatile int *nowhere = (volatile int *)(uintptr_t)strtoull("0x10", NULL, 16);
        crash_null(nowhere);
    } else if (strcmp(kind, "overflow") == 0) {
        return crash_overflow(0);
    }
    return 2; /* not reached for a known kind */
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "crash") == 0)
        return run_crash(argv[2]);
    if (argc == 2 && strcmp(argv[1], "unit") == 0)
        return run_unit();
    if (argc == 3 && strcmp(argv[1], "db") == 0)
        return run_db(argv[2]);
    if (argc == 5 && strcmp(argv[1], "queue") == 0)
        return run_queue(argv[2], argv[3], atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "outage") == 0)
        return run_outage(argv[2], argv[3]);
    fprintf(stderr, "usage: lib_test unit | db PG_URL | queue REDIS_URL HOST PORT | "
                    "outage PG_URL REDIS_URL | crash null|overflow\n");
    return 2;
}
