/* expert.c: the expert policy's turns (see expert.h). The plan, in turns:
 *   1. profile (no model_new.py yet: the reference's times and its operator graph);
 *   2. plan the kernels (expert_plan.h); write model_new.py and every kernel in its variant 0;
 *      compile, verify, profile;
 *   3. tune, one kernel at a time: for each further variant of the kernel, write it (the other
 *      kernels in their best variants so far), compile, verify, profile, and keep it when it was
 *      correct and faster (coordinate descent), within a budget of tries;
 *   4. write back the best variant of every kernel and submit.
 * A try's speed is the profile's speedup over eager in the verdict that follows it. */
#include "expert.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expert_plan.h"

#define MAX_TRIES 14 /* tries after the first: the tuning budget */

enum stage { PROFILE_REF, FIRST, TUNE, DONE };

struct kfw_expert {
    char backend[8];
    enum stage stage;
    struct kfx_plan plan;
    bool planned;
    int choice[KFX_MAX_STEPS];  /* the best variant of each kernel so far */
    int written[KFX_MAX_STEPS]; /* the variant in the workspace now */
    int step, variant;          /* the try whose verdict comes next */
    int tries;
    bool any_correct;
    double best_speed;
    int turn;
};

struct kfw_expert *kfw_expert_new(const char *backend) {
    struct kfw_expert *x = calloc(1, sizeof(*x));
    if (x)
        snprintf(x->backend, sizeof(x->backend), "%s", backend);
    return x;
}

void kfw_expert_free(struct kfw_expert *x) {
    if (x) {
        if (x->planned)
            kfx_plan_free(&x->plan);
        free(x);
    }
}

/* Appends a tool call {id, type, function {name, arguments (a JSON string)}}; args borrowed. */
static void call(struct kfw_expert *x, json_t *calls, const char *name, json_t *args) {
    char id[32];
    snprintf(id, sizeof(id), "call_%d_%zu", x->turn, json_array_size(calls));
    json_t *none = args ? NULL : json_object(); /* owned: no arguments, "{}" */
    char *text = json_dumps(args ? args : none, JSON_COMPACT);
    json_decref(none);
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

/* Writes step s's kernel in variant v. */
static void write_step(struct kfw_expert *x, json_t *calls, int s, int v) {
    char path[64];
    kfx_step_path(&x->plan, s, path, sizeof(path));
    char *src = kfx_step_src(&x->plan, s, v);
    write_file(x, calls, path, src ? src : "");
    free(src);
    x->written[s] = v;
}

/* Every kernel not in its chosen variant is written back. */
static void write_choices(struct kfw_expert *x, json_t *calls) {
    for (int s = 0; s < x->plan.n_steps; s++)
        if (x->written[s] != x->choice[s])
            write_step(x, calls, s, x->choice[s]);
}

static void judge(struct kfw_expert *x, json_t *calls) {
    call(x, calls, "compile", NULL);
    call(x, calls, "verify", NULL);
    call(x, calls, "profile", NULL);
}

/* The verdict of the last try: keep its variant when it was correct and faster. */
static void score(struct kfw_expert *x, const json_t *v) {
    const json_t *se = json_object_get(v, "speedup_vs_eager");
    if (json_is_true(json_object_get(v, "correct")) && json_is_number(se) &&
        (!x->any_correct || json_number_value(se) > x->best_speed)) {
        x->any_correct = true;
        x->best_speed = json_number_value(se);
        x->choice[x->step] = x->variant;
    }
}

/* The next try (step, variant) after the current one; false when tuning is over. */
static bool next_try(struct kfw_expert *x) {
    if (x->tries >= MAX_TRIES)
        return false;
    int s = x->step, v = x->variant + 1;
    while (s < x->plan.n_steps && v >= x->plan.step[s].n_variants) {
        s++;
        v = 1;
    }
    if (s >= x->plan.n_steps)
        return false;
    x->step = s;
    x->variant = v;
    x->tries++;
    return true;
}

static const char *kind_name(enum kfx_skind k) {
    static const char *const names[] = {
        "fused elementwise", "reduction",     "softmax",       "norm statistics",    "matmul",
        "convolution",       "pooling",       "scan",          "sibling reductions", "conversion",
        "cross entropy",     "concatenation", "triangle mask", "embedding",          "gather",
        "recurrent layer"};
    _Static_assert(sizeof(names) / sizeof(names[0]) == KFX_NKINDS, "a name per step kind");
    return names[k];
}

/* "3 kernels: kf_op0 convolution, kf_op1 norm statistics, kf_op2 fused elementwise" */
static void describe(const struct kfx_plan *p, char *out, size_t n) {
    snprintf(out, n, "%d kernel%s:", p->n_steps, p->n_steps == 1 ? "" : "s");
    for (int s = 0; s < p->n_steps; s++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s %s %s (%d variant%s)", s ? "," : "", p->step[s].fn,
                 kind_name(p->step[s].kind), p->step[s].n_variants,
                 p->step[s].n_variants == 1 ? "" : "s");
    }
}

static json_t *first(struct kfw_expert *x, const json_t *last, json_t *calls, char *why,
                     size_t whylen, char *detail, size_t detaillen) {
    x->planned = true;
    if (kfx_plan_build(&x->plan, json_object_get(last, "graph"), x->backend, detail, detaillen) !=
        0) {
        snprintf(why, whylen, "unsupported");
        json_decref(calls);
        return NULL;
    }
    char *model = kfx_plan_model(&x->plan);
    write_file(x, calls, "model_new.py", model ? model : "");
    free(model);
    for (int s = 0; s < x->plan.n_steps; s++)
        write_step(x, calls, s, 0);
    judge(x, calls);
    x->step = x->variant = 0;
    x->stage = TUNE;
    char text[1024], plan[768];
    describe(&x->plan, plan, sizeof(plan));
    snprintf(text, sizeof(text),
             "The plan from the operator graph: %s. Writing model_new.py and every kernel in its "
             "first variant, then compile, verify and profile.",
             plan);
    return message(text, calls);
}

json_t *kfw_expert_next(struct kfw_expert *x, const json_t *last, char *why, size_t whylen,
                        char *detail, size_t detaillen) {
    why[0] = detail[0] = '\0';
    x->turn++;
    json_t *calls = json_array();
    char text[512];
    switch (x->stage) {
    case PROFILE_REF:
        call(x, calls, "profile", NULL);
        x->stage = FIRST;
        return message("Profiling the reference first: its times and its operator graph.", calls);
    case FIRST:
        return first(x, last, calls, why, whylen, detail, detaillen);
    case TUNE:
        score(x, last);
        if (next_try(x)) {
            write_choices(x, calls);
            write_step(x, calls, x->step, x->variant);
            judge(x, calls);
            if (x->any_correct)
                snprintf(text, sizeof(text),
                         "Best so far: %.3fx over eager. Trying variant %d of %s (%s).",
                         x->best_speed, x->variant, x->plan.step[x->step].fn,
                         kind_name(x->plan.step[x->step].kind));
            else
                snprintf(text, sizeof(text), "Nothing correct yet. Trying variant %d of %s (%s).",
                         x->variant, x->plan.step[x->step].fn,
                         kind_name(x->plan.step[x->step].kind));
            return message(text, calls);
        }
        x->stage = DONE;
        if (!x->any_correct) {
            json_decref(calls);
            return message("No variant was correct; stopping.", json_array());
        }
        write_choices(x, calls);
        call(x, calls, "submit", NULL);
        snprintf(text, sizeof(text),
                 "Submitting the best variant of each kernel, the fastest correct (%.3fx over "
                 "eager).",
                 x->best_speed);
        return message(text, calls);
    case DONE:
        break;
    }
    json_decref(calls);
    return NULL;
}
