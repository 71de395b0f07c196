/*
 * LIST_DEVICES, QUERY_DEVICE, QUERY_PORT, QUERY_GID_TABLE, QUERY_PKEY: the
 * devices and the attributes a software or RoCE HCA reports
 * (ibv_get_device_list, ibv_query_device/_port/_gid/_pkey).
 */
#ifndef IBVD_QUERY_H
#define IBVD_QUERY_H

#include "ibverbsd.pb-c.h"

struct ibvd_call;
struct ibvd_device;
struct ibvd_port;

/* The attributes themselves, for the handlers and for ibvctl. */
void ibvd_device_attr(const struct ibvd_device *dev, Ibvd__DeviceAttr *attr);
void ibvd_port_attr(const struct ibvd_device *dev, const struct ibvd_port *port,
		    Ibvd__PortAttr *attr);

/* A device as LIST_DEVICES and OPEN_DEVICE describe it (strings point into dev). */
void ibvd_device_info(const struct ibvd_device *dev, Ibvd__DeviceInfo *info);

int ibvd_req_list_devices(struct ibvd_call *call);
int ibvd_req_query_device(struct ibvd_call *call);
int ibvd_req_query_port(struct ibvd_call *call);
int ibvd_req_query_gid_table(struct ibvd_call *call);
int ibvd_req_query_pkey(struct ibvd_call *call);

#endif /* IBVD_QUERY_H */
