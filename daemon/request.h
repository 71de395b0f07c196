/*
 * The request table (request.c): main.c gives the server its finder.
 */
#ifndef IBVD_REQUEST_H
#define IBVD_REQUEST_H

#include <stdint.h>

#include "server/call.h"

/* The row for a message type, or NULL if clients may not send it. */
const struct ibvd_request_type *ibvd_request_type_find(uint16_t type);

#endif /* IBVD_REQUEST_H */
