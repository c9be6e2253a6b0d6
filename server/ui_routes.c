/* ui_routes.c: the table of the web UI's paths (see ui_routes.h). */
#include <string.h>

#include "ui_routes.h"
#include "util.h"

/* A trailing "/" means "followed by a UUID and nothing else". */
static const char *const pages[] = {
    "/", "/leaderboard", "/submit", "/tasks/", "/episodes/", "/jobs/",
};

bool kf_ui_route(const char *path) {
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        size_t n = strlen(pages[i]);
        bool with_id = n > 1 && pages[i][n - 1] == '/';
        if (!with_id && strcmp(path, pages[i]) == 0)
            return true;
        if (with_id && strncmp(path, pages[i], n) == 0 && kf_uuid_valid(path + n))
            return true;
    }
    return false;
}
