/* tools.c: the six non-judge tools' table (name, description, fields), their OpenAI-format
 * definitions, argument checking, dispatch, and the shaping of every result: valid UTF-8,
 * cut to max_output around its middle. */
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FIELDS 3

struct field {
    const char *name;
    bool required;
    const char *desc;
};

struct tool_spec {
    const char *name;
    const char *desc;
    int (*run)(struct kf_tool_call *c);
    struct field fields[MAX_FIELDS]; /* up to the first NULL name */
};

static const struct tool_spec TOOLS[] = {
    {"bash",
     "Runs a bash command in the workspace inside a jail: no GPU, no network, only the workspace "
     "is writable; stdin is empty. Returns the exit status, then stdout and stderr in sections. "
     "Use it for g++ -fsyntax-only, small experiments, ls.",
     kf_tool_bash,
     {{"command", true, "the command line, run as /bin/bash -c COMMAND in the workspace"}}},
    {"read_file",
     "Returns the text of a file of the workspace.",
     kf_tool_read_file,
     {{"path", true, "path relative to the workspace, e.g. model.py"}}},
    {"write_file",
     "Creates or replaces a file of the workspace with the given content, creating its folders. "
     "model.py is read-only.",
     kf_tool_write_file,
     {{"path", true, "path relative to the workspace, e.g. kernels/add.cu"},
      {"content", true, "the whole new content of the file"}}},
    {"edit_file",
     "Replaces the exact string old by new in a file of the workspace; old must occur exactly "
     "once, otherwise an error says how many times it matched.",
     kf_tool_edit_file,
     {{"path", true, "path relative to the workspace"},
      {"old", true, "the exact text to replace (whitespace included), occurring once"},
      {"new", true, "the replacement text"}}},
    {"glob",
     "Lists the workspace paths matching a pattern, sorted: * and ? within a name, [...] sets, "
     "** any number of folders (e.g. kernels/*.cu, **/*). Folders end with /.",
     kf_tool_glob,
     {{"pattern", true, "glob pattern relative to the workspace"}}},
    {"grep",
     "Searches files for lines matching a POSIX extended regular expression; prints "
     "path:line:text, sorted by path and line. Binary files are skipped.",
     kf_tool_grep,
     {{"pattern", true, "POSIX extended regular expression"},
      {"path", false, "file or folder to search, relative to the workspace (default: all)"}}},
};

#define N_TOOLS (sizeof(TOOLS) / sizeof(TOOLS[0]))

static const struct tool_spec *find_tool(const char *name) {
    for (size_t i = 0; name != NULL && i < N_TOOLS; i++)
        if (strcmp(TOOLS[i].name, name) == 0)
            return &TOOLS[i];
    return NULL;
}

int kf_tool_known(const char *name) {
    return find_tool(name) != NULL;
}

json_t *kf_tool_definitions(void) {
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < N_TOOLS; i++) {
        const struct tool_spec *t = &TOOLS[i];
        json_t *props = json_object(), *req = json_array();
        for (size_t f = 0; props != NULL && req != NULL && f < MAX_FIELDS; f++) {
            if (t->fields[f].name == NULL)
                break;
            json_object_set_new(
                props, t->fields[f].name,
                json_pack("{s:s,s:s}", "type", "string", "description", t->fields[f].desc));
            if (t->fields[f].required)
                json_array_append_new(req, json_string(t->fields[f].name));
        }
        json_t *def =
            json_pack("{s:s,s:{s:s,s:s,s:{s:s,s:o,s:o,s:b}}}", "type", "function", "function",
                      "name", t->name, "description", t->desc, "parameters", "type", "object",
                      "properties", props, "required", req, "additionalProperties", 0);
        if (def == NULL || json_array_append_new(arr, def) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

void kf_tool_put(struct kf_tool_call *c, const void *p, size_t n) {
    if (!c->oom && !kf_buf_append(&c->text, p, n))
        c->oom = 1;
}

static void say_v(struct kf_tool_call *c, const char *fmt, va_list ap) {
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof(small)) {
        kf_tool_put(c, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (big == NULL) {
            c->oom = 1;
        } else {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            kf_tool_put(c, big, (size_t)n);
            free(big);
        }
    }
    va_end(ap2);
}

void kf_tool_say(struct kf_tool_call *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(c, fmt, ap);
    va_end(ap);
}

void kf_tool_fail(struct kf_tool_call *c, const char *fmt, ...) {
    c->is_error = 1;
    va_list ap;
    va_start(ap, fmt);
    say_v(c, fmt, ap);
    va_end(ap);
}

const char *kf_tool_arg(const struct kf_tool_call *c, const char *name, size_t *len) {
    const json_t *v = c->args != NULL ? json_object_get(c->args, name) : NULL;
    if (!json_is_string(v))
        return NULL;
    if (len != NULL)
        *len = json_string_length(v);
    return json_string_value(v);
}

/* Appends `{"path": string, "content": string}` (optional fields with a ?) to c->text. */
static void say_signature(struct kf_tool_call *c, const struct tool_spec *t) {
    kf_tool_say(c, "%s takes {", t->name);
    for (size_t f = 0; f < MAX_FIELDS && t->fields[f].name != NULL; f++)
        kf_tool_say(c, "%s\"%s\"%s: string", f > 0 ? ", " : "", t->fields[f].name,
                    t->fields[f].required ? "" : "?");
    kf_tool_say(c, "}");
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

/* Checks c->args against t: an object with exactly t's fields, all strings. Returns true when
 * they fit; otherwise says why (naming the expected arguments) and returns false. */
static bool check_args(struct kf_tool_call *c, const struct tool_spec *t) {
    if (!json_is_object(c->args)) {
        kf_tool_say(c, "%s: the arguments are %s; ", t->name,
                    c->args == NULL ? "not valid JSON" : json_kind(c->args));
        say_signature(c, t);
        return false;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)c->args, key, val) {
        size_t f = 0;
        while (f < MAX_FIELDS && t->fields[f].name != NULL && strcmp(t->fields[f].name, key) != 0)
            f++;
        if (f == MAX_FIELDS || t->fields[f].name == NULL) {
            kf_tool_say(c, "%s: unexpected argument \"%s\"; ", t->name, key);
            say_signature(c, t);
            return false;
        }
        if (!json_is_string(val)) {
            kf_tool_say(c, "%s: argument \"%s\" must be a string, not %s; ", t->name, key,
                        json_kind(val));
            say_signature(c, t);
            return false;
        }
    }
    for (size_t f = 0; f < MAX_FIELDS && t->fields[f].name != NULL; f++) {
        if (t->fields[f].required && json_object_get(c->args, t->fields[f].name) == NULL) {
            kf_tool_say(c, "%s: missing argument \"%s\"; ", t->name, t->fields[f].name);
            say_signature(c, t);
            return false;
        }
    }
    return true;
}

/* Length of the valid UTF-8 sequence at s[0..n) other than a NUL, or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char b = s[0];
    if (b == 0)
        return 0;
    if (b < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Copies s[0..n) into out, every invalid byte and NUL replaced by U+FFFD. */
static bool make_utf8(const char *s, size_t n, struct kf_buf *out) {
    static const char REPL[] = "\xEF\xBF\xBD";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* valid bytes from run to i not yet copied */
    while (i < n) {
        size_t k = utf8_seq(u + i, n - i);
        if (k > 0) {
            i += k;
            continue;
        }
        if (!kf_buf_append(out, s + run, i - run) || !kf_buf_append(out, REPL, 3))
            return false;
        run = ++i;
    }
    return kf_buf_append(out, s + run, n - run);
}

static size_t digits(size_t v) {
    size_t d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Cuts t (valid UTF-8, len bytes) to at most max bytes where possible: its head and tail
 * around "\n[... N bytes cut ...]\n", at character boundaries, at line ends when one is near.
 * Returns a new string (the caller frees it) or NULL when memory ran out. */
static char *cut_middle(const char *t, size_t len, size_t max) {
    static const char NOTE[] = "\n[... %zu bytes cut ...]\n";
    size_t reserve = sizeof(NOTE) - 4 + digits(len); /* "%zu" replaced, NUL not counted */
    size_t keep = max > reserve ? max - reserve : 0;
    size_t head = keep / 2, tail = len - (keep - keep / 2);
    while (head > 0 && ((unsigned char)t[head] & 0xC0) == 0x80)
        head--;
    while (tail < len && ((unsigned char)t[tail] & 0xC0) == 0x80)
        tail++;
    for (size_t i = head; i > 0 && head - i < 256; i--)
        if (t[i - 1] == '\n') {
            head = i;
            break;
        }
    for (size_t i = tail; i < len && i - tail < 256; i++)
        if (t[i] == '\n') {
            tail = i + 1;
            break;
        }
    size_t cut = tail - head;
    char note[64];
    int nl = snprintf(note, sizeof(note), NOTE, cut);
    const char *np = note;
    if (head > 0 && t[head - 1] == '\n') { /* the head ends a line already */
        np++;
        nl--;
    }
    size_t total = head + (size_t)nl + (len - tail);
    char *r = malloc(total + 1);
    if (r == NULL)
        return NULL;
    memcpy(r, t, head);
    memcpy(r + head, np, (size_t)nl);
    memcpy(r + head + (size_t)nl, t + tail, len - tail);
    r[total] = '\0';
    return r;
}

/* Turns the call's text into out->text: valid UTF-8, cut to max. Returns 0 or -1 (memory). */
static int shape_text(struct kf_tool_call *c, size_t max, struct kf_tool_result *out) {
    struct kf_buf clean = {0};
    if (!make_utf8(c->text.data != NULL ? c->text.data : "", c->text.len, &clean) ||
        !kf_buf_append(&clean, "", 0)) {
        kf_buf_free(&clean);
        return -1;
    }
    out->full_bytes = clean.len;
    if (clean.len <= max) {
        out->text = clean.data; /* handed over */
        return 0;
    }
    out->text = cut_middle(clean.data, clean.len, max);
    out->truncated = 1;
    kf_buf_free(&clean);
    return out->text != NULL ? 0 : -1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Checks the names of the tools, opens the workspace and runs the tool. */
static int dispatch(struct kf_tool_call *c, const char *name, int *malformed) {
    const struct tool_spec *t = find_tool(name);
    if (t == NULL) {
        *malformed = 1;
        kf_tool_say(c, "unknown tool \"%s\"; the file and shell tools are", name ? name : "(none)");
        for (size_t i = 0; i < N_TOOLS; i++)
            kf_tool_say(c, "%s %s", i > 0 ? "," : "", TOOLS[i].name);
        return 0;
    }
    if (!check_args(c, t)) {
        *malformed = 1;
        return 0;
    }
    const struct kf_tool_ctx *ctx = c->ctx;
    if (ctx == NULL || ctx->workspace == NULL || ctx->workspace[0] != '/') {
        kf_tool_fail(c, "internal error: the workspace is not an absolute path");
        return -1;
    }
    c->wsfd = open(ctx->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (c->wsfd < 0) {
        kf_tool_fail(c, "internal error: workspace %s: %s", ctx->workspace, strerror(errno));
        return -1;
    }
    int rc = t->run(c);
    close(c->wsfd);
    c->wsfd = -1;
    return rc;
}

int kf_tool_run(const struct kf_tool_ctx *ctx, const char *name, const json_t *args,
                struct kf_tool_result *out) {
    double t0 = now_s();
    memset(out, 0, sizeof(*out));
    struct kf_tool_call c = {.ctx = ctx, .wsfd = -1, .args = args};
    int rc = dispatch(&c, name, &out->malformed);
    if (c.oom) {
        kf_buf_free(&c.text);
        c.oom = 0;
        kf_tool_fail(&c, "internal error: out of memory");
        rc = -1;
    }
    out->is_error = c.is_error || rc != 0;
    size_t max = ctx != NULL && ctx->max_output > 0 ? ctx->max_output : KF_TOOL_DEFAULT_MAX_OUTPUT;
    if (shape_text(&c, max, out) != 0) {
        out->text = strdup("internal error: out of memory");
        out->full_bytes = out->text != NULL ? strlen(out->text) : 0;
        out->truncated = 0;
        out->is_error = 1;
        rc = -1;
    }
    kf_buf_free(&c.text);
    out->seconds = now_s() - t0;
    return rc;
}

void kf_tool_result_free(struct kf_tool_result *r) {
    free(r->text);
    r->text = NULL;
}
