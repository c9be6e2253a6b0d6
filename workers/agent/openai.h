/* openai.h: the `openai` policy's HTTP client. One call per agent turn: POST
 * BASE/chat/completions (no streaming) to any OpenAI-compatible server (vLLM, SGLang, OpenAI),
 * with retries and back-off for the failures worth retrying, a cancel hook, and the reply
 * normalised to one message shape (openai.c: the call; openai_reply.c: the request body and
 * the reply's parsing).
 *
 * Thread-safe: nothing global. curl_global_init(CURL_GLOBAL_DEFAULT) is the caller's business:
 * call it once in main() before any thread calls kf_openai_chat (the probe does). */
#ifndef KF_OPENAI_H
#define KF_OPENAI_H

#include <jansson.h>
#include <stddef.h>

enum kf_policy_status {
    KF_POLICY_OK = 0,
    KF_POLICY_UNREACHABLE,  /* connection refused / DNS / reset / connect timeout, after the
                               retries (a malformed URL: at once) */
    KF_POLICY_TIMEOUT,      /* no complete answer within timeout_s (or a 408), after the retries */
    KF_POLICY_RATE_LIMITED, /* 429 after the retries */
    KF_POLICY_SERVER_ERROR, /* 5xx after the retries */
    KF_POLICY_HTTP_ERROR,   /* other 4xx (400, 401, 403, 404, 422), 1xx/3xx, or bad arguments
                               (no URL, no model, messages not an array): not retried */
    KF_POLICY_BAD_RESPONSE, /* 2xx whose body is not JSON, is cut short, or lacks
                               choices[0].message (retried like a 5xx, then this); a body over
                               KF_OPENAI_MAX_BODY (not retried) */
    KF_POLICY_ABORTED,      /* abort_cb returned non-zero (the job was cancelled) */
};

/* "ok", "unreachable", "timeout", "rate_limited", "server_error", "http_error",
 * "bad_response", "aborted" ("unknown" for anything else). Static strings. */
const char *kf_policy_status_name(enum kf_policy_status s);

#define KF_OPENAI_MAX_BODY (16u << 20) /* a response body larger than this is bad_response */
#define KF_OPENAI_DEFAULT_TIMEOUT_S 300.0
#define KF_OPENAI_DEFAULT_CONNECT_TIMEOUT_S 10.0
#define KF_OPENAI_DEFAULT_RETRIES 4
#define KF_OPENAI_DEFAULT_BACKOFF_S 1.0
#define KF_OPENAI_BACKOFF_CAP_S 30.0     /* a computed back-off never exceeds this */
#define KF_OPENAI_RETRY_AFTER_CAP_S 60.0 /* a server's Retry-After is honoured up to this */
#define KF_OPENAI_MAX_TOP_LOGPROBS 20    /* OpenAI's bound on top_logprobs */

/* Everything a call needs; all pointers are borrowed for the duration of the call. Zero means
 * "the default" for the numbers except max_retries (0 is "no retries": start from
 * kf_openai_cfg_init to get the defaults). */
struct kf_openai_cfg {
    const char *base_url; /* e.g. "http://127.0.0.1:8000/v1": POST BASE/chat/completions (one
                             trailing slash stripped) */
    const char *model;
    const char *api_key;      /* NULL or "": no Authorization header; else "Bearer KEY" */
    const json_t *sampling;   /* NULL or an object whose members are copied into the request body
                                 (temperature, top_p, max_tokens, max_completion_tokens, seed,
                                 stop, tool_choice, ...), except "model", "messages", "tools" and
                                 "stream", which the client owns; not an object: ignored */
    int return_token_ids;     /* non-zero: the body gets "return_token_ids": true (vLLM) */
    int logprobs;             /* N > 0: "logprobs": true, and "top_logprobs": N-1 when N > 1
                                 (capped at 20): N log-probabilities per position, the sampled
                                 token's and N-1 alternatives; 0: neither (sampling may still
                                 set them) */
    double timeout_s;         /* whole-request limit per attempt (<= 0: 300) */
    double connect_timeout_s; /* <= 0: 10 */
    int max_retries;          /* extra attempts after the first for retryable failures;
                                 < 0: 4 (the default), 0: none, at most 100 */
    double backoff_s; /* first back-off (<= 0: 1 s), doubled each retry, +-25% jitter, capped at
                         30 s; a Retry-After header (seconds or an HTTP date) on any retried
                         status replaces it, up to 60 s */
    int (*abort_cb)(void *arg); /* NULL or polled at least every 100 ms during transfers and
                                   back-offs; non-zero aborts the call */
    void *abort_arg;
};

/* The defaults: everything zero/NULL except max_retries = -1 (4 retries). */
void kf_openai_cfg_init(struct kf_openai_cfg *cfg);

struct kf_openai_reply {
    json_t *message; /* owned: {"role":"assistant","content": string or null, "tool_calls": [...]}
                        ("tool_calls" only when non-empty); each call is
                        {"id","type":"function","function":{"name","arguments"}} with
                        "arguments" always a string: the raw text as sent, or the compact JSON
                        dump of a non-string value ("{}" when missing or null); a missing or
                        empty id becomes "call_N", unique within the reply. A content sent as
                        an array of parts is joined into one string of its "text" members */
    char finish_reason[32];   /* choices[0].finish_reason or "" */
    json_t *prompt_token_ids; /* owned or NULL: top-level "prompt_token_ids" (vLLM) */
    json_t *token_ids;        /* owned or NULL: choices[0].token_ids (vLLM) */
    json_t *logprobs;         /* owned or NULL: choices[0].logprobs as sent */
    long prompt_tokens;       /* usage.prompt_tokens, or -1 when absent */
    long completion_tokens;   /* usage.completion_tokens, or -1 when absent */
    int attempts;             /* HTTP attempts made */
    int http_status;          /* last HTTP status, 0 if none */
    double seconds;           /* wall time of the whole call including back-offs */
};

/* One chat completion: POST {model, messages, tools + tool_choice "auto" (only when tools is a
 * non-empty array), ...sampling, return_token_ids, logprobs, top_logprobs}. cfg, messages and
 * tools are borrowed. *out is always reset first: attempts, http_status and seconds are set
 * whatever the outcome, and the owned members only on KF_POLICY_OK; the caller frees it with
 * kf_openai_reply_free in every case. On failure a one-line reason goes to err (the status, and
 * the first 200 bytes of the body where there was one). */
enum kf_policy_status kf_openai_chat(const struct kf_openai_cfg *cfg, const json_t *messages,
                                     const json_t *tools, struct kf_openai_reply *out, char *err,
                                     size_t errlen);

/* Frees the owned members and resets *r to an empty reply (NULLs, zeros, token counts -1);
 * NULL-safe, safe twice. */
void kf_openai_reply_free(struct kf_openai_reply *r);

/* The request body kf_openai_chat sends (see there). New reference, or NULL when memory ran
 * out; the caller owns it. cfg, messages and tools are borrowed (messages is not checked). */
json_t *kf_openai_request_body(const struct kf_openai_cfg *cfg, const json_t *messages,
                               const json_t *tools);

/* Parses a 2xx response body of len bytes into the message, finish reason, token ids,
 * logprobs and usage of *out (attempts, http_status and seconds are left alone; the owned
 * members must be NULL on entry). 0, or -1 with a reason in err and *out's owned members left
 * NULL. body is borrowed. */
int kf_openai_parse_reply(const char *body, size_t len, struct kf_openai_reply *out, char *err,
                          size_t errlen);

#endif
