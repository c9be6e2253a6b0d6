/* workspace.c: a job's folder var_dir/work/JOB/ with task.py and candidate/ (the candidate's
 * files, names checked again: relative, [A-Za-z0-9._/-], no "..", no empty parts). */
#include "workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkdirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int kfw_ws_remove(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

bool kfw_ws_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 255 || name[0] == '/' || name[n - 1] == '/')
        return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-' || c == '/';
        if (!ok || (c == '/' && p[1] == '/'))
            return false;
    }
    /* no part may be "." or ".." */
    const char *part = name;
    while (*part) {
        size_t len = strcspn(part, "/");
        if ((len == 1 && part[0] == '.') || (len == 2 && part[0] == '.' && part[1] == '.'))
            return false;
        part += len;
        if (*part == '/')
            part++;
    }
    return true;
}

static int write_file(const char *path, const char *text, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    return close(fd);
}

int kfw_ws_create(const char *dir, const char *source, json_t *files, char *err, size_t errlen) {
    char path[4096];
    if (kfw_ws_remove(dir) != 0 || mkdirs(dir) != 0) {
        snprintf(err, errlen, "workspace %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/task.py", dir);
    if (write_file(path, source, strlen(source)) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (files == NULL)
        return 0;
    const char *name;
    json_t *content;
    json_object_foreach(files, name, content) {
        if (!kfw_ws_name_ok(name) || !json_is_string(content)) {
            snprintf(err, errlen, "candidate file %.200s: bad name or content", name);
            return -1;
        }
        if (snprintf(path, sizeof(path), "%s/candidate/%s", dir, name) >= (int)sizeof(path)) {
            snprintf(err, errlen, "candidate file %.200s: path too long", name);
            return -1;
        }
        char *slash = strrchr(path, '/');
        *slash = '\0';
        int rc = mkdirs(path);
        *slash = '/';
        if (rc != 0 ||
            write_file(path, json_string_value(content), json_string_length(content)) != 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}
