/* candidate_get.h: GET /v1/candidates/{id} (a candidate's files as JSON) and
 * GET /v1/candidates/{id}/download (the same files as a tar archive under candidate/). */
#ifndef KF_SERVER_CANDIDATE_GET_H
#define KF_SERVER_CANDIDATE_GET_H

#include "server.h"

/* GET /v1/candidates/{id} */
enum MHD_Result kf_candidate_get(struct kf_req *r);

/* GET /v1/candidates/{id}/download */
enum MHD_Result kf_candidate_download_get(struct kf_req *r);

#endif
