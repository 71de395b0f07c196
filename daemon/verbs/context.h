/*
 * Device contexts: OPEN_DEVICE makes one of a connection; struct
 * ibvd_context itself is part of the object model (core/objects.h).
 */
#ifndef IBVD_CONTEXT_H
#define IBVD_CONTEXT_H

#include "core/objects.h"

struct ibvd_call;

/* Destroy the context, everything it owns, and detach it from its session. */
void ibvd_context_free(struct ibvd_context *ctx);

/* Request handler (request.c's table). */
int ibvd_req_open_device(struct ibvd_call *call);

#endif /* IBVD_CONTEXT_H */
