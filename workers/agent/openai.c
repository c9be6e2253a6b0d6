/* openai.c: kf_openai_chat, one chat completion with retries (openai.h). Each attempt runs on
 * one libcurl easy handle driven by a multi handle of this call (so the connection is reused
 * between attempts, and the abort hook is polled every POLL_MS however quiet the transfer is);
 * each failure is classified once (classify), and the retryable ones wait a back-off (jittered
 * exponential, or the server's Retry-After) that the abort hook can also cut short. */
#include "openai.h"

#include "buf.h"

#include <curl/curl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 100     /* the abort hook's period during transfers and back-offs */
#define SNIPPET 200     /* body bytes quoted in error messages */
#define MAX_RETRIES 100 /* max_retries is clamped to this */
#define REASON_LEN 512  /* one attempt's reason */

const char *kf_policy_status_name(enum kf_policy_status s) {
    switch (s) {
    case KF_POLICY_OK:
        return "ok";
    case KF_POLICY_UNREACHABLE:
        return "unreachable";
    case KF_POLICY_TIMEOUT:
        return "timeout";
    case KF_POLICY_RATE_LIMITED:
        return "rate_limited";
    case KF_POLICY_SERVER_ERROR:
        return "server_error";
    case KF_POLICY_HTTP_ERROR:
        return "http_error";
    case KF_POLICY_BAD_RESPONSE:
        return "bad_response";
    case KF_POLICY_ABORTED:
        return "aborted";
    }
    return "unknown";
}

void kf_openai_cfg_init(struct kf_openai_cfg *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_retries = -1;
}

void kf_openai_reply_free(struct kf_openai_reply *r) {
    if (r == NULL)
        return;
    json_decref(r->message);
    json_decref(r->prompt_token_ids);
    json_decref(r->token_ids);
    json_decref(r->logprobs);
    memset(r, 0, sizeof(*r));
    r->prompt_tokens = r->completion_tokens = -1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* splitmix64: the back-off's jitter. The state lives in the call, seeded from the clocks and
 * the process, so concurrent calls draw different jitters without shared state. */
static uint64_t next_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t seed_rand(const void *local) {
    struct timespec m, w;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &w);
    return (uint64_t)m.tv_nsec ^ ((uint64_t)w.tv_sec << 32) ^ (uint64_t)w.tv_nsec ^
           ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)local;
}

/* One attempt's outcome, as the callbacks and curl_easy_getinfo leave it. */
struct attempt {
    struct kf_buf body; /* the response body (owned; emptied per attempt) */
    int too_big;        /* the body passed KF_OPENAI_MAX_BODY: the transfer was cut */
    int started;        /* the request was handed to curl (an attempt made) */
    int aborted;        /* the abort hook fired */
    CURLcode rc;
    long status;      /* the HTTP status, 0 if none */
    long retry_after; /* the server's Retry-After in seconds, 0 if none */
    int connected;    /* the request got as far as being sent */
    char curl_err[CURL_ERROR_SIZE];
};

/* The call's transfer state: owned by kf_openai_chat, freed by conn_free. */
struct conn {
    CURLM *multi;
    CURL *easy;
    struct curl_slist *headers;
    char *url, *payload;
    struct attempt a;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg) {
    struct attempt *a = arg;
    size_t n = size * nmemb;
    if (a->body.len + n > KF_OPENAI_MAX_BODY) {
        a->too_big = 1;
        return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
    }
    return kf_buf_append(&a->body, p, n) ? n : 0;
}

static void conn_free(struct conn *c) {
    if (c->multi && c->easy)
        curl_multi_remove_handle(c->multi, c->easy);
    if (c->easy)
        curl_easy_cleanup(c->easy);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    curl_slist_free_all(c->headers);
    free(c->url);
    free(c->payload);
    kf_buf_free(&c->a.body);
}

static long ms_of(double s) {
    double ms = ceil(s * 1000.0);
    return ms < 1 ? 1 : ms > 1e9 ? 1000000000L : (long)ms;
}

/* Sets up c (zeroed by the caller) for POST url with payload (both owned by c from here, even
 * on failure). 0, or -1 with a reason in err. */
static int conn_init(struct conn *c, const struct kf_openai_cfg *cfg, char *url, char *payload,
                     char *err, size_t errlen) {
    c->url = url;
    c->payload = payload;
    c->multi = curl_multi_init();
    c->easy = curl_easy_init();
    if (c->multi == NULL || c->easy == NULL) {
        snprintf(err, errlen, "curl: cannot create a handle (is curl_global_init called?)");
        return -1;
    }
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    int bad = c->headers == NULL;
    struct curl_slist *h = curl_slist_append(c->headers, "Accept: application/json");
    bad |= h == NULL;
    h = curl_slist_append(c->headers, "Expect:"); /* no 100-continue round trip */
    bad |= h == NULL;
    if (cfg->api_key && cfg->api_key[0]) {
        size_t n = strlen(cfg->api_key) + sizeof("Authorization: Bearer ");
        char *auth = malloc(n);
        if (auth) {
            snprintf(auth, n, "Authorization: Bearer %s", cfg->api_key);
            h = curl_slist_append(c->headers, auth); /* curl copies the string */
            free(auth);
        }
        bad |= auth == NULL || h == NULL;
    }
    if (bad) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    double timeout = cfg->timeout_s > 0 ? cfg->timeout_s : KF_OPENAI_DEFAULT_TIMEOUT_S;
    double connect =
        cfg->connect_timeout_s > 0 ? cfg->connect_timeout_s : KF_OPENAI_DEFAULT_CONNECT_TIMEOUT_S;
    CURL *e = c->easy;
    CURLcode rc = curl_easy_setopt(e, CURLOPT_URL, c->url);
    rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    rc |= curl_easy_setopt(e, CURLOPT_POST, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->payload);
    rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->payload));
    rc |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    rc |= curl_easy_setopt(e, CURLOPT_USERAGENT, "kforge-agent/1");
    rc |= curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, &c->a);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->a.curl_err);
    rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms_of(timeout));
    rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms_of(connect));
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "curl: cannot set the request's options");
        return -1;
    }
    return 0;
}

/* Runs one attempt on c, polling the abort hook every POLL_MS; fills c->a. */
static void perform(struct conn *c, const struct kf_openai_cfg *cfg) {
    struct attempt *a = &c->a;
    a->body.len = 0;
    if (a->body.data)
        a->body.data[0] = '\0';
    a->too_big = a->started = a->aborted = a->connected = 0;
    a->rc = CURLE_OK;
    a->status = a->retry_after = 0;
    a->curl_err[0] = '\0';
    if (cfg->abort_cb && cfg->abort_cb(cfg->abort_arg)) {
        a->aborted = 1;
        return;
    }
    CURLMcode mc = curl_multi_add_handle(c->multi, c->easy);
    a->started = mc == CURLM_OK;
    int running = 1;
    while (mc == CURLM_OK) {
        mc = curl_multi_perform(c->multi, &running);
        if (mc != CURLM_OK || running == 0)
            break;
        if (cfg->abort_cb && cfg->abort_cb(cfg->abort_arg)) {
            a->aborted = 1;
            break;
        }
        mc = curl_multi_poll(c->multi, NULL, 0, POLL_MS, NULL);
    }
    if (mc != CURLM_OK) {
        a->rc = CURLE_FAILED_INIT;
        snprintf(a->curl_err, sizeof(a->curl_err), "%s", curl_multi_strerror(mc));
    } else if (!a->aborted) {
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(c->multi, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c->easy)
                a->rc = msg->data.result;
    }
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &a->status);
    curl_off_t retry_after = 0, pretransfer = 0;
    curl_easy_getinfo(c->easy, CURLINFO_RETRY_AFTER, &retry_after);
    curl_easy_getinfo(c->easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
    a->retry_after = retry_after > 0 ? (long)retry_after : 0;
    a->connected = pretransfer > 0 || a->status > 0;
    curl_multi_remove_handle(c->multi, c->easy);
}

/* The first SNIPPET bytes of the body on one line (controls as spaces, no cut UTF-8, and only
 * ASCII when the body is not UTF-8), so that err always fits in a JSON string. */
static void snippet(const struct kf_buf *b, char *out, size_t outlen) {
    size_t n = b->len < SNIPPET ? b->len : SNIPPET;
    if (n >= outlen)
        n = outlen - 1;
    if (n < b->len)
        while (n > 0 && ((unsigned char)b->data[n] & 0xC0) == 0x80)
            n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)b->data[i];
        out[i] = ch < 0x20 || ch == 0x7F ? ' ' : (char)ch;
    }
    out[n] = '\0';
    json_t *valid = json_string(out); /* NULL when it is not UTF-8: keep ASCII only */
    if (valid == NULL)
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)out[i] >= 0x80)
                out[i] = '?';
    json_decref(valid);
}

/* What one attempt came to: a status (KF_POLICY_OK when the body parsed into *out), whether it
 * is worth another attempt, and a reason. */
static enum kf_policy_status classify(struct attempt *a, struct kf_openai_reply *out,
                                      int *retryable, char *reason, size_t rlen) {
    char body[SNIPPET + 1];
    snippet(&a->body, body, sizeof(body));
    const char *sep = body[0] ? ": " : "";
    *retryable = 1;
    if (a->too_big) {
        *retryable = 0;
        snprintf(reason, rlen, "HTTP %ld: the body passed %u bytes", a->status, KF_OPENAI_MAX_BODY);
        return KF_POLICY_BAD_RESPONSE;
    }
    const char *what = a->curl_err[0] ? a->curl_err : curl_easy_strerror(a->rc);
    switch (a->rc) {
    case CURLE_OK:
    case CURLE_PARTIAL_FILE:
        break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(reason, rlen, "%s", what);
        return a->connected ? KF_POLICY_TIMEOUT : KF_POLICY_UNREACHABLE;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        *retryable = 0;
        snprintf(reason, rlen, "bad URL: %s", what);
        return KF_POLICY_UNREACHABLE;
    default:
        snprintf(reason, rlen, "%s", what);
        return KF_POLICY_UNREACHABLE;
    }
    long s = a->status;
    if (s == 429) {
        snprintf(reason, rlen, "HTTP 429%s%s", sep, body);
        return KF_POLICY_RATE_LIMITED;
    }
    if (s >= 500) {
        snprintf(reason, rlen, "HTTP %ld%s%s", s, sep, body);
        return KF_POLICY_SERVER_ERROR;
    }
    if (s == 408) {
        snprintf(reason, rlen, "HTTP 408%s%s", sep, body);
        return KF_POLICY_TIMEOUT;
    }
    if (s < 200 || s >= 300) {
        *retryable = 0;
        snprintf(reason, rlen, "HTTP %ld%s%s", s, sep, body);
        return KF_POLICY_HTTP_ERROR;
    }
    if (a->rc == CURLE_PARTIAL_FILE) {
        snprintf(reason, rlen, "HTTP %ld: the body was cut short after %zu bytes%s%s", s,
                 a->body.len, sep, body);
        return KF_POLICY_BAD_RESPONSE;
    }
    char why[256];
    if (kf_openai_parse_reply(a->body.data ? a->body.data : "", a->body.len, out, why,
                              sizeof(why)) != 0) {
        snprintf(reason, rlen, "HTTP %ld: %s%s%s", s, why, sep, body);
        return KF_POLICY_BAD_RESPONSE;
    }
    return KF_POLICY_OK;
}

/* The wait before retry number `retry` (1-based): the server's Retry-After when it sent one
 * (up to KF_OPENAI_RETRY_AFTER_CAP_S), else backoff * 2^(retry-1) * [0.75, 1.25) up to
 * KF_OPENAI_BACKOFF_CAP_S. */
static double backoff_for(const struct kf_openai_cfg *cfg, const struct attempt *a, int retry,
                          uint64_t *rng) {
    if (a->retry_after > 0)
        return a->retry_after < KF_OPENAI_RETRY_AFTER_CAP_S ? (double)a->retry_after
                                                            : KF_OPENAI_RETRY_AFTER_CAP_S;
    double base = cfg->backoff_s > 0 ? cfg->backoff_s : KF_OPENAI_DEFAULT_BACKOFF_S;
    double d = base * ldexp(1.0, retry - 1 < 30 ? retry - 1 : 30);
    d *= 0.75 + 0.5 * ((double)(next_rand(rng) >> 11) / 9007199254740992.0);
    return d < KF_OPENAI_BACKOFF_CAP_S ? d : KF_OPENAI_BACKOFF_CAP_S;
}

/* Sleeps seconds, polling the abort hook every POLL_MS. Non-zero when it fired. */
static int sleep_unless_aborted(const struct kf_openai_cfg *cfg, double seconds) {
    double until = now_s() + seconds;
    for (;;) {
        if (cfg->abort_cb && cfg->abort_cb(cfg->abort_arg))
            return 1;
        double left = until - now_s();
        if (left <= 0)
            return 0;
        if (left > POLL_MS / 1000.0)
            left = POLL_MS / 1000.0;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* BASE/chat/completions with one trailing slash of BASE dropped. Owned by the caller. */
static char *chat_url(const char *base) {
    size_t n = strlen(base);
    if (n > 0 && base[n - 1] == '/')
        n--;
    size_t len = n + sizeof("/chat/completions");
    char *url = malloc(len);
    if (url)
        snprintf(url, len, "%.*s/chat/completions", (int)n, base);
    return url;
}

/* Copies src into err on one line. */
static void set_err(char *err, size_t errlen, const char *src) {
    if (err == NULL || errlen == 0)
        return;
    snprintf(err, errlen, "%s", src);
    for (char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
}

/* Checks the arguments and builds the URL and the payload (owned by the caller). 0, or -1 with
 * a reason in err. */
static int prepare(const struct kf_openai_cfg *cfg, const json_t *messages, const json_t *tools,
                   char **url, char **payload, char *err, size_t errlen) {
    if (cfg == NULL || cfg->base_url == NULL || cfg->base_url[0] == '\0') {
        snprintf(err, errlen, "bad arguments: no base URL");
        return -1;
    }
    if (cfg->model == NULL || cfg->model[0] == '\0') {
        snprintf(err, errlen, "bad arguments: no model");
        return -1;
    }
    if (!json_is_array(messages)) {
        snprintf(err, errlen, "bad arguments: messages is not an array");
        return -1;
    }
    json_t *body = kf_openai_request_body(cfg, messages, tools);
    *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    *url = chat_url(cfg->base_url);
    if (*payload == NULL || *url == NULL) {
        snprintf(err, errlen, "cannot encode the request body (out of memory?)");
        free(*payload);
        free(*url);
        *payload = *url = NULL;
        return -1;
    }
    return 0;
}

enum kf_policy_status kf_openai_chat(const struct kf_openai_cfg *cfg, const json_t *messages,
                                     const json_t *tools, struct kf_openai_reply *out, char *err,
                                     size_t errlen) {
    double t0 = now_s();
    memset(out, 0, sizeof(*out));
    out->prompt_tokens = out->completion_tokens = -1;
    char reason[REASON_LEN], line[REASON_LEN + 96];
    line[0] = '\0';
    char *url = NULL, *payload = NULL;
    if (prepare(cfg, messages, tools, &url, &payload, reason, sizeof(reason)) != 0) {
        set_err(err, errlen, reason);
        out->seconds = now_s() - t0;
        return KF_POLICY_HTTP_ERROR;
    }
    struct conn c;
    memset(&c, 0, sizeof(c));
    if (conn_init(&c, cfg, url, payload, reason, sizeof(reason)) != 0) {
        conn_free(&c);
        set_err(err, errlen, reason);
        out->seconds = now_s() - t0;
        return KF_POLICY_UNREACHABLE;
    }
    int retries = cfg->max_retries < 0 ? KF_OPENAI_DEFAULT_RETRIES : cfg->max_retries;
    if (retries > MAX_RETRIES)
        retries = MAX_RETRIES;
    uint64_t rng = seed_rand(&c);
    enum kf_policy_status st = KF_POLICY_UNREACHABLE;
    for (;;) {
        perform(&c, cfg);
        if (c.a.status > 0)
            out->http_status = (int)c.a.status;
        out->attempts += c.a.started;
        if (c.a.aborted) {
            snprintf(line, sizeof(line), "aborted %s attempt %d", c.a.started ? "during" : "before",
                     out->attempts + !c.a.started);
            st = KF_POLICY_ABORTED;
            break;
        }
        int retryable;
        st = classify(&c.a, out, &retryable, reason, sizeof(reason));
        if (st == KF_POLICY_OK)
            break;
        snprintf(line, sizeof(line), "%s after %d attempt%s", reason, out->attempts,
                 out->attempts == 1 ? "" : "s");
        if (!retryable || out->attempts > retries)
            break;
        if (sleep_unless_aborted(cfg, backoff_for(cfg, &c.a, out->attempts, &rng))) {
            snprintf(line, sizeof(line), "aborted in the back-off after attempt %d (%s)",
                     out->attempts, reason);
            st = KF_POLICY_ABORTED;
            break;
        }
    }
    if (st != KF_POLICY_OK)
        set_err(err, errlen, line);
    else if (err && errlen)
        err[0] = '\0';
    conn_free(&c);
    out->seconds = now_s() - t0;
    return st;
}
