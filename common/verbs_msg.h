/*
 * Verbs attributes <-> protobuf messages, for the client libraries: both
 * libibverbs (modify/query QP, AHs) and librdmacm (CM_INIT_QP_ATTR, UD
 * parameters in CM events) convert the same messages, and neither can
 * call the other's private functions.  The daemon keeps its own
 * conversions into its own structs.
 */
#ifndef IBVD_VERBS_MSG_H
#define IBVD_VERBS_MSG_H

#include <infiniband/verbs.h>

#include "ibverbsd.pb-c.h"

/* m points into a (gid bytes stay in a's storage): keep a alive while m is. */
void ibvd_ah_attr_to_msg(const struct ibv_ah_attr *a, Ibvd__AhAttr *m);
/* m may be NULL: a is zeroed. */
void ibvd_ah_attr_from_msg(const Ibvd__AhAttr *m, struct ibv_ah_attr *a);
void ibvd_qp_cap_from_msg(const Ibvd__QpCap *m, struct ibv_qp_cap *cap);
/* Every field goes out (the AHs separately); the daemon reads only what
 * the attribute mask names. */
void ibvd_qp_attr_to_msg(const struct ibv_qp_attr *a, Ibvd__QpAttr *m);
/* m may be NULL: a is zeroed. */
void ibvd_qp_attr_from_msg(const Ibvd__QpAttr *m, struct ibv_qp_attr *a);

#endif /* IBVD_VERBS_MSG_H */
