/*
 * util.h: small helpers shared by the jail's files. Every function here is safe to call in
 * the child between clone() and execve(): none allocates memory or takes a lock.
 */
#ifndef KFORGE_SANDBOX_UTIL_H
#define KFORGE_SANDBOX_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Copies src into dst (size n > 0), always NUL-terminated. Returns strlen(src), so a result
 * >= n means that dst was truncated. */
size_t kf_strlcpy(char *dst, const char *src, size_t n);

/* Appends src to the string in dst (size n). Same return convention as kf_strlcpy. */
size_t kf_strlcat(char *dst, const char *src, size_t n);

/* Appends the decimal form of v to dst (size n). */
void kf_strlcat_u64(char *dst, uint64_t v, size_t n);

/* Writes all of buf to fd, retrying on EINTR and short writes. Returns 0 or -1 (errno). */
int kf_write_all(int fd, const void *buf, size_t len);

/* Writes the string s to the existing file path (O_WRONLY, no O_CREAT, no truncation, as
 * /proc and cgroup files want). Returns 0 or -1 with errno set. */
int kf_write_file(const char *path, const char *s);

/* Reads at most n-1 bytes of path into buf and NUL-terminates it. Returns the number of
 * bytes read or -1 with errno set. */
ssize_t kf_read_file(const char *path, char *buf, size_t n);

/* Monotonic clock in milliseconds. */
uint64_t kf_now_ms(void);

#endif
