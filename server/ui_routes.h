/* ui_routes.h: the web UI's own paths. The UI is a single-page app: each of these paths serves
 * web_dir/index.html, whose scripts read the path and draw the page. */
#ifndef KF_SERVER_UI_ROUTES_H
#define KF_SERVER_UI_ROUTES_H

#include <stdbool.h>

/* true when path is exactly one of /, /leaderboard, /submit, /tasks/{id}, /episodes/{id},
 * /jobs/{id} ({id} a UUID, as the API's router takes it). */
bool kf_ui_route(const char *path);

#endif
