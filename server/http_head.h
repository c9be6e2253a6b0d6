/* http_head.h: the check of a request's head (request line and headers) that the connection
 * guard runs on the bytes a client sent before libmicrohttpd reads any of them. A head it
 * passes is one libmicrohttpd parses without refusing it itself (its refusals are HTML without
 * a request id); a head it fails gets the registry's JSON error from the guard instead. Pure:
 * no I/O, no allocation. */
#ifndef KF_SERVER_HTTP_HEAD_H
#define KF_SERVER_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kf_errors.h"

/* The longest request line; a longer one is 414 uri_too_long. */
#define KF_HEAD_LINE_MAX 8192

enum kf_head_state {
    KF_HEAD_INCOMPLETE, /* no end of the head yet, and nothing wrong so far */
    KF_HEAD_OK,         /* a complete, acceptable head of len bytes */
    KF_HEAD_BAD,        /* refused: err and message say why */
};

struct kf_head_limits {
    size_t max_head;  /* request line + headers + the blank line */
    int64_t max_body; /* a larger Content-Length is 413 body_too_large */
};

struct kf_head_result {
    size_t len;          /* KF_HEAD_OK: the head's length, the blank line included */
    enum kf_err err;     /* KF_HEAD_BAD: the registry's code */
    char message[160];   /* KF_HEAD_BAD: what was wrong */
    char request_id[65]; /* the client's valid X-Request-Id when seen ("" none) */
};

/* Checks the first n bytes a client sent (buf need not be NUL-terminated). Lines end in LF,
 * with an optional CR before it; empty lines before the request line are skipped. Refused:
 * a request line that is not METHOD SP TARGET SP HTTP/x.y (400), a version other than 1.0 and
 * 1.1 (505), a line over KF_HEAD_LINE_MAX (414), a head over max_head (431), a header line that
 * is folded, has no colon, a bad name or control characters (400), two Host or two
 * Content-Length headers, a Content-Length that is not digits (400) or passes max_body (413),
 * a Transfer-Encoding other than chunked, or one beside a Content-Length (400), and a chunked
 * body at all (411: libmicrohttpd would parse its framing, and answer a bad one, itself). */
enum kf_head_state kf_head_check(const char *buf, size_t n, const struct kf_head_limits *lim,
                                 struct kf_head_result *out);

/* true when the n bytes at s are an acceptable X-Request-Id: [A-Za-z0-9._-]{1,64}. */
bool kf_request_id_valid(const char *s, size_t n);

#endif
