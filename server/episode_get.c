/* episode_get.c: GET /v1/episodes/{id}. One statement gives the episode (without turns) and
 * its turns as two JSON texts; the reply splices them, so `?turns=false` leaves the key out
 * and `?after=N` (turns with idx > N, for a client polling a live episode) costs no parse.
 * Its owner sees all of it; anyone else sees a published episode (access.h) with its policy's
 * name and model only, and its turns only when published with its sources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "episode_get.h"
#include "episode_sql.h"
#include "reply.h"

/* ?after=N: an integer from -1 to 999999999, copied into out. */
static bool parse_after(const char *s, char out[16]) {
    const char *d = s[0] == '-' ? s + 1 : s;
    size_t n = strspn(d, "0123456789");
    if (n == 0 || n > 9 || d[n] != '\0' || (s[0] == '-' && strcmp(d, "1") != 0))
        return false;
    snprintf(out, 16, "%s", s);
    return true;
}

static enum MHD_Result reply(struct kf_req *r, PGresult *res, bool with_turns) {
    const char *obj = PQgetvalue(res, 0, 0);
    size_t olen = (size_t)PQgetlength(res, 0, 0);
    if (!with_turns || olen < 2 || obj[olen - 1] != '}')
        return kf_reply_text(r, MHD_HTTP_OK, obj, olen);
    const char *turns = PQgetvalue(res, 0, 1);
    size_t tlen = (size_t)PQgetlength(res, 0, 1);
    size_t cap = olen + tlen + 16;
    char *out = malloc(cap);
    if (!out)
        return kf_reply_error(r, KF_E_INTERNAL, NULL, "out of memory");
    memcpy(out, obj, olen - 1); /* without its closing brace */
    size_t len = olen - 1;
    len += (size_t)snprintf(out + len, cap - len, ", \"turns\" : ");
    memcpy(out + len, turns, tlen);
    len += tlen;
    out[len++] = '}';
    enum MHD_Result ret = kf_reply_text(r, MHD_HTTP_OK, out, len);
    free(out);
    return ret;
}

enum MHD_Result kf_episode_get(struct kf_req *r) {
    bool with_turns = true;
    const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "turns");
    if (v) {
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            return kf_reply_error(r, KF_E_INVALID_QUERY, "turns", "turns: must be true or false");
        with_turns = strcmp(v, "true") == 0;
    }
    char after[16] = "";
    v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "after");
    if (v && !parse_after(v, after))
        return kf_reply_error(r, KF_E_INVALID_QUERY, "after",
                              "after: must be an integer from -1 to 999999999 (a turn's idx)");
    struct kf_db *db = kf_srv_db_get(r->srv);
    if (!db)
        return kf_reply_error(r, KF_E_DATABASE_UNAVAILABLE, NULL, NULL);
    /* the turns hold the kernels' sources: its owner's, or published with them */
    with_turns = with_turns && r->access >= KF_ACCESS_SOURCES;
    const char *params[] = {r->id, after[0] ? after : NULL, with_turns ? "true" : "false",
                            r->access >= KF_ACCESS_OWNER ? "true" : "false"};
    PGresult *res = kf_episode_sql_exec(db, "ep_episode_get", 4, params);
    enum MHD_Result ret;
    if (!res)
        ret = kf_reply_db_error(r, db);
    else if (PQntuples(res) < 1)
        ret = kf_reply_error(r, KF_E_EPISODE_NOT_FOUND, NULL, NULL);
    else
        ret = reply(r, res, with_turns);
    PQclear(res);
    kf_srv_db_put(r->srv, db);
    return ret;
}
