/* static.c: plain files, by content type from the extension; nothing outside web_dir. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reply.h"
#include "static.h"

static const struct {
    const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".yaml", "application/yaml"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
    {".woff2", "font/woff2"},
};

static const char *content_type(const char *path) {
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

static bool safe_path(const char *p) {
    if (p[0] != '/' || strstr(p, "..") || strstr(p, "//"))
        return false;
    for (; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '/'))
            return false;
    }
    return true;
}

static enum MHD_Result send_file(struct kf_req *r, const char *file, const char *cache) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return kf_reply_error(r, KF_E_NOT_FOUND, NULL, "no such file");
    }
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type(file));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    return kf_reply_queue(r, MHD_HTTP_OK, resp);
}

enum MHD_Result kf_static_serve(struct kf_req *r, const char *path) {
    const struct kf_server *srv = r->srv;
    if (strcmp(path, "/openapi.yaml") == 0 && srv->openapi_path[0])
        return send_file(r, srv->openapi_path, "no-cache");
    const char *dir = srv->cfg->web_dir;
    if (!dir || !dir[0] || !safe_path(path))
        return kf_reply_error(r, KF_E_NOT_FOUND, NULL, "no such file");
    char file[4096];
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    snprintf(file, sizeof file, "%s%s", dir, path);
    bool html = strcmp(content_type(file), types[0].type) == 0;
    return send_file(r, file, html ? "no-cache" : "public, max-age=300");
}
