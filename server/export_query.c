/* export_query.c: checking GET /v1/export's query (see export_query.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "export_query.h"
#include "util.h"

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void kf_export_cursor_encode(const char *seq, char out[KF_EXPORT_CURSOR_MAX]) {
    const unsigned char *in = (const unsigned char *)seq;
    size_t n = strlen(seq), o = 0;
    if (n > 18)
        n = 18;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = B64URL[(v >> 18) & 63];
        out[o++] = B64URL[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = B64URL[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = B64URL[v & 63];
    }
    out[o] = '\0';
}

static int b64_value(char c) {
    const char *p = c ? strchr(B64URL, c) : NULL;
    return p ? (int)(p - B64URL) : -1;
}

bool kf_export_cursor_decode(const char *cursor, char seq[24]) {
    size_t n = strlen(cursor);
    if (n < 2 || n > 24 || n % 4 == 1)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        size_t k = n - i < 4 ? n - i : 4;
        for (size_t j = 0; j < 4; j++) {
            int d = j < k ? b64_value(cursor[i + j]) : 0;
            if (d < 0)
                return false;
            v = (v << 6) | (unsigned)d;
        }
        seq[o++] = (char)((v >> 16) & 0xff);
        if (k > 2)
            seq[o++] = (char)((v >> 8) & 0xff);
        if (k > 3)
            seq[o++] = (char)(v & 0xff);
    }
    seq[o] = '\0';
    if (o == 0 || o > 18 || strspn(seq, "0123456789") != o || (seq[0] == '0' && o > 1))
        return false;
    char again[KF_EXPORT_CURSOR_MAX];
    kf_export_cursor_encode(seq, again);
    return strcmp(again, cursor) == 0; /* rejects stray low bits: one cursor per position */
}

/* n digits of s as a number, or -1 when they are not all digits. */
static int digits(const char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int days_in_month(int y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

bool kf_rfc3339_valid(const char *s) {
    size_t n = strlen(s);
    if (n < 20 || n > 39)
        return false;
    int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
    int h = digits(s + 11, 2), mi = digits(s + 14, 2), sec = digits(s + 17, 2);
    if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':')
        return false;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || sec < 0 || sec > 60)
        return false;
    const char *p = s + 19;
    if (*p == '.') {
        size_t f = strspn(p + 1, "0123456789");
        if (f < 1 || f > 9)
            return false;
        p += 1 + f;
    }
    if ((p[0] == 'Z' || p[0] == 'z') && p[1] == '\0')
        return true;
    if ((p[0] != '+' && p[0] != '-' && p[0] != ' ') || strlen(p) != 6 || p[3] != ':')
        return false;
    int oh = digits(p + 1, 2), om = digits(p + 4, 2);
    return oh >= 0 && oh <= 23 && om >= 0 && om <= 59;
}

void kf_rfc3339_utc(const char *s, char out[40]) {
    struct tm tm = {0};
    tm.tm_year = digits(s, 4) - 1900;
    tm.tm_mon = digits(s + 5, 2) - 1;
    tm.tm_mday = digits(s + 8, 2);
    tm.tm_hour = digits(s + 11, 2);
    tm.tm_min = digits(s + 14, 2);
    tm.tm_sec = digits(s + 17, 2); /* 60, a leap second, becomes the next minute's 00 */
    const char *p = s + 19;
    char frac[8] = "";
    if (*p == '.') {
        size_t f = strspn(p + 1, "0123456789");
        snprintf(frac, sizeof frac, ".%.*s", (int)(f < 6 ? f : 6), p + 1);
        p += 1 + f;
    }
    time_t t = timegm(&tm);
    if (*p != 'Z' && *p != 'z') {
        long off = (long)digits(p + 1, 2) * 3600 + (long)digits(p + 4, 2) * 60;
        t += *p == '-' ? off : -off; /* ' ' stands for '+' (a '+' the query did not escape) */
    }
    struct tm u;
    if (!gmtime_r(&t, &u) || u.tm_year + 1900 < 1) {
        snprintf(out, 40, "0001-01-01T00:00:00Z"); /* before any episode */
        return;
    }
    if (u.tm_year + 1900 > 9999) {
        snprintf(out, 40, "9999-12-31T23:59:59.999999Z"); /* after any episode */
        return;
    }
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d%sZ", u.tm_year + 1900, u.tm_mon + 1, u.tm_mday,
             u.tm_hour, u.tm_min, u.tm_sec, frac);
}

bool kf_accepts_gzip(const char *ae) {
    if (!ae)
        return false;
    const char *p = ae;
    while (*p) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, ",");
        size_t name = strcspn(p, " \t;,");
        if (name > len)
            name = len;
        bool is_gzip = (name == 4 && strncasecmp(p, "gzip", 4) == 0) ||
                       (name == 6 && strncasecmp(p, "x-gzip", 6) == 0);
        if (is_gzip) {
            /* ";q=0", ";q=0.0", ... refuse it; any other q takes it */
            const char *q = p + name;
            const char *end = p + len;
            bool zero = false;
            while (q < end) {
                q += strspn(q, " \t;");
                if (q + 2 <= end && (q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
                    const char *v = q + 2;
                    size_t vl = strcspn(v, " \t;,");
                    zero = vl >= 1 && v[0] == '0' && strspn(v + 1, ".0") == vl - 1;
                }
                q += strcspn(q, ";,");
                if (q < end && *q == ';')
                    continue;
                break;
            }
            return !zero;
        }
        p += len;
    }
    return false;
}

static const char *arg(struct MHD_Connection *conn, const char *name) {
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

/* An integer of at most 9 digits, with an optional minus sign, into out (a copy of s). */
static bool small_int(const char *s, char out[16]) {
    const char *d = s[0] == '-' ? s + 1 : s;
    size_t n = strspn(d, "0123456789");
    if (n == 0 || n > 9 || d[n] != '\0')
        return false;
    snprintf(out, 16, "%s", s);
    return true;
}

const char *kf_export_query_parse(struct MHD_Connection *conn, struct kf_export_query *q, char *msg,
                                  size_t msglen) {
    memset(q, 0, sizeof *q);
    snprintf(q->after, sizeof q->after, "0");
    q->limit = KF_EXPORT_LIMIT_DEFAULT;
    const char *v = arg(conn, "cursor");
    if (v) {
        if (strlen(v) >= sizeof q->cursor || !kf_export_cursor_decode(v, q->after)) {
            snprintf(msg, msglen, "cursor: not a cursor this server gave");
            return "cursor";
        }
        snprintf(q->cursor, sizeof q->cursor, "%s", v);
    }
    if ((v = arg(conn, "limit"))) {
        size_t n = strspn(v, "0123456789");
        q->limit = n >= 1 && n <= 4 && v[n] == '\0' ? strtol(v, NULL, 10) : 0;
        if (q->limit < 1 || q->limit > KF_EXPORT_LIMIT_MAX) {
            snprintf(msg, msglen, "limit: must be an integer from 1 to %d", KF_EXPORT_LIMIT_MAX);
            return "limit";
        }
    }
    static const char *const times[] = {"since", "until"};
    for (int i = 0; i < 2; i++) {
        char *dst = i == 0 ? q->since : q->until;
        if (!(v = arg(conn, times[i])))
            continue;
        if (!kf_rfc3339_valid(v)) {
            snprintf(msg, msglen, "%s: must be an RFC 3339 date-time such as 2026-01-31T12:00:00Z",
                     times[i]);
            return times[i];
        }
        kf_rfc3339_utc(v, dst); /* PostgreSQL takes offsets up to 15:59 only */
    }
    if ((v = arg(conn, "task_id"))) {
        if (!kf_uuid_valid(v)) {
            snprintf(msg, msglen, "task_id: must be a UUID");
            return "task_id";
        }
        snprintf(q->task_id, sizeof q->task_id, "%s", v);
    }
    if ((v = arg(conn, "policy"))) {
        if (strcmp(v, "openai") != 0 && strcmp(v, "expert") != 0) {
            snprintf(msg, msglen, "policy: must be one of openai, expert");
            return "policy";
        }
        snprintf(q->policy, sizeof q->policy, "%s", v);
    }
    if ((v = arg(conn, "min_reward")) && !small_int(v, q->min_reward)) {
        snprintf(msg, msglen, "min_reward: must be an integer");
        return "min_reward";
    }
    if ((v = arg(conn, "rft"))) {
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            snprintf(msg, msglen, "rft: must be true or false");
            return "rft";
        }
        q->rft = strcmp(v, "true") == 0;
    }
    if ((v = arg(conn, "format"))) {
        if (strcmp(v, "trajectory") != 0 && strcmp(v, "sft") != 0) {
            snprintf(msg, msglen, "format: must be one of trajectory, sft");
            return "format";
        }
        q->sft = strcmp(v, "sft") == 0;
    }
    q->gzip = kf_accepts_gzip(
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    return NULL;
}
