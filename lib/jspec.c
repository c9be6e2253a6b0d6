/* jspec.c: checks a JSON object against a table of field specs and names the bad field. */
#include "jspec.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static void set_err(struct kf_jerr *err, enum kf_err code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_err(struct kf_jerr *err, enum kf_err code, const char *field, const char *fmt,
                    ...) {
    if (err == NULL)
        return;
    err->code = code;
    snprintf(err->field, sizeof(err->field), "%s", field);
    char text[sizeof(err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (field[0] != '\0')
        snprintf(err->message, sizeof(err->message), "%.100s: %.150s", field, text);
    else
        snprintf(err->message, sizeof(err->message), "%s", text);
}

static void field_path(char *out, size_t n, const char *prefix, const char *name) {
    if (prefix != NULL && prefix[0] != '\0')
        snprintf(out, n, "%s.%s", prefix, name);
    else
        snprintf(out, n, "%s", name);
}

static bool bounded(const struct kf_jfield *f) {
    return !(f->min == 0 && f->max == 0);
}

static int check_string(json_t *v, const struct kf_jfield *f, const char *path,
                        struct kf_jerr *err) {
    if (!json_is_string(v)) {
        set_err(err, KF_E_INVALID_FIELD, path, "must be a string");
        return -1;
    }
    if (f->max_len > 0 && json_string_length(v) > f->max_len) {
        set_err(err, KF_E_INVALID_FIELD, path, "must be a string of at most %zu bytes", f->max_len);
        return -1;
    }
    *(const char **)f->out = json_string_value(v);
    return 0;
}

static int check_int(json_t *v, const struct kf_jfield *f, const char *path, struct kf_jerr *err) {
    json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
    if (!json_is_integer(v) || (bounded(f) && ((double)i < f->min || (double)i > f->max))) {
        if (bounded(f))
            set_err(err, KF_E_INVALID_FIELD, path, "must be an integer in [%.15g, %.15g]", f->min,
                    f->max);
        else
            set_err(err, KF_E_INVALID_FIELD, path, "must be an integer");
        return -1;
    }
    *(int64_t *)f->out = (int64_t)i;
    return 0;
}

static int check_number(json_t *v, const struct kf_jfield *f, const char *path,
                        struct kf_jerr *err) {
    double d = json_is_number(v) ? json_number_value(v) : 0;
    if (!json_is_number(v) || (bounded(f) && (d < f->min || d > f->max))) {
        if (bounded(f))
            set_err(err, KF_E_INVALID_FIELD, path, "must be a number in [%.15g, %.15g]", f->min,
                    f->max);
        else
            set_err(err, KF_E_INVALID_FIELD, path, "must be a number");
        return -1;
    }
    *(double *)f->out = d;
    return 0;
}

static int check_array(json_t *v, const struct kf_jfield *f, const char *path,
                       struct kf_jerr *err) {
    if (!json_is_array(v)) {
        set_err(err, KF_E_INVALID_FIELD, path, "must be an array");
        return -1;
    }
    if (f->max_len > 0 && json_array_size(v) > f->max_len) {
        set_err(err, KF_E_INVALID_FIELD, path, "must be an array of at most %zu items", f->max_len);
        return -1;
    }
    *(json_t **)f->out = v;
    return 0;
}

/* A UUID in either case; an upper-case one is rewritten in place to lower case. */
static int check_uuid(json_t *v, const struct kf_jfield *f, const char *path, struct kf_jerr *err) {
    if (!json_is_string(v) || !kf_uuid_valid(json_string_value(v))) {
        set_err(err, KF_E_INVALID_FIELD, path, "must be a UUID string (8-4-4-4-12 hex digits)");
        return -1;
    }
    char lower[KF_UUID_LEN + 1];
    const char *s = json_string_value(v);
    for (size_t i = 0; i <= KF_UUID_LEN; i++)
        lower[i] = (char)tolower((unsigned char)s[i]);
    if (strcmp(lower, s) != 0 && json_string_set(v, lower) != 0) {
        set_err(err, KF_E_INTERNAL, path, "out of memory");
        return -1;
    }
    *(const char **)f->out = json_string_value(v);
    return 0;
}

static void list_choices(const char *const *choices, char *out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; choices != NULL && choices[i] != NULL && len < n; i++) {
        int w = snprintf(out + len, n - len, "%s%s", i > 0 ? ", " : "", choices[i]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

static int check_enum(json_t *v, const struct kf_jfield *f, const char *path, struct kf_jerr *err) {
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    for (size_t i = 0; s != NULL && f->choices != NULL && f->choices[i] != NULL; i++) {
        if (strcmp(s, f->choices[i]) == 0) {
            *(const char **)f->out = f->choices[i];
            return 0;
        }
    }
    char list[160];
    list_choices(f->choices, list, sizeof(list));
    set_err(err, KF_E_INVALID_FIELD, path, "must be one of %s", list);
    return -1;
}

static int check_value(json_t *v, const struct kf_jfield *f, const char *path,
                       struct kf_jerr *err) {
    switch (f->type) {
    case KF_J_STRING:
        return check_string(v, f, path, err);
    case KF_J_INT:
        return check_int(v, f, path, err);
    case KF_J_NUMBER:
        return check_number(v, f, path, err);
    case KF_J_BOOL:
        if (!json_is_boolean(v)) {
            set_err(err, KF_E_INVALID_FIELD, path, "must be true or false");
            return -1;
        }
        *(bool *)f->out = json_is_true(v);
        return 0;
    case KF_J_OBJECT:
        if (!json_is_object(v)) {
            set_err(err, KF_E_INVALID_FIELD, path, "must be an object");
            return -1;
        }
        *(json_t **)f->out = v;
        return 0;
    case KF_J_ARRAY:
        return check_array(v, f, path, err);
    case KF_J_UUID:
        return check_uuid(v, f, path, err);
    case KF_J_ENUM:
        return check_enum(v, f, path, err);
    }
    set_err(err, KF_E_INTERNAL, path, "unknown field type in the spec");
    return -1;
}

static int check_unknown(json_t *obj, const struct kf_jfield *fields, size_t n, const char *prefix,
                         struct kf_jerr *err) {
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value) {
        (void)value;
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(fields[i].name, key) == 0;
        if (!known) {
            char path[128];
            field_path(path, sizeof(path), prefix, key);
            set_err(err, KF_E_UNKNOWN_FIELD, path, "unknown field");
            return -1;
        }
    }
    return 0;
}

int kf_jspec_parse(json_t *obj, const struct kf_jfield *fields, size_t n, const char *prefix,
                   bool allow_unknown, struct kf_jerr *err) {
    if (!json_is_object(obj)) {
        if (prefix != NULL && prefix[0] != '\0')
            set_err(err, KF_E_INVALID_FIELD, prefix, "must be an object");
        else
            set_err(err, KF_E_INVALID_JSON, "", "the body must be a JSON object");
        return -1;
    }
    if (!allow_unknown && check_unknown(obj, fields, n, prefix, err) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct kf_jfield *f = &fields[i];
        char path[128];
        field_path(path, sizeof(path), prefix, f->name);
        json_t *v = json_object_get(obj, f->name);
        if (v == NULL || json_is_null(v)) {
            if (f->required) {
                set_err(err, KF_E_MISSING_FIELD, path, "is required");
                return -1;
            }
            continue;
        }
        if (check_value(v, f, path, err) != 0)
            return -1;
        if (f->present != NULL)
            *f->present = true;
    }
    return 0;
}

json_t *kf_jspec_load_body(const char *body, size_t len, struct kf_jerr *err) {
    if (body == NULL || len == 0) {
        set_err(err, KF_E_INVALID_JSON, "", "the body is empty; expected a JSON object");
        return NULL;
    }
    if (memchr(body, '\0', len) != NULL) {
        set_err(err, KF_E_INVALID_JSON, "", "the body contains a NUL byte");
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (root == NULL) {
        set_err(err, KF_E_INVALID_JSON, "", "invalid JSON at line %d column %d: %s", jerr.line,
                jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        set_err(err, KF_E_INVALID_JSON, "", "the body must be a JSON object");
        return NULL;
    }
    return root;
}
