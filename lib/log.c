/* log.c: logfmt lines on stderr, one write(2) each. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define KF_LOG_LINE 4096

/* A line being built in a fixed buffer; overflow truncates (and the line still ends in \n). */
struct line {
    char buf[KF_LOG_LINE];
    size_t len;
};

static const char *const level_names[] = {"debug", "info", "warn", "error"};

enum kf_log_level kf_log_parse_level(const char *s) {
    if (s == NULL)
        return KF_LOG_INFO;
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(s, level_names[i]) == 0)
            return (enum kf_log_level)i;
    }
    if (strcasecmp(s, "warning") == 0)
        return KF_LOG_WARN;
    return KF_LOG_INFO;
}

static void put_char(struct line *l, char c) {
    if (l->len < sizeof(l->buf) - 2) /* room for the closing quote and the newline */
        l->buf[l->len++] = c;
}

static void put_str(struct line *l, const char *s) {
    for (; *s != '\0'; s++)
        put_char(l, *s);
}

static bool needs_quotes(const char *s) {
    if (*s == '\0')
        return true;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f)
            return true;
    }
    return false;
}

static void put_escaped(struct line *l, const char *s) {
    static const char hex[] = "0123456789abcdef";
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put_char(l, '\\');
            put_char(l, (char)c);
        } else if (c == '\n') {
            put_str(l, "\\n");
        } else if (c == '\r') {
            put_str(l, "\\r");
        } else if (c == '\t') {
            put_str(l, "\\t");
        } else if (c < ' ' || c == 0x7f) {
            put_str(l, "\\u00");
            put_char(l, hex[c >> 4]);
            put_char(l, hex[c & 15]);
        } else {
            put_char(l, (char)c);
        }
    }
}

/* " key=value", the value quoted and escaped when it needs it. */
static void put_field(struct line *l, const char *key, const char *value) {
    if (value == NULL)
        return;
    if (l->len > 0)
        put_char(l, ' ');
    put_str(l, key);
    put_char(l, '=');
    if (!needs_quotes(value)) {
        put_str(l, value);
        return;
    }
    put_char(l, '"');
    put_escaped(l, value);
    put_char(l, '"');
}

static void put_time(struct line *l) {
    struct timespec ts;
    struct tm tm;
    char when[64];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof(when) - n, ".%03dZ", (int)(ts.tv_nsec / 1000000) % 1000);
    put_field(l, "ts", when);
}

static void write_line(const struct line *l) {
    const char *p = l->buf;
    size_t left = l->len;
    while (left > 0) {
        ssize_t w = write(STDERR_FILENO, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        left -= (size_t)w;
    }
}

void kf_log(const struct kf_log_ctx *ctx, enum kf_log_level level, const char *fmt, ...) {
    enum kf_log_level min = ctx != NULL ? ctx->min_level : KF_LOG_INFO;
    if (level < min)
        return;
    int saved = errno;
    char msg[KF_LOG_LINE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct line l = {.len = 0};
    put_time(&l);
    unsigned li = (unsigned)level;
    put_field(&l, "level", li < 4 ? level_names[li] : "info");
    if (ctx != NULL) {
        put_field(&l, "req", ctx->request_id);
        put_field(&l, "job", ctx->job_id);
        put_field(&l, "episode", ctx->episode_id);
        put_field(&l, "worker", ctx->worker);
    }
    put_char(&l, ' ');
    put_str(&l, "msg=\"");
    put_escaped(&l, msg);
    l.buf[l.len++] = '"';
    l.buf[l.len++] = '\n';
    write_line(&l);
    errno = saved;
}
