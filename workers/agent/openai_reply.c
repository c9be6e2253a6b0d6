/* openai_reply.c: the chat-completions request body, and a response body parsed into
 * struct kf_openai_reply with the assistant message in its one normalised shape (openai.h). */
#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Members of cfg->sampling that the client sets itself and never copies. */
static int reserved_member(const char *key) {
    static const char *const reserved[] = {"model", "messages", "tools", "stream"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strcmp(key, reserved[i]) == 0)
            return 1;
    return 0;
}

json_t *kf_openai_request_body(const struct kf_openai_cfg *cfg, const json_t *messages,
                               const json_t *tools) {
    json_t *body = json_object();
    if (body == NULL)
        return NULL;
    int bad = json_object_set_new(body, "model", json_string(cfg->model ? cfg->model : ""));
    /* jansson's setters take non-const values; the body only holds references, and is
     * dumped, never changed through them. */
    bad |= json_object_set(body, "messages", (json_t *)messages);
    if (json_is_array(tools) && json_array_size(tools) > 0) {
        bad |= json_object_set(body, "tools", (json_t *)tools);
        bad |= json_object_set_new(body, "tool_choice", json_string("auto"));
    }
    if (json_is_object(cfg->sampling)) {
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)cfg->sampling, key, value) {
            if (!reserved_member(key))
                bad |= json_object_set(body, key, value);
        }
    }
    if (cfg->return_token_ids)
        bad |= json_object_set_new(body, "return_token_ids", json_true());
    if (cfg->logprobs > 0) {
        bad |= json_object_set_new(body, "logprobs", json_true());
        int top = cfg->logprobs - 1;
        if (top > KF_OPENAI_MAX_TOP_LOGPROBS)
            top = KF_OPENAI_MAX_TOP_LOGPROBS;
        if (top > 0)
            bad |= json_object_set_new(body, "top_logprobs", json_integer(top));
    }
    if (bad) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* content as sent -> a new string or null: a string as is, null/missing as null, an array of
 * parts as its "text" members joined, anything else as its compact JSON dump. New reference or
 * NULL (memory). */
static json_t *norm_content(json_t *content) {
    if (content == NULL || json_is_null(content))
        return json_null();
    if (json_is_string(content))
        return json_stringn(json_string_value(content), json_string_length(content));
    if (json_is_array(content)) {
        size_t total = 0, i;
        json_t *part;
        json_array_foreach(content, i, part) {
            json_t *text = json_object_get(part, "text");
            if (json_is_string(text))
                total += json_string_length(text);
        }
        char *joined = malloc(total + 1);
        if (joined == NULL)
            return NULL;
        size_t at = 0;
        json_array_foreach(content, i, part) {
            json_t *text = json_object_get(part, "text");
            if (json_is_string(text)) {
                memcpy(joined + at, json_string_value(text), json_string_length(text));
                at += json_string_length(text);
            }
        }
        json_t *s = json_stringn(joined, at);
        free(joined);
        return s;
    }
    char *dump = json_dumps(content, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *s = dump ? json_string(dump) : NULL;
    free(dump);
    return s;
}

/* A function's arguments as sent -> a new string: a string verbatim (even when it is not JSON:
 * the policy's own output), "{}" when missing or null, else the compact JSON dump. */
static json_t *norm_arguments(json_t *args) {
    if (args == NULL || json_is_null(args))
        return json_string("{}");
    if (json_is_string(args))
        return json_stringn(json_string_value(args), json_string_length(args));
    char *dump = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *s = dump ? json_string(dump) : NULL;
    free(dump);
    return s;
}

/* true when id is already taken by a call of calls (the normalised ones) or of sent (the
 * server's, so that a generated id never repeats one that comes later). */
static int id_taken(const json_t *calls, const json_t *sent, const char *id) {
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "id")), id) == 0)
            return 1;
    }
    json_array_foreach(sent, i, c) {
        const char *s = json_string_value(json_object_get(c, "id"));
        if (s && strcmp(s, id) == 0)
            return 1;
    }
    return 0;
}

/* One call of the server's tool_calls -> the normalised call, appended to calls. 0, or -1 with
 * a reason in err. */
static int add_call(json_t *calls, const json_t *sent, json_t *call, size_t index, char *err,
                    size_t errlen) {
    if (!json_is_object(call)) {
        snprintf(err, errlen, "choices[0].message.tool_calls[%zu] is not an object", index);
        return -1;
    }
    json_t *fn = json_object_get(call, "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    const char *id = json_string_value(json_object_get(call, "id"));
    char made[32];
    if (id == NULL || id[0] == '\0') {
        size_t n = index;
        do
            snprintf(made, sizeof(made), "call_%zu", n++);
        while (id_taken(calls, sent, made));
        id = made;
    }
    json_t *args = norm_arguments(json_object_get(fn, "arguments"));
    json_t *out = json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", id, "type", "function", "function",
                            "name", name ? name : "", "arguments", args);
    if (out == NULL || json_array_append_new(calls, out) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* choices[0].message -> {"role":"assistant","content":...,"tool_calls":[...]}. New reference,
 * or NULL with a reason in err. */
static json_t *norm_message(json_t *msg, char *err, size_t errlen) {
    json_t *sent = json_object_get(msg, "tool_calls");
    if (sent != NULL && !json_is_null(sent) && !json_is_array(sent)) {
        snprintf(err, errlen, "choices[0].message.tool_calls is not an array");
        return NULL;
    }
    json_t *content = norm_content(json_object_get(msg, "content"));
    json_t *out = json_pack("{s:s, s:o}", "role", "assistant", "content", content);
    json_t *calls = json_array();
    if (out == NULL || calls == NULL) {
        snprintf(err, errlen, "out of memory");
        json_decref(out);
        json_decref(calls);
        return NULL;
    }
    size_t i;
    json_t *call;
    json_array_foreach(sent, i, call) {
        if (add_call(calls, sent, call, i, err, errlen) != 0) {
            json_decref(calls);
            json_decref(out);
            return NULL;
        }
    }
    if (json_array_size(calls) > 0 && json_object_set(out, "tool_calls", calls) != 0) {
        snprintf(err, errlen, "out of memory");
        json_decref(calls);
        json_decref(out);
        return NULL;
    }
    json_decref(calls);
    return out;
}

/* A new reference to obj[key], or NULL when it is missing or null. */
static json_t *take(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? json_incref(v) : NULL;
}

static long usage_count(json_t *usage, const char *key) {
    json_t *v = json_object_get(usage, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

int kf_openai_parse_reply(const char *body, size_t len, struct kf_openai_reply *out, char *err,
                          size_t errlen) {
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
    if (root == NULL) {
        snprintf(err, errlen, "the body is not JSON (%s at byte %d)", je.text, je.position);
        return -1;
    }
    json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
    json_t *msg = json_object_get(choice, "message");
    if (!json_is_object(msg)) {
        json_t *e = json_object_get(json_object_get(root, "error"), "message");
        snprintf(err, errlen, "the body lacks choices[0].message%s%s",
                 json_is_string(e) ? ": " : "", json_is_string(e) ? json_string_value(e) : "");
        json_decref(root);
        return -1;
    }
    out->message = norm_message(msg, err, errlen);
    if (out->message == NULL) {
        json_decref(root);
        return -1;
    }
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    snprintf(out->finish_reason, sizeof(out->finish_reason), "%s", finish ? finish : "");
    out->prompt_token_ids = take(root, "prompt_token_ids");
    out->token_ids = take(choice, "token_ids");
    out->logprobs = take(choice, "logprobs");
    json_t *usage = json_object_get(root, "usage");
    out->prompt_tokens = usage_count(usage, "prompt_tokens");
    out->completion_tokens = usage_count(usage, "completion_tokens");
    json_decref(root);
    return 0;
}
