/* candidate_get.c: GET /v1/candidates/{id} and GET /v1/candidates/{id}/download. The download
 * is a POSIX tar archive (tar.h) of the files under candidate/, names sorted, each folder
 * before its files, every member dated by the candidate's created_at; it is built in memory
 * (a candidate is at most max_files files of max_file_bytes each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidate_get.h"
#include "episode_sql.h"
#include "reply.h"
#include "tar.h"

#define TOP "candidate/"

/* Runs stmt with the path's id on a pooled connection; *res is the result (NULL after an
 * error was queued, or no row: notfound queued). Returns MHD's result of the error reply. */
static enum MHD_Result fetch(struct kf_req *r, const char *stmt, PGresult **res) {
    *res = NULL;
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    const char *params[] = {r->id};
    PGresult *got = kf_episode_sql_exec(db, stmt, 1, params);
    enum MHD_Result ret = MHD_YES;
    if (!got)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(got) < 1)
        ret = kf_reply_error(r, KF_E_CANDIDATE_NOT_FOUND, NULL, NULL);
    else
        *res = got;
    if (!*res)
        PQclear(got);
    kf_srv_db_put(r->srv, db);
    return ret;
}

enum MHD_Result kf_candidate_get(struct kf_req *r) {
    PGresult *res;
    enum MHD_Result ret = fetch(r, "ep_candidate_get", &res);
    if (!res)
        return ret;
    ret = kf_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
    PQclear(res);
    return ret;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends the folders above name (TOP + name) that are not in done yet ("\0"-separated
 * paths, each with its trailing '/'), and records them there. Returns 0 or -1. */
static int add_parents(struct kf_buf *tar, struct kf_buf *done, const char *name, int64_t mtime) {
    char path[600];
    for (const char *slash = strchr(name, '/'); slash; slash = strchr(slash + 1, '/')) {
        int n = snprintf(path, sizeof path, "%s%.*s/", TOP, (int)(slash - name), name);
        if (n < 0 || (size_t)n >= sizeof path)
            return -1;
        bool seen = false;
        for (size_t off = 0; off < done->len && !seen; off += strlen(done->data + off) + 1)
            seen = strcmp(done->data + off, path) == 0;
        if (seen)
            continue;
        if (kf_tar_add_dir(tar, path, mtime) != 0 || !kf_buf_append(done, path, (size_t)n + 1))
            return -1;
    }
    return 0;
}

/* The archive of files (an object name -> text) into tar. Returns 0 or -1. */
static int build(struct kf_buf *tar, json_t *files, int64_t mtime) {
    size_t n = json_object_size(files);
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!names)
        return -1;
    size_t k = 0;
    const char *key;
    json_t *val;
    json_object_foreach(files, key, val) {
        names[k++] = key;
    }
    qsort(names, k, sizeof *names, cmp_str);
    struct kf_buf done = {0};
    int rc = kf_tar_add_dir(tar, TOP, mtime);
    char path[600];
    for (size_t i = 0; i < k && rc == 0; i++) {
        json_t *content = json_object_get(files, names[i]);
        int len = snprintf(path, sizeof path, "%s%s", TOP, names[i]);
        if (!json_is_string(content) || len < 0 || (size_t)len >= sizeof path ||
            add_parents(tar, &done, names[i], mtime) != 0)
            rc = -1;
        else
            rc = kf_tar_add_file(tar, path, json_string_value(content), json_string_length(content),
                                 mtime);
    }
    kf_buf_free(&done);
    free(names);
    return rc == 0 ? kf_tar_finish(tar) : -1;
}

enum MHD_Result kf_candidate_download_get(struct kf_req *r) {
    PGresult *res;
    enum MHD_Result ret = fetch(r, "ep_candidate_files", &res);
    if (!res)
        return ret;
    json_error_t jerr;
    json_t *files =
        json_loadb(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), JSON_ALLOW_NUL, &jerr);
    int64_t mtime = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    struct kf_buf tar = {0};
    int rc = json_is_object(files) ? build(&tar, files, mtime) : -1;
    json_decref(files);
    if (rc != 0) {
        kf_buf_free(&tar);
        kf_log(&r->log, KF_LOG_ERROR, "candidate %s: could not build its archive", r->id);
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "could not build the archive");
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(tar.len, tar.data, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        kf_buf_free(&tar);
        return MHD_NO;
    }
    char disposition[96];
    snprintf(disposition, sizeof disposition, "attachment; filename=\"kforge-candidate-%.8s.tar\"",
             r->id);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disposition);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return kf_reply_queue(r, MHD_HTTP_OK, resp);
}
