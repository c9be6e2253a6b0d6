/* static.c: plain files, by content type from the extension; nothing outside web_dir. Every
 * response of a file carries the UI's Content-Security-Policy, nosniff and Referrer-Policy.
 * HTML is revalidated each time (no-cache); other files are cached 5 minutes and carry an
 * ETag ("SIZE-MTIME" in hex) and Last-Modified, and a matching If-None-Match gets 304. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "reply.h"
#include "static.h"
#include "ui_routes.h"

#define KF_CSP                                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"               \
    " connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self';"                   \
    " frame-ancestors 'none'"
#define KF_CACHE_ASSET "public, max-age=300"
#define KF_CACHE_ALWAYS_CHECK "no-cache" /* HTML and /openapi.yaml: revalidated each time */

static const struct {
    const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".webmanifest", "application/manifest+json"},
    {".yaml", "application/yaml"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".jpg", "image/jpeg"},
    {".gif", "image/gif"},
    {".webp", "image/webp"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
    {".woff", "font/woff"},
    {".woff2", "font/woff2"},
};

static const char *content_type(const char *path) {
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

/* "/" then parts of [A-Za-z0-9._-], none empty and none starting with "." (no "..", no hidden
 * files). */
static bool safe_path(const char *p) {
    if (p[0] != '/')
        return false;
    for (const char *part = p + 1;; part++) {
        size_t n =
            strspn(part, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
        if (n == 0 || part[0] == '.')
            return false;
        part += n;
        if (*part == '\0')
            return true;
        if (*part != '/')
            return false;
    }
}

/* The headers of every file response: the UI's security policy. */
static void guard(struct MHD_Response *resp) {
    MHD_add_response_header(resp, "Content-Security-Policy", KF_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "same-origin");
}

/* An RFC 9110 HTTP-date (IMF-fixdate), independent of the locale. */
static void http_date(time_t t, char out[32]) {
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, 32, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
             months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* true when an If-None-Match header value lists etag (weakly compared) or is "*". */
static bool etag_listed(const char *header, const char *etag) {
    size_t n = strlen(etag);
    for (const char *p = header; p && *p;) {
        p += strspn(p, " \t,");
        if (*p == '*')
            return true;
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        if (strncmp(p, etag, n) == 0 && strchr(" \t,", p[n]))
            return true;
        p += strcspn(p, ",");
    }
    return false;
}

/* Opens file when it is a regular file; false otherwise (nothing left open). */
static bool open_file(const char *file, int *fd, struct stat *st) {
    *fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO never blocks */
    if (*fd >= 0 && fstat(*fd, st) == 0 && S_ISREG(st->st_mode))
        return true;
    if (*fd >= 0)
        close(*fd);
    return false;
}

/* Queues the open file fd (taken) with status; cache is its Cache-Control. A file other than
 * HTML sent with 200 gets its validators, and 304 when If-None-Match names them. */
static enum MHD_Result send_file(struct kf_req *r, int fd, const struct stat *st, const char *file,
                                 unsigned status, const char *cache) {
    const char *type = content_type(file);
    bool validators = status == MHD_HTTP_OK && strcmp(type, types[0].type) != 0;
    char etag[64], modified[32];
    snprintf(etag, sizeof etag, "\"%llx-%llx\"", (unsigned long long)st->st_size,
             (unsigned long long)st->st_mtim.tv_sec * 1000000000ULL +
                 (unsigned long long)st->st_mtim.tv_nsec);
    http_date(st->st_mtim.tv_sec, modified);
    const char *inm =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    struct MHD_Response *resp;
    if (validators && etag_listed(inm, etag)) {
        close(fd);
        status = MHD_HTTP_NOT_MODIFIED;
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else {
        resp = MHD_create_response_from_fd((uint64_t)st->st_size, fd);
        if (!resp)
            close(fd);
        else
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
    if (validators) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, modified);
    }
    guard(resp);
    return kf_reply_queue(r, status, resp);
}

/* 404: web_dir/404.html when there is one, else the JSON not_found error. */
static enum MHD_Result not_found(struct kf_req *r, const char *dir) {
    char file[4096];
    int fd;
    struct stat st;
    snprintf(file, sizeof file, "%s/404.html", dir ? dir : "");
    if (dir && dir[0] && open_file(file, &fd, &st))
        return send_file(r, fd, &st, file, MHD_HTTP_NOT_FOUND, KF_CACHE_ALWAYS_CHECK);
    return kf_reply_error(r, KF_E_NOT_FOUND, NULL, "no such file");
}

enum MHD_Result kf_static_serve(struct kf_req *r, const char *path) {
    const struct kf_server *srv = r->srv;
    const char *dir = srv->cfg->web_dir;
    int fd;
    struct stat st;
    if (strcmp(path, "/openapi.yaml") == 0 && srv->openapi_path[0] &&
        open_file(srv->openapi_path, &fd, &st))
        return send_file(r, fd, &st, srv->openapi_path, MHD_HTTP_OK, KF_CACHE_ALWAYS_CHECK);
    if (!dir || !dir[0])
        return not_found(r, dir);
    char file[4096];
    bool ui = kf_ui_route(path);
    if (!ui && !safe_path(path))
        return not_found(r, dir);
    int n = snprintf(file, sizeof file, "%s%s", dir, ui ? "/index.html" : path);
    if (n < 0 || (size_t)n >= sizeof file || !open_file(file, &fd, &st))
        return not_found(r, dir);
    bool html = strcmp(content_type(file), types[0].type) == 0;
    return send_file(r, fd, &st, file, MHD_HTTP_OK, html ? KF_CACHE_ALWAYS_CHECK : KF_CACHE_ASSET);
}
