/* episode_feedback.c: a judge verdict as text for the policy: status and message, the build's
 * diagnostics, each correctness trial, the flags, the times and speedups, the reward. The text
 * is the whole of what the policy learns from compile, verify, profile and submit. */
#include "episode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define DIAG_MAX 6000

static void ms_line(struct kf_buf *b, const char *label, const json_t *t) {
    json_t *med = json_object_get(t, "median_ms");
    if (!json_is_number(med))
        return;
    kf_buf_printf(b, "  %-10s %.4f ms (spread %.1f%%, %lld timed calls)\n", label,
                  json_number_value(med),
                  json_is_number(json_object_get(t, "spread"))
                      ? 100.0 * json_number_value(json_object_get(t, "spread"))
                      : 0.0,
                  (long long)json_integer_value(json_object_get(t, "trials")));
}

static void checks_text(struct kf_buf *b, const json_t *checks) {
    size_t i;
    json_t *c;
    if (json_array_size(checks) == 0)
        return;
    kf_buf_printf(b, "correctness trials:\n");
    json_array_foreach(checks, i, c) {
        const char *kind = json_string_value(json_object_get(c, "kind"));
        json_t *pass = json_object_get(c, "pass");
        const char *verdict = json_is_true(pass) ? "pass" : json_is_false(pass) ? "FAIL" : "skip";
        kf_buf_printf(b, "  %-14s %s", kind ? kind : "?", verdict);
        json_t *a = json_object_get(c, "max_abs_err"), *r = json_object_get(c, "max_rel_err");
        if (json_is_number(a))
            kf_buf_printf(b, "  max abs err %.3g", json_number_value(a));
        if (json_is_number(r))
            kf_buf_printf(b, "  max rel err %.3g", json_number_value(r));
        const char *why = json_string_value(json_object_get(c, "reason"));
        const char *err = json_string_value(json_object_get(c, "error"));
        const char *skip = json_string_value(json_object_get(c, "skipped"));
        if (why || skip)
            kf_buf_printf(b, "  (%s)", why ? why : skip);
        kf_buf_printf(b, "\n");
        if (err)
            kf_buf_printf(b, "    error: %.3000s\n", err);
    }
}

static void list_text(struct kf_buf *b, const char *label, const json_t *arr) {
    size_t i;
    json_t *x;
    if (json_array_size(arr) == 0)
        return;
    kf_buf_printf(b, "%s:", label);
    json_array_foreach(arr, i, x) {
        if (json_is_string(x))
            kf_buf_printf(b, "%s %.500s", i ? "," : "", json_string_value(x));
    }
    kf_buf_printf(b, "\n");
}

/* profile before model_new.py exists: {"baseline": {...}, "graph": {...}} */
static void reference_text(struct kf_buf *b, const json_t *v) {
    const json_t *base = json_object_get(v, "baseline");
    kf_buf_printf(b, "no model_new.py yet: the reference alone\n");
    if (json_is_string(json_object_get(base, "error")))
        kf_buf_printf(b, "baseline error: %s\n", json_string_value(json_object_get(base, "error")));
    ms_line(b, "eager", json_object_get(base, "eager"));
    ms_line(b, "compile", json_object_get(base, "compile"));
    const char *ce = json_string_value(json_object_get(base, "compile_error"));
    if (ce)
        kf_buf_printf(b, "  torch.compile: %.300s\n", ce);
    char *graph = json_dumps(json_object_get(v, "graph"), JSON_INDENT(1) | JSON_COMPACT);
    if (graph) {
        kf_buf_printf(b, "operator graph:\n%s\n", graph);
        free(graph);
    }
}

char *kfw_verdict_text(const json_t *v, const char *tool, size_t max) {
    struct kf_buf b = {0};
    if (json_object_get(v, "graph") && json_object_get(v, "baseline")) {
        reference_text(&b, v);
    } else {
        const char *st = json_string_value(json_object_get(v, "status"));
        const char *msg = json_string_value(json_object_get(v, "message"));
        kf_buf_printf(&b, "%s: status %s%s%s\n", tool, st ? st : "?", msg && msg[0] ? ": " : "",
                      msg ? msg : "");
        json_t *build = json_object_get(v, "build");
        const char *diag = json_string_value(json_object_get(build, "diagnostics"));
        if (json_is_number(json_object_get(build, "seconds")))
            kf_buf_printf(&b, "build: %.2f s%s\n",
                          json_number_value(json_object_get(build, "seconds")),
                          json_is_true(json_object_get(build, "cached")) ? " (cached)" : "");
        if (diag && diag[0])
            kf_buf_printf(&b, "diagnostics:\n%.*s\n", DIAG_MAX, diag);
        checks_text(&b, json_object_get(v, "checks"));
        list_text(&b, "flags", json_object_get(v, "flags"));
        list_text(&b, "flag details", json_object_get(v, "flag_details"));
        json_t *t = json_object_get(v, "timing");
        if (json_is_object(t)) {
            kf_buf_printf(&b, "times (median):\n");
            ms_line(&b, "yours", json_object_get(t, "candidate"));
            ms_line(&b, "eager", json_object_get(t, "eager"));
            ms_line(&b, "compile", json_object_get(t, "compile"));
        }
        json_t *se = json_object_get(v, "speedup_vs_eager");
        json_t *sc = json_object_get(v, "speedup_vs_compile");
        if (json_is_number(se))
            kf_buf_printf(&b, "speedup vs eager %.3fx", json_number_value(se));
        if (json_is_number(sc))
            kf_buf_printf(&b, ", vs torch.compile %.3fx", json_number_value(sc));
        if (json_is_number(se))
            kf_buf_printf(&b, "\n");
        json_t *rw = json_object_get(v, "reward");
        if (json_is_integer(rw))
            kf_buf_printf(&b, "reward %lld\n", (long long)json_integer_value(rw));
    }
    if (b.data == NULL)
        return strdup("(no feedback: out of memory)");
    if (b.len > max && max > 64) {
        const char note[] = "\n[... feedback cut ...]\n";
        size_t keep = max - sizeof(note);
        while (keep > 0 && ((unsigned char)b.data[keep] & 0xC0) == 0x80)
            keep--; /* not inside a UTF-8 sequence */
        memcpy(b.data + keep, note, sizeof(note));
        b.len = keep + sizeof(note) - 1;
    }
    return b.data; /* ownership passes to the caller */
}
