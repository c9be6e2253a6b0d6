/* openai_probe.c: one kf_openai_chat call from the command line, for the tests (openai.h).
 *
 *   openai_probe --url U --model M --messages FILE [--tools FILE] [--key K] [--timeout S]
 *                [--connect-timeout S] [--retries N] [--backoff S] [--token-ids]
 *                [--logprobs N] [--sampling JSON] [--abort-after S]
 *
 * Prints one JSON object on stdout: {"status", "error", "message", "finish_reason",
 * "prompt_token_ids", "token_ids", "logprobs", "usage": {"prompt_tokens",
 * "completion_tokens"}, "attempts", "http_status", "seconds"} (null where there is nothing).
 * Exit 0 when it printed that (whatever the status), 2 on bad usage. --retries defaults to the
 * client's default (4); --abort-after S makes the abort hook fire S seconds after the start. */
#include "openai.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct opts {
    struct kf_openai_cfg cfg;
    const char *messages_path, *tools_path, *sampling_text;
    double abort_after; /* < 0: never */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The abort hook: arg points at the moment (now_s) after which it fires. */
static int abort_at(void *arg) {
    return now_s() >= *(const double *)arg;
}

static int usage(const char *why) {
    fprintf(stderr,
            "openai_probe: %s\nusage: openai_probe --url U --model M --messages FILE "
            "[--tools FILE] [--key K] [--timeout S] [--connect-timeout S] [--retries N] "
            "[--backoff S] [--token-ids] [--logprobs N] [--sampling JSON] [--abort-after S]\n",
            why);
    return 2;
}

static int num(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == '\0';
}

/* Fills o from argv. 0, or -1 (usage already printed by the caller). */
static int parse(int argc, char **argv, struct opts *o, const char **why) {
    kf_openai_cfg_init(&o->cfg);
    o->abort_after = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--token-ids") == 0) {
            o->cfg.return_token_ids = 1;
            continue;
        }
        if (i + 1 >= argc) {
            *why = "an option lacks its value (or is unknown)";
            return -1;
        }
        const char *v = argv[++i];
        double d = 0;
        int is_num = num(v, &d);
        if (strcmp(a, "--url") == 0)
            o->cfg.base_url = v;
        else if (strcmp(a, "--model") == 0)
            o->cfg.model = v;
        else if (strcmp(a, "--key") == 0)
            o->cfg.api_key = v;
        else if (strcmp(a, "--messages") == 0)
            o->messages_path = v;
        else if (strcmp(a, "--tools") == 0)
            o->tools_path = v;
        else if (strcmp(a, "--sampling") == 0)
            o->sampling_text = v;
        else if (strcmp(a, "--timeout") == 0 && is_num)
            o->cfg.timeout_s = d;
        else if (strcmp(a, "--connect-timeout") == 0 && is_num)
            o->cfg.connect_timeout_s = d;
        else if (strcmp(a, "--retries") == 0 && is_num && d >= 0 && d <= 100)
            o->cfg.max_retries = (int)d;
        else if (strcmp(a, "--backoff") == 0 && is_num)
            o->cfg.backoff_s = d;
        else if (strcmp(a, "--logprobs") == 0 && is_num && d >= 0 && d <= 100)
            o->cfg.logprobs = (int)d;
        else if (strcmp(a, "--abort-after") == 0 && is_num && d >= 0)
            o->abort_after = d;
        else {
            *why = "an unknown option or a bad value";
            return -1;
        }
    }
    if (o->cfg.base_url == NULL || o->cfg.model == NULL || o->messages_path == NULL) {
        *why = "--url, --model and --messages are required";
        return -1;
    }
    return 0;
}

/* A JSON file's value (new reference), or NULL with a message on stderr. */
static json_t *load(const char *path, const char *what) {
    json_error_t je;
    json_t *v = json_load_file(path, JSON_DECODE_ANY, &je);
    if (v == NULL)
        fprintf(stderr, "openai_probe: %s %s: %s (line %d)\n", what, path, je.text, je.line);
    return v;
}

/* A borrowed value or JSON null, as a new reference for json_pack's "o". */
static json_t *or_null(json_t *v) {
    return v ? json_incref(v) : json_null();
}

static json_t *count(long n) {
    return n >= 0 ? json_integer(n) : json_null();
}

int main(int argc, char **argv) {
    struct opts o;
    memset(&o, 0, sizeof(o));
    const char *why = "";
    if (parse(argc, argv, &o, &why) != 0)
        return usage(why);
    json_t *messages = load(o.messages_path, "--messages");
    json_t *tools = o.tools_path ? load(o.tools_path, "--tools") : NULL;
    json_t *sampling = NULL;
    if (o.sampling_text) {
        json_error_t je;
        sampling = json_loads(o.sampling_text, 0, &je);
        if (!json_is_object(sampling))
            fprintf(stderr, "openai_probe: --sampling is not a JSON object\n");
    }
    if (messages == NULL || (o.tools_path && tools == NULL) ||
        (o.sampling_text && !json_is_object(sampling))) {
        json_decref(messages);
        json_decref(tools);
        json_decref(sampling);
        return usage("bad --messages, --tools or --sampling");
    }
    o.cfg.sampling = sampling;
    double deadline = now_s() + o.abort_after;
    if (o.abort_after >= 0) {
        o.cfg.abort_cb = abort_at;
        o.cfg.abort_arg = &deadline;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "openai_probe: curl_global_init failed\n");
        return 1;
    }
    struct kf_openai_reply r;
    char err[1024];
    enum kf_policy_status st = kf_openai_chat(&o.cfg, messages, tools, &r, err, sizeof(err));
    int ok = st == KF_POLICY_OK;
    json_t *doc = json_pack(
        "{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o}, s:i, s:i, s:f}", "status",
        kf_policy_status_name(st), "error", ok ? json_null() : json_string(err), "message",
        or_null(r.message), "finish_reason", ok ? json_string(r.finish_reason) : json_null(),
        "prompt_token_ids", or_null(r.prompt_token_ids), "token_ids", or_null(r.token_ids),
        "logprobs", or_null(r.logprobs), "usage", "prompt_tokens", count(r.prompt_tokens),
        "completion_tokens", count(r.completion_tokens), "attempts", r.attempts, "http_status",
        r.http_status, "seconds", r.seconds);
    int rc = 1;
    if (doc && json_dumpf(doc, stdout, JSON_COMPACT) == 0) {
        fputc('\n', stdout);
        rc = 0;
    } else {
        fprintf(stderr, "openai_probe: cannot print the result\n");
    }
    json_decref(doc);
    kf_openai_reply_free(&r);
    json_decref(messages);
    json_decref(tools);
    json_decref(sampling);
    curl_global_cleanup();
    return rc;
}
