/* http_head.c: the check of a request's head before libmicrohttpd sees it (http_head.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http_head.h"

/* RFC 9110's tchar: the characters of a method or a header name. */
static bool tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

bool kf_request_id_valid(const char *s, size_t n) {
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static enum kf_head_state bad(struct kf_head_result *out, enum kf_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum kf_head_state bad(struct kf_head_result *out, enum kf_err err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
    out->err = err;
    return KF_HEAD_BAD;
}

/* The line at p (up to end): its length without the line end in *len, the line end's length
 * in *eol (0: no LF yet). false when a CR stands anywhere but right before the LF (or last of
 * the bytes so far, where the LF may follow). */
static bool line_at(const char *p, const char *end, size_t *len, size_t *eol) {
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    size_t l = (size_t)((lf ? lf : end) - p);
    const char *cr = memchr(p, '\r', l);
    if (cr && !(lf ? cr == lf - 1 : cr == end - 1))
        return false;
    bool has_cr = lf && lf > p && lf[-1] == '\r';
    *eol = lf ? (has_cr ? 2 : 1) : 0;
    *len = l - (has_cr ? 1 : 0);
    return true;
}

/* METHOD SP TARGET SP HTTP/1.x */
static enum kf_head_state request_line(const char *p, size_t n, struct kf_head_result *out) {
    size_t m = 0;
    while (m < n && tchar((unsigned char)p[m]))
        m++;
    if (m == 0 || m > 32 || m >= n || p[m] != ' ')
        return bad(out, KF_E_MALFORMED_REQUEST, "the request line is not METHOD TARGET HTTP/1.1");
    size_t t = m + 1, te = t;
    while (te < n && (unsigned char)p[te] > ' ' && (unsigned char)p[te] < 0x7f)
        te++;
    if (te == t || te >= n || p[te] != ' ')
        return bad(out, KF_E_MALFORMED_REQUEST,
                   "the request target is empty or holds a blank or a control character");
    const char *v = p + te + 1;
    size_t vn = n - te - 1;
    if (vn == 8 && (memcmp(v, "HTTP/1.1", 8) == 0 || memcmp(v, "HTTP/1.0", 8) == 0))
        return KF_HEAD_OK;
    if (vn == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9' && v[6] == '.' &&
        v[7] >= '0' && v[7] <= '9')
        return bad(out, KF_E_HTTP_VERSION_NOT_SUPPORTED, "%.8s is not served; use HTTP/1.1", v);
    return bad(out, KF_E_MALFORMED_REQUEST, "the request line does not end in HTTP/1.1");
}

struct seen {
    int host, content_length, transfer_encoding;
};

static bool name_is(const char *p, size_t n, const char *name) {
    return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

/* NAME ":" OWS VALUE OWS, with the headers the guard cares about checked. */
static enum kf_head_state header_line(const char *p, size_t n, const struct kf_head_limits *lim,
                                      struct seen *seen, struct kf_head_result *out) {
    if (p[0] == ' ' || p[0] == '\t')
        return bad(out, KF_E_MALFORMED_REQUEST, "a header line is folded (starts with a blank)");
    size_t c = 0;
    while (c < n && tchar((unsigned char)p[c]))
        c++;
    if (c == 0 || c >= n || p[c] != ':')
        return bad(out, KF_E_MALFORMED_REQUEST, "a header line is not NAME: VALUE");
    const char *v = p + c + 1, *ve = p + n;
    for (const char *q = v; q < ve; q++) {
        unsigned char ch = (unsigned char)*q;
        if ((ch < ' ' && ch != '\t') || ch == 0x7f)
            return bad(out, KF_E_MALFORMED_REQUEST, "the header %.*s holds a control character",
                       (int)(c < 64 ? c : 64), p);
    }
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    size_t vn = (size_t)(ve - v);
    if (name_is(p, c, "Host") && ++seen->host > 1)
        return bad(out, KF_E_MALFORMED_REQUEST, "the request has two Host headers");
    if (name_is(p, c, "Transfer-Encoding")) {
        if (!(vn == 7 && strncasecmp(v, "chunked", 7) == 0))
            return bad(out, KF_E_MALFORMED_REQUEST,
                       "Transfer-Encoding: only chunked is understood");
        seen->transfer_encoding++;
    }
    if (name_is(p, c, "Content-Length")) {
        if (++seen->content_length > 1)
            return bad(out, KF_E_MALFORMED_REQUEST, "the request has two Content-Length headers");
        size_t d = 0;
        while (d < vn && v[d] >= '0' && v[d] <= '9')
            d++;
        if (d == 0 || d != vn)
            return bad(out, KF_E_MALFORMED_REQUEST, "Content-Length is not a number of bytes");
        int64_t len = 0;
        for (size_t i = 0; i < d && len <= lim->max_body; i++)
            len = len * 10 + (v[i] - '0');
        if (len > lim->max_body)
            return bad(out, KF_E_BODY_TOO_LARGE, "the body passed %lld bytes",
                       (long long)lim->max_body);
    }
    return KF_HEAD_OK;
}

/* The client's X-Request-Id among the whole lines received, so that a refusal carries it
 * whatever line is to blame. */
static void find_request_id(const char *buf, size_t n, struct kf_head_result *out) {
    static const char name[] = "X-Request-Id:";
    const char *p = buf, *end = buf + n;
    while (p < end) {
        const char *lf = memchr(p, '\n', (size_t)(end - p));
        if (!lf)
            return;
        size_t len = (size_t)(lf - p);
        if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
            const char *v = p + sizeof name - 1, *ve = lf;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (kf_request_id_valid(v, (size_t)(ve - v))) {
                snprintf(out->request_id, sizeof out->request_id, "%.*s", (int)(ve - v), v);
                return;
            }
        }
        p = lf + 1;
    }
}

enum kf_head_state kf_head_check(const char *buf, size_t n, const struct kf_head_limits *lim,
                                 struct kf_head_result *out) {
    out->len = 0;
    out->err = KF_E_INTERNAL;
    out->message[0] = '\0';
    out->request_id[0] = '\0';
    find_request_id(buf, n < lim->max_head ? n : lim->max_head, out);
    const char *p = buf, *end = buf + n;
    struct seen seen = {0, 0, 0};
    bool first = true;
    while (p < end) {
        size_t len = 0, eol = 0;
        if (!line_at(p, end, &len, &eol))
            return bad(out, KF_E_MALFORMED_REQUEST, "a CR stands alone in the request's head");
        if (len > KF_HEAD_LINE_MAX)
            return first ? bad(out, KF_E_URI_TOO_LONG, "the request line passed %d bytes",
                               KF_HEAD_LINE_MAX)
                         : bad(out, KF_E_HEADERS_TOO_LARGE, "a header line passed %d bytes",
                               KF_HEAD_LINE_MAX);
        if (eol == 0)
            break; /* the line goes on in bytes not sent yet */
        if (len == 0 && first) {
            p += eol; /* blank lines before the request line */
            continue;
        }
        if (len == 0) {
            if ((size_t)(p + eol - buf) > lim->max_head)
                break;
            if (seen.transfer_encoding && seen.content_length)
                return bad(out, KF_E_MALFORMED_REQUEST,
                           "the request has both Transfer-Encoding and Content-Length");
            /* a chunked body's framing is parsed by libmicrohttpd alone, which answers a
             * malformed one itself: bodies come with a Content-Length */
            if (seen.transfer_encoding)
                return bad(out, KF_E_LENGTH_REQUIRED,
                           "a body must come with Content-Length (chunked bodies are not taken)");
            out->len = (size_t)(p + eol - buf);
            return KF_HEAD_OK;
        }
        enum kf_head_state st =
            first ? request_line(p, len, out) : header_line(p, len, lim, &seen, out);
        if (st == KF_HEAD_BAD)
            return st;
        first = false;
        p += len + eol;
    }
    if (n > lim->max_head)
        return bad(out, KF_E_HEADERS_TOO_LARGE, "the request's headers passed %zu bytes",
                   lim->max_head);
    return KF_HEAD_INCOMPLETE;
}
