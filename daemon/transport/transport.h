/*
 * The transports this daemon has (engine/transport.h is the interface
 * they implement).  A device gets one when it is made (devices.c).
 *
 * - local: both QPs are this daemon's; the engine thread of the requester
 *   executes the message at the responder directly (local.c).
 *
 * Layer transport/: each transport implements engine/transport.h and
 * calls the engine's responder side through it, core/ and common/;
 * never the control side.
 */
#ifndef IBVD_TRANSPORT_H
#define IBVD_TRANSPORT_H

struct ibvd_transport;

extern const struct ibvd_transport ibvd_transport_local;
extern const struct ibvd_transport ibvd_transport_roce;

#endif /* IBVD_TRANSPORT_H */
