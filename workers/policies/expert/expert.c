/* expert.c: the expert policy's turns (see expert.h). The plan, in turns:
 *   1. profile (no model_new.py yet: the reference's times and its operator graph);
 *   2. write variant 0 of the kernel and model_new.py, compile, verify, profile;
 *   3. for each further variant: write it, compile, verify, profile;
 *   4. write back the fastest correct variant and submit it.
 * A variant's speed is the profile's speedup over eager in the verdict that follows it. */
#include "expert.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum stage { PROFILE_REF, FIRST, NEXT, DONE };

struct kfw_expert {
    char backend[8];
    enum stage stage;
    int variant; /* the variant whose verdict comes next */
    int best;    /* the fastest correct variant, -1 none */
    double best_speed;
    char *body; /* owned: the elementwise plan */
    int n_inputs;
    int bcast; /* the inputs broadcast: expert_bcast.c's kernels */
    int turn;
};

struct kfw_expert *kfw_expert_new(const char *backend) {
    struct kfw_expert *x = calloc(1, sizeof(*x));
    if (x) {
        snprintf(x->backend, sizeof(x->backend), "%s", backend);
        x->best = -1;
    }
    return x;
}

void kfw_expert_free(struct kfw_expert *x) {
    if (x) {
        free(x->body);
        free(x);
    }
}

/* Appends a tool call {id, type, function {name, arguments (a JSON string)}}; args borrowed. */
static void call(struct kfw_expert *x, json_t *calls, const char *name, json_t *args) {
    char id[32];
    snprintf(id, sizeof(id), "call_%d_%zu", x->turn, json_array_size(calls));
    char *text = json_dumps(args ? args : json_object(), JSON_COMPACT);
    json_array_append_new(calls,
                          json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                    "function", "name", name, "arguments", text ? text : "{}"));
    free(text);
}

static void write_file(struct kfw_expert *x, json_t *calls, const char *path, const char *content) {
    json_t *a = json_pack("{s:s, s:s}", "path", path, "content", content);
    call(x, calls, "write_file", a);
    json_decref(a);
}

static json_t *message(const char *content, json_t *calls) {
    json_t *m = json_pack("{s:s, s:s?}", "role", "assistant", "content", content);
    if (json_array_size(calls))
        json_object_set(m, "tool_calls", calls);
    json_decref(calls);
    return m;
}

static const char *kernel_path(const struct kfw_expert *x) {
    return strcmp(x->backend, "cuda") == 0 ? "kernels/kf_expert_ew.cu" : "kernels/kf_expert_ew.cpp";
}

/* write variant v, compile, verify, profile; false when v is past the last variant */
static bool try_variant(struct kfw_expert *x, json_t *calls, int v) {
    char *src = x->bcast ? kfw_bcast_kernel(x->backend, x->body, x->n_inputs, v)
                         : kfw_ew_kernel(x->backend, x->body, x->n_inputs, v);
    if (src == NULL)
        return false;
    write_file(x, calls, kernel_path(x), src);
    free(src);
    call(x, calls, "compile", NULL);
    call(x, calls, "verify", NULL);
    call(x, calls, "profile", NULL);
    x->variant = v;
    return true;
}

/* The verdict of the last profile: note the variant's speed when it was correct. */
static void score(struct kfw_expert *x, const json_t *v) {
    const json_t *se = json_object_get(v, "speedup_vs_eager");
    if (json_is_true(json_object_get(v, "correct")) && json_is_number(se) &&
        json_number_value(se) > x->best_speed) {
        x->best = x->variant;
        x->best_speed = json_number_value(se);
    }
}

json_t *kfw_expert_next(struct kfw_expert *x, const json_t *last, char *why, size_t whylen,
                        char *detail, size_t detaillen) {
    why[0] = detail[0] = '\0';
    x->turn++;
    json_t *calls = json_array();
    char text[256];
    switch (x->stage) {
    case PROFILE_REF:
        call(x, calls, "profile", NULL);
        x->stage = FIRST;
        return message("Profiling the reference first: its times and its operator graph.", calls);
    case FIRST:
        if (kfw_ew_plan(json_object_get(last, "graph"), &x->body, &x->n_inputs, &x->bcast, detail,
                        detaillen) != 0) {
            snprintf(why, whylen, "unsupported");
            json_decref(calls);
            return NULL;
        }
        char *model = x->bcast ? kfw_bcast_model(x->n_inputs) : kfw_ew_model(x->n_inputs);
        write_file(x, calls, "model_new.py", model ? model : "");
        free(model);
        try_variant(x, calls, 0);
        x->stage = NEXT;
        return message("The graph is one chain of elementwise operations: one fused pass over "
                       "memory. Variant 0, then compile, verify and profile.",
                       calls);
    case NEXT:
        score(x, last);
        if (try_variant(x, calls, x->variant + 1)) {
            snprintf(text, sizeof(text),
                     "Best so far: variant %d (%.3fx over eager). Trying variant %d.", x->best,
                     x->best_speed, x->variant);
            return message(text, calls);
        }
        x->stage = DONE;
        if (x->best < 0) {
            json_decref(calls);
            return message("No variant was correct; stopping.", json_array());
        }
        char *src = x->bcast ? kfw_bcast_kernel(x->backend, x->body, x->n_inputs, x->best)
                             : kfw_ew_kernel(x->backend, x->body, x->n_inputs, x->best);
        write_file(x, calls, kernel_path(x), src ? src : "");
        free(src);
        call(x, calls, "submit", NULL);
        snprintf(text, sizeof(text), "Submitting variant %d, the fastest correct one (%.3fx).",
                 x->best, x->best_speed);
        return message(text, calls);
    case DONE:
        break;
    }
    json_decref(calls);
    return NULL;
}
