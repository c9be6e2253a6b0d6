/* util.c: string, file and clock helpers that are safe between clone() and execve(). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

size_t kf_strlcpy(char *dst, const char *src, size_t n) {
    size_t len = strlen(src);
    if (n > 0) {
        size_t c = len < n - 1 ? len : n - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return len;
}

size_t kf_strlcat(char *dst, const char *src, size_t n) {
    size_t have = strnlen(dst, n);
    if (have == n)
        return n + strlen(src);
    return have + kf_strlcpy(dst + have, src, n - have);
}

void kf_strlcat_u64(char *dst, uint64_t v, size_t n) {
    char tmp[24];
    size_t i = sizeof(tmp) - 1;
    tmp[i] = '\0';
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0 && i > 0);
    kf_strlcat(dst, tmp + i, n);
}

int kf_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int kf_write_file(const char *path, const char *s) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = kf_write_all(fd, s, strlen(s));
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

ssize_t kf_read_file(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t r = read(fd, buf + got, n - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(fd);
    return (ssize_t)got;
}

uint64_t kf_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
