/*
 * Frames of the client <-> daemon protocol (proto/PROTOCOL.md).
 *
 * One frame is one SOCK_SEQPACKET message: a fixed 16-byte header followed
 * by a protobuf-c payload of exactly hdr.len bytes.  File descriptors travel
 * as SCM_RIGHTS on the same message, and only on types that expect them.
 * Both ends are on one host, so the header is in host byte order.
 */
#ifndef IBVD_FRAME_H
#define IBVD_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#define IBVD_FRAME_MAGIC	0x44564249u	/* "IBVD" in memory on LE hosts */
/*
 * 2: CQEs carry a completion timestamp (ring.h)
 * 3: ATTACH_MEMORY carries /proc/self/maps beside /proc/self/mem
 * 4: rings are carved from one arena per context (OPEN_DEVICE passes it;
 *    create replies place rings in it, RingPlace); REG_MR_SHARED
 * 5: CREATE_QP may make its CQs and channels and take a CM id's INIT
 *    attributes; CM_ACCEPT and CM_ESTABLISH may move that QP to RTS (an
 *    older daemon would ignore those fields, so the version says it)
 * 6: the context page's gid_gen: a library keeps a GID table while it
 *    stays (an older daemon never bumps it)
 * 7: CREATE_AH answers CreateAhReply, whose hop limit (a RoCE route's)
 *    the library writes into UD send WQEs, which the engine sends as is
 * 8: CM_TAKEN on the CM event socket: a request read frees its listener's
 *    backlog slot (an older library never says so)
 * 9: MODIFY_SRQ answers CreateSrqReply and IBV_SRQ_MAX_WR resizes; a
 *    library that follows a failed resize through QUERY_SRQ's place
 *    would find none in an older daemon's reply
 */
#define IBVD_PROTO_VERSION	9
#define IBVD_FRAME_MAX		65536u		/* header + payload */
#define IBVD_FRAME_MAX_FDS	4		/* a frame with more is refused */
/*
 * The most fds one message can carry (the kernel's SCM_MAX_FD, which no
 * user-space header exports).
 */
#define IBVD_KERNEL_SCM_MAX_FD	253

/* A reply has the request's type with this bit set. */
#define IBVD_REPLY		0x8000u

/*
 * Message types.  Numbered in blocks by family; a retired number is never
 * reused.  Bump IBVD_PROTO_VERSION when a payload or a shared ring's
 * layout changes incompatibly.
 */
enum ibvd_msg_type {
	IBVD_MSG_ERROR		= 0x0001,	/* reply only: Error */

	/* device discovery and contexts: 0x0100 */
	IBVD_MSG_LIST_DEVICES	= 0x0100,	/* Empty -> ListDevicesReply */
	IBVD_MSG_OPEN_DEVICE	= 0x0101,	/* OpenDevice -> OpenDeviceReply + 1 fd */
	IBVD_MSG_IMPORT_DEVICE	= 0x0102,	/* ImportDevice + 1 fd -> OpenDeviceReply + 4 fds, on that fd */

	/* queries: 0x0200 */
	IBVD_MSG_QUERY_DEVICE	= 0x0200,	/* Empty -> DeviceAttr */
	IBVD_MSG_QUERY_PORT	= 0x0201,	/* QueryPort -> PortAttr */
	IBVD_MSG_QUERY_GID_TABLE = 0x0202,	/* QueryGidTable -> GidTable */
	IBVD_MSG_QUERY_PKEY	= 0x0203,	/* QueryPkey -> Pkey */

	/* verbs objects: 0x0400 (payloads in proto/ibverbsd.proto) */
	IBVD_MSG_ATTACH_MEMORY	= 0x0400,	/* AttachMemory + 2 fds -> Empty */
	IBVD_MSG_ALLOC_PD	= 0x0410,	/* Empty -> Handle */
	IBVD_MSG_DEALLOC_PD	= 0x0411,	/* Handle -> Empty */
	IBVD_MSG_IMPORT_PD	= 0x0412,	/* Handle -> Empty */
	IBVD_MSG_REG_MR		= 0x0420,	/* RegMr -> RegMrReply */
	IBVD_MSG_REREG_MR	= 0x0421,	/* ReregMr -> RegMrReply */
	IBVD_MSG_DEREG_MR	= 0x0422,	/* Handle -> Empty */
	IBVD_MSG_ADVISE_MR	= 0x0423,	/* AdviseMr -> Empty */
	IBVD_MSG_REG_MR_SHARED	= 0x0424,	/* RegMr + 1 fd -> RegMrReply */
	IBVD_MSG_REREG_MR_SHARED = 0x0425,	/* ReregMr + 1 fd -> RegMrReply */
	IBVD_MSG_IMPORT_MR	= 0x0426,	/* ImportMr -> ImportMrReply */
	IBVD_MSG_ALLOC_MW	= 0x0428,	/* AllocMw -> AllocMwReply */
	IBVD_MSG_DEALLOC_MW	= 0x0429,	/* Handle -> Empty */
	IBVD_MSG_CREATE_COMP_CHANNEL = 0x0430,	/* Empty -> Handle + 1 fd */
	IBVD_MSG_DESTROY_COMP_CHANNEL = 0x0431,	/* Handle -> Empty */
	IBVD_MSG_CHANNEL_POKE	= 0x0432,	/* Handle -> Empty + 2 fds */
	IBVD_MSG_CREATE_CQ	= 0x0440,	/* CreateCq -> CreateCqReply + 1 fd */
	IBVD_MSG_RESIZE_CQ	= 0x0441,	/* ResizeCq -> CreateCqReply + 1 fd */
	IBVD_MSG_DESTROY_CQ	= 0x0442,	/* Handle -> Empty */
	IBVD_MSG_CREATE_QP	= 0x0450,	/* CreateQp -> CreateQpReply + 1 fd */
	IBVD_MSG_MODIFY_QP	= 0x0451,	/* ModifyQp -> Empty */
	IBVD_MSG_QUERY_QP	= 0x0452,	/* QueryQp -> QueryQpReply */
	IBVD_MSG_DESTROY_QP	= 0x0453,	/* Handle -> Empty */
	IBVD_MSG_OPEN_QP	= 0x0454,	/* OpenQp -> CreateQpReply (no fd) */
	IBVD_MSG_QP_DIRECT	= 0x0455,	/* Handle -> QpDirectReply + 1-3 fds */
	IBVD_MSG_QP_REMOTE_MR	= 0x0456,	/* QpRemoteMr -> QpRemoteMrReply + 1 fd */
	IBVD_MSG_QP_DIRECT_UD	= 0x0457,	/* QpDirectUd -> Empty */
	IBVD_MSG_QP_DIRECT_LEAVE = 0x0458,	/* Handle -> Empty */
	IBVD_MSG_QP_STAGING	= 0x0459,	/* Handle -> QpStagingReply */
	IBVD_MSG_CREATE_SRQ	= 0x0460,	/* CreateSrq -> CreateSrqReply + 1 fd */
	IBVD_MSG_MODIFY_SRQ	= 0x0461,	/* ModifySrq -> CreateSrqReply */
	IBVD_MSG_QUERY_SRQ	= 0x0462,	/* Handle -> SrqAttr */
	IBVD_MSG_DESTROY_SRQ	= 0x0463,	/* Handle -> Empty */
	IBVD_MSG_CREATE_AH	= 0x0470,	/* CreateAh -> CreateAhReply */
	IBVD_MSG_DESTROY_AH	= 0x0471,	/* Handle -> Empty */
	IBVD_MSG_OPEN_XRCD	= 0x0490,	/* OpenXrcd + 1 fd -> Handle */
	IBVD_MSG_CLOSE_XRCD	= 0x0491,	/* Handle -> Empty */
	IBVD_MSG_ALLOC_XRCD	= 0x0492,	/* Empty -> Handle: a private domain */
	IBVD_MSG_ALLOC_DM	= 0x04a0,	/* AllocDm -> DmReply + 1 fd */
	IBVD_MSG_FREE_DM	= 0x04a1,	/* Handle -> Empty */
	IBVD_MSG_IMPORT_DM	= 0x04a2,	/* Handle -> DmReply + 1 fd */
	IBVD_MSG_ATTACH_MCAST	= 0x0480,	/* Mcast -> Empty */
	IBVD_MSG_DETACH_MCAST	= 0x0481,	/* Mcast -> Empty */

	/* RDMA connection manager: 0x0500 (a CM session per event channel) */
	IBVD_MSG_CM_OPEN	= 0x0500,	/* Empty -> CmOpenReply + 1 fd (event socket) */
	IBVD_MSG_CM_CREATE_ID	= 0x0501,	/* CmCreateId -> CmId */
	IBVD_MSG_CM_DESTROY_ID	= 0x0502,	/* CmId -> Empty */
	IBVD_MSG_CM_BIND_ADDR	= 0x0503,	/* CmAddr (src) -> CmIdInfo */
	IBVD_MSG_CM_RESOLVE_ADDR = 0x0504,	/* CmAddr -> Empty; event later */
	IBVD_MSG_CM_RESOLVE_ROUTE = 0x0505,	/* CmAddr (timeout) -> Empty; event later */
	IBVD_MSG_CM_LISTEN	= 0x0506,	/* CmListen -> Empty */
	IBVD_MSG_CM_CONNECT	= 0x0507,	/* CmConnect -> Empty; events later */
	IBVD_MSG_CM_ACCEPT	= 0x0508,	/* CmConnect -> Empty */
	IBVD_MSG_CM_REJECT	= 0x0509,	/* CmReject -> Empty */
	IBVD_MSG_CM_ESTABLISH	= 0x050a,	/* CmId -> Empty (the RTU) */
	IBVD_MSG_CM_DISCONNECT	= 0x050b,	/* CmId -> Empty */
	IBVD_MSG_CM_INIT_QP_ATTR = 0x050c,	/* CmInitQpAttr -> CmInitQpAttrReply */
	IBVD_MSG_CM_QUERY	= 0x050d,	/* CmId -> CmIdInfo */
	IBVD_MSG_CM_SET_OPTION	= 0x050e,	/* CmSetOption -> Empty */
	IBVD_MSG_CM_MIGRATE_ID	= 0x050f,	/* CmMigrate -> CmId (its handle here) */
	IBVD_MSG_CM_JOIN_MCAST	= 0x0510,	/* CmMcast -> Empty; event later */
	IBVD_MSG_CM_LEAVE_MCAST	= 0x0511,	/* CmMcast -> Empty */
	IBVD_MSG_CM_NOTIFY	= 0x0512,	/* CmNotify -> Empty */
	IBVD_MSG_CM_EVENT	= 0x0580,	/* daemon -> client on the event socket: CmEvent */
	IBVD_MSG_CM_TAKEN	= 0x0581,	/* client -> daemon on it, no payload and no
						 * reply: the app read the request of id req_id */

	/* daemon -> client on the async socket: 0x0300 */
	IBVD_MSG_ASYNC_EVENT	= 0x0300,	/* AsyncEvent */
	/* daemon -> client on a completion channel's socket */
	IBVD_MSG_COMP_EVENT	= 0x0301,	/* CompEvent */

	/* administration: 0x0f00 */
	IBVD_MSG_ADMIN		= 0x0f00,	/* AdminRequest -> AdminReply */
};

struct ibvd_frame_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t req_id;
	uint32_t len;		/* payload bytes after the header */
};

#define IBVD_FRAME_PAYLOAD_MAX	(IBVD_FRAME_MAX - sizeof(struct ibvd_frame_hdr))

/* A received frame.  payload points into the caller's buffer. */
struct ibvd_frame {
	struct ibvd_frame_hdr hdr;
	const uint8_t *payload;
	int fds[IBVD_FRAME_MAX_FDS];
	unsigned int nfds;
	/*
	 * Its sender as the kernel saw it when it was sent (SCM_CREDENTIALS),
	 * if the receiving socket has SO_PASSCRED: the sending process and
	 * its real uid and gid then, which may no longer be those of the
	 * process that connected.  sender_known is false otherwise.
	 */
	bool sender_known;
	pid_t sender_pid;
	uid_t sender_uid;
	gid_t sender_gid;
};

/*
 * Send one frame: header, msg packed (msg may be NULL for an empty payload),
 * and nfds descriptors.  Blocking or not follows the socket (flags are
 * MSG_NOSIGNAL plus extra_flags, e.g. MSG_DONTWAIT).
 * Returns 0 or a negative errno (-EMSGSIZE if the packed payload is too big).
 */
int ibvd_frame_send(int sock, uint16_t type, uint32_t req_id,
		    const ProtobufCMessage *msg, const int *fds,
		    unsigned int nfds, int extra_flags);

/*
 * One frame without fds packed whole into a new buffer (*buf, the
 * caller's to free; *len its bytes), as ibvd_frame_send would send it.
 * 0, -EMSGSIZE or -ENOMEM.
 */
int ibvd_frame_pack(uint16_t type, uint32_t req_id,
		    const ProtobufCMessage *msg, uint8_t **buf, size_t *len);

/*
 * Receive one frame into buf (at least IBVD_FRAME_MAX bytes).
 * Returns 1 with *frame filled, 0 on orderly EOF, or a negative errno:
 *   -EAGAIN     nothing to read (non-blocking socket or MSG_DONTWAIT)
 *   -EMSGSIZE   frame larger than IBVD_FRAME_MAX, or more than
 *               IBVD_FRAME_MAX_FDS fds
 *   -EBADMSG    short header, bad magic, or len disagreeing with the size
 *   -EPROTO     unsupported protocol version
 *   -EMFILE     the frame came whole, but this process had no fd number
 *               for (some of) its fds: *frame is parsed (hdr, payload)
 *               with no fds, so that the caller can tell what it was
 * On any error every received fd has been closed (ibvd_frame_close_fd).
 * All fds are received with MSG_CMSG_CLOEXEC.
 */
int ibvd_frame_recv(int sock, void *buf, size_t bufsize,
		    struct ibvd_frame *frame, int extra_flags);

/*
 * The header and payload of one received message of size bytes in buf
 * (what ibvd_frame_recv does after recvmsg; fds are left alone).
 * Returns 0 with frame->hdr and frame->payload set, or -EBADMSG (short
 * header, bad magic, len disagreeing with size) or -EPROTO (version).
 */
int ibvd_frame_parse(const void *buf, size_t size, struct ibvd_frame *frame);

/* Close the fds still held by frame (ibvd_frame_close_fd) and forget them. */
void ibvd_frame_close_fds(struct ibvd_frame *frame);

/*
 * Close an fd that came with a frame: close() unless a hook is set; a
 * negative fd (taken by its handler) is skipped.
 */
void ibvd_frame_close_fd(int fd);

/*
 * Route every ibvd_frame_close_fd() through hook instead of close().  The
 * daemon sets one at startup, before any frame arrives: closing the last
 * reference to a client's file can block (a TCP socket lingering on unsent
 * data, a FUSE file), and its control thread must not.  Clients leave it
 * unset.
 */
void ibvd_frame_set_close_hook(void (*hook)(int fd));

/* Send an IBVD_MSG_ERROR reply with a positive errno and a short message. */
int ibvd_frame_send_error(int sock, uint32_t req_id, int errnum,
			  const char *message, int extra_flags);

/*
 * CmEvent.event values beyond enum rdma_cm_event_type that only the
 * library sees: the passive side's reply to a connect (proto/CM.md step 4).
 */
#define IBVD_CM_EVENT_CONNECT_REPLY	0x100

/*
 * Wait until fd has something to read (or its peer went): 0, -errno, or
 * -EAGAIN at once when the app made fd non-blocking and nothing is
 * pending.  A blocking `socket` that is all there is to wait for is
 * waited on in a recv that peeks, as rdma-core waits in a read of a
 * kernel event file: a signal whose handler has SA_RESTART does not end
 * the wait, one without (qperf's SIGALRM) ends it with -EINTR.  Anything
 * else is polled, and any signal ends that with -EINTR.
 */
int ibvd_wait_readable(int fd, bool socket);

/* Human-readable name of a message type, for logs ("LIST_DEVICES"). */
const char *ibvd_msg_type_name(uint16_t type);

#endif /* IBVD_FRAME_H */
