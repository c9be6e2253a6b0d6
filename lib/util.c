/* util.c: UUIDs, SHA-256, API keys and clocks. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <openssl/evp.h>

static const char kf_hex[] = "0123456789abcdef";

/* Fills buf with n random bytes from getrandom(2). 0 or -1. */
static int random_bytes(unsigned char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void to_hex(const unsigned char *in, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = kf_hex[in[i] >> 4];
        out[2 * i + 1] = kf_hex[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int kf_uuid_new(char out[37]) {
    unsigned char b[16];
    if (random_bytes(b, sizeof(b)) != 0)
        return -1;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 10 */
    size_t o = 0;
    for (size_t i = 0; i < sizeof(b); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = kf_hex[b[i] >> 4];
        out[o++] = kf_hex[b[i] & 15];
    }
    out[o] = '\0';
    return 0;
}

bool kf_uuid_valid(const char *s) {
    if (s == NULL)
        return false;
    for (size_t i = 0; i < KF_UUID_LEN; i++) {
        unsigned char c = (unsigned char)s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? c != '-' : !isxdigit(c))
            return false;
    }
    return s[KF_UUID_LEN] == '\0';
}

void kf_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        out[0] = '\0';
        return;
    }
    to_hex(md, 32, out);
}

int kf_apikey_new(char key[64], char prefix[9]) {
    unsigned char b[24]; /* 4 bytes of prefix, 20 of secret */
    if (random_bytes(b, sizeof(b)) != 0)
        return -1;
    char p[9], s[41];
    to_hex(b, 4, p);
    to_hex(b + 4, 20, s);
    snprintf(key, 64, "kf_%s_%s", p, s);
    memcpy(prefix, p, sizeof(p));
    return 0;
}

static bool all_hex_lower(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\0' || strchr(kf_hex, s[i]) == NULL)
            return false;
    }
    return true;
}

bool kf_apikey_prefix(const char *key, char prefix[9]) {
    if (key == NULL || strncmp(key, "kf_", 3) != 0 || !all_hex_lower(key + 3, 8) ||
        key[11] != '_' || !all_hex_lower(key + 12, 40) || key[52] != '\0')
        return false;
    memcpy(prefix, key + 3, 8);
    prefix[8] = '\0';
    return true;
}

static int64_t clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kf_now_ms(void) {
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t kf_wall_ms(void) {
    return clock_ms(CLOCK_REALTIME);
}
