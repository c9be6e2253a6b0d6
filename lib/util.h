/* util.h: small helpers shared by the programs: UUIDs, SHA-256, API keys, time. */
#ifndef KF_UTIL_H
#define KF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KF_UUID_LEN 36 /* without the NUL */

/* Writes a random (v4) UUID, lower case, into out (at least 37 bytes). Returns 0 or -1. */
int kf_uuid_new(char out[37]);

/* true when s is a canonical UUID (8-4-4-4-12 hex, either case). */
bool kf_uuid_valid(const char *s);

/* SHA-256 of data as 64 lower-case hex characters and a NUL into out. */
void kf_sha256_hex(const void *data, size_t len, char out[65]);

/* A new API key "kf_" + 8 hex (the public prefix) + "_" + 40 hex (the secret) into key
 * (at least 64 bytes), and its prefix (9 bytes). Returns 0 or -1 (no randomness). */
int kf_apikey_new(char key[64], char prefix[9]);

/* Splits a key into its prefix (9 bytes); false when it is not shaped like one. */
bool kf_apikey_prefix(const char *key, char prefix[9]);

/* Monotonic and wall-clock time in milliseconds. */
int64_t kf_now_ms(void);
int64_t kf_wall_ms(void);

#endif
