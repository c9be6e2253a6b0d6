/* jspec.h: declarative JSON request specs on jansson. A handler lists the fields it takes;
 * one call checks the body against them and fills the outputs, or says which field is bad, so
 * that the server answers 400 naming it. Outputs borrow from the json_t: they live as long as
 * the parsed body does (the caller's json_decref frees everything). */
#ifndef KF_JSPEC_H
#define KF_JSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kf_errors.h"

enum kf_jtype {
    KF_J_STRING, /* out: const char **; max_len bounds strlen (0: none); UTF-8 is jansson's */
    KF_J_INT,    /* out: int64_t *; [min, max] */
    KF_J_NUMBER, /* out: double *; [min, max] (integers accepted) */
    KF_J_BOOL,   /* out: bool * */
    KF_J_OBJECT, /* out: json_t ** (borrowed) */
    KF_J_ARRAY,  /* out: json_t ** (borrowed); max_len bounds the length (0: none) */
    KF_J_UUID,   /* out: const char **; a canonical lower-case UUID string */
    KF_J_ENUM,   /* out: const char **; one of the NULL-terminated `choices` */
};

struct kf_jfield {
    const char *name;
    enum kf_jtype type;
    bool required;
    void *out;       /* left untouched when the field is absent (set the default before) */
    bool *present;   /* optional: set true when the field was given (null counts as absent) */
    double min, max; /* INT, NUMBER; both 0: unbounded */
    size_t max_len;  /* STRING, ARRAY */
    const char *const *choices; /* ENUM */
};

/* What went wrong: the registry code, the field's path ("candidate.files" when prefix is
 * "candidate") and a sentence for people. */
struct kf_jerr {
    enum kf_err code;
    char field[128];
    char message[256];
};

/* Checks obj (must be an object) against fields[0..n). Unknown keys are an error
 * (KF_E_UNKNOWN_FIELD) unless allow_unknown. prefix (may be NULL) is prepended to field paths
 * for nested objects. Returns 0, or -1 with *err filled. */
int kf_jspec_parse(json_t *obj, const struct kf_jfield *fields, size_t n, const char *prefix,
                   bool allow_unknown, struct kf_jerr *err);

/* Parses a request body (len bytes, not NUL-terminated) into an object: invalid JSON,
 * invalid UTF-8 or a non-object gives KF_E_INVALID_JSON in *err and NULL. The caller owns the
 * result (json_decref). */
json_t *kf_jspec_load_body(const char *body, size_t len, struct kf_jerr *err);

#endif
