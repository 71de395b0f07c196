/*
 * The administration service behind ibvctl.
 *
 * An ADMIN request carries ibvctl's words, already de-abbreviated
 * ("dev show ibvd0"); the daemon answers with a JSON array of flat
 * objects whose keys follow iproute2 rdma(8).  Each (object, command) pair
 * is one row of a table, so new objects (resource, client, limit,
 * statistic) are a row and a function each.
 *
 * Layer admin/, the top of the handlers: it reads the daemon through query
 * functions only (server/clients.h, cm/cm.h's snapshots, tenant/'s walk,
 * engine/engine.h's counters, core/'s objects), never session or CM
 * internals.  Files: admin.c (the table, dev, link, daemon), args.c
 * (shared arguments), res.c, cm_id.c, client.c, limit.c, stat.c.
 */
#ifndef IBVD_ADMIN_H
#define IBVD_ADMIN_H

struct ibvd_call;

int ibvd_req_admin(struct ibvd_call *call);

#endif /* IBVD_ADMIN_H */
