/*
 * Completion channels: CREATE_COMP_CHANNEL, DESTROY_COMP_CHANNEL.
 *
 * A channel is a SOCK_SEQPACKET pair: the client polls its end (that is
 * ibv_comp_channel.fd), the engine sends one CompEvent per notification on
 * ours.  Ours is non-blocking, so a client that does not read its events
 * can never stall an engine thread, and shut for reading, so a client that
 * writes to its end gets EPIPE instead of filling our buffer; its send
 * buffer holds an event per CQ on the channel and a few more
 * (size_buffer).
 *
 * A channel whose CQs receive from transit rings also gets a wake-up
 * pair (CHANNEL_POKE; common/transit.h, "Blocking"): a stream socket pair
 * whose reading end the library watches beside ours, and whose writing
 * end goes to the senders of those rings (QP_DIRECT), so that a sender
 * wakes a sleeping receiver itself, with no engine thread in between.
 * What comes through it says nothing: the receiver's library looks at
 * its armed CQs' rings on any byte, so a sender that writes garbage, or
 * fills the pair, or shuts it, only wakes it, or sends its own messages
 * the engine's way.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>

#include "async.h"
#include "context.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "tenant/tenant.h"
#include "verbs.h"

static int send_event(int sock, uint32_t cq_handle)
{
	Ibvd__CompEvent ev = IBVD__COMP_EVENT__INIT;

	ev.cq = cq_handle;
	return ibvd_frame_send(sock, IBVD_MSG_COMP_EVENT, 0, &ev.base, NULL, 0,
			       MSG_DONTWAIT);
}

void ibvd_channel_fire(const struct ibvd_cq *cq)
{
	struct ibvd_tenant_dev *account = cq->channel->ctx->handles.charge_owner;
	struct ibvd_cq_client *cp = cq->ring.client_page;
	int sock = cq->channel->sock;

	/*
	 * Never blocks: a full socket means the app armed again and again
	 * without reading, and what it has not read will wake it.  What
	 * does not fit is owed (ring.h): the library hands it out before
	 * the frames, which keep the channel readable meanwhile.
	 */
	if (send_event(sock, cq->handle) == 0)
		return;
	/* an event merged into one owed already is dropped, and counted */
	if (__atomic_exchange_n(&cp->owed, 1, __ATOMIC_SEQ_CST)) {
		if (account)
			ibvd_tenant_dev_event_dropped(account);
		return;
	}
	/*
	 * The app may have read the socket empty since the send failed,
	 * and then found nothing owed: a frame naming no CQ makes it look
	 * again.  If that does not fit either, frames are still unread.
	 */
	(void)send_event(sock, 0);
}

/*
 * Our end's send buffer is kernel memory the daemon holds for a client
 * that does not read its events, up to net.core.wmem_default (212 KB, 278
 * events) if left alone, for each of a uid's thousands of channels.  So
 * it holds what a client that reads needs: an event for each CQ the
 * channel ever had at once (one per arming; a CQ destroyed leaves its
 * unread events queued, so the buffer never shrinks), and 32 more for
 * one that arms again before it reads.  An event that does not fit is
 * owed (ibvd_channel_fire).  The kernel counts an event as about
 * 768 bytes, doubles what it is asked for, and caps SO_SNDBUF at
 * net.core.wmem_max (SO_SNDBUFFORCE, with CAP_NET_ADMIN, goes past it).
 */
#define CHANNEL_EVENT_BYTES	1024u
#define CHANNEL_SPARE_EVENTS	32u

static void size_buffer(int ours, unsigned int cqs)
{
	unsigned int events = cqs + CHANNEL_SPARE_EVENTS;
	int bytes = (int)(events * (CHANNEL_EVENT_BYTES / 2));

	/* best effort: a failure leaves what it had */
	if (setsockopt(ours, SOL_SOCKET, SO_SNDBUFFORCE, &bytes,
		       sizeof(bytes)) < 0)
		(void)setsockopt(ours, SOL_SOCKET, SO_SNDBUF, &bytes,
				 sizeof(bytes));
}

void ibvd_channel_cqs(struct ibvd_comp_channel *ch, int delta)
{
	ch->users += (unsigned int)delta;
	if (ch->users > ch->most_users) {
		ch->most_users = ch->users;
		size_buffer(ch->sock, ch->most_users);
	}
}

static int make_pair(int *ours, int *theirs)
{
	int sv[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	size_buffer(sv[0], 0);
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0 || shutdown(sv[0], SHUT_RD) < 0) {
		ret = -errno;
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	*ours = sv[0];
	*theirs = sv[1];
	return 0;
}

/*
 * Spare pairs, made while the control thread has nothing else to do.  A
 * socket pair costs it about 25 us here (perf during cmtime: two of them
 * were most of CREATE_QP's 52 us, librdmacm making two channels per QP),
 * and a client making connections waits for every one.  Touched by the
 * control thread only.
 */
#define SPARE_PAIRS	16

static struct {
	int ours, theirs;
} spares[SPARE_PAIRS];
static unsigned int nspares;

bool ibvd_channel_spare_make(void)
{
	if (nspares == SPARE_PAIRS)
		return false;
	if (make_pair(&spares[nspares].ours, &spares[nspares].theirs) < 0)
		return false;
	nspares++;
	return true;
}

void ibvd_channel_spares_free(void)
{
	while (nspares) {
		nspares--;
		close(spares[nspares].ours);
		close(spares[nspares].theirs);
	}
}

/* A pair nobody used: a spare again, or closed if the spares are full. */
static void pair_unused(int ours, int theirs)
{
	if (nspares == SPARE_PAIRS) {
		close(ours);
		close(theirs);
		return;
	}
	spares[nspares].ours = ours;
	spares[nspares].theirs = theirs;
	nspares++;
}

static int channel_pair(int *ours, int *theirs)
{
	if (!nspares)
		return make_pair(ours, theirs);
	nspares--;
	*ours = spares[nspares].ours;
	*theirs = spares[nspares].theirs;
	return 0;
}

/*
 * A new wake-up pair for ch, whose writing end takes no data back: bytes
 * written into the reading end would wait in the writing end, which the
 * daemon holds for as long as the channel lives, for nobody (a client
 * could fill it, at its own buffer size, and let go).
 */
static int poke_pair(struct ibvd_comp_channel *ch)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv) < 0)
		return -errno;
	if (shutdown(sv[1], SHUT_RD) < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (ch->poke[0] >= 0)
		close(ch->poke[0]);
	if (ch->poke[1] >= 0)
		close(ch->poke[1]);
	ch->poke[0] = sv[0];
	ch->poke[1] = sv[1];
	return 0;
}

/* The wake-up pair of ch, made the first time someone asks (-errno). */
int ibvd_channel_poke(struct ibvd_comp_channel *ch)
{
	int ret;

	if (ch->poke[1] >= 0)
		return ch->poke[1];
	ret = poke_pair(ch);
	return ret < 0 ? ret : ch->poke[1];
}

int ibvd_req_channel_poke(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_comp_channel *ch =
		ibvd_handle_lookup(&ctx->handles, req->handle, IBVD_OBJ_COMP_CHANNEL);
	Ibvd__Empty reply = IBVD__EMPTY__INIT;
	int ret;

	if (!ch)
		return ibvd_call_error(call, -EINVAL, "no completion channel %#x",
				       req->handle);
	/*
	 * The reading end goes to the channel's owner and stays there: what
	 * is written to the pair then waits in the owner's socket, not in
	 * one the daemon keeps.  Asked again (its first answer was lost),
	 * the owner gets a new pair, and senders holding the old one fall
	 * back to the engine's wake-ups.
	 */
	ret = ch->poke[0] >= 0 || ch->poke[1] < 0 ? ibvd_channel_poke(ch) :
						     poke_pair(ch);
	if (ret < 0)
		return ibvd_call_error(call, ret, "channel %#x: no wake-up pair",
				       req->handle);
	ret = ibvd_call_reply(call, &reply.base, ch->poke, 2);
	if (ret == 0 && ch->poke[0] >= 0) {
		close(ch->poke[0]);
		ch->poke[0] = -1;
	}
	return ret;
}

static void channel_close(struct ibvd_comp_channel *ch)
{
	if (ch->poke[0] >= 0)
		close(ch->poke[0]);
	if (ch->poke[1] >= 0)
		close(ch->poke[1]);
	free(ch);
}

int ibvd_channel_new(struct ibvd_call *call, struct ibvd_comp_channel **ret_ch,
		     int *theirs)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_comp_channel *ch = calloc(1, sizeof(*ch));
	int ret;

	if (!ch)
		return -ENOMEM;
	ch->ctx = ctx;
	ch->poke[0] = ch->poke[1] = -1;
	ret = channel_pair(&ch->sock, theirs);
	if (ret < 0) {
		free(ch);
		return ibvd_call_error(call, ret, "cannot create the channel socket");
	}
	ret = ibvd_obj_add(ctx, IBVD_OBJ_COMP_CHANNEL, ch, &ch->handle);
	if (ret < 0) {
		pair_unused(ch->sock, *theirs);
		free(ch);
		return ibvd_call_error(call, ret, "too many completion channels");
	}
	*ret_ch = ch;
	return 0;
}

int ibvd_req_create_comp_channel(struct ibvd_call *call)
{
	Ibvd__Handle reply = IBVD__HANDLE__INIT;
	struct ibvd_comp_channel *ch;
	int theirs, ret;

	ret = ibvd_channel_new(call, &ch, &theirs);
	if (ret < 0)
		return ret;
	reply.handle = ch->handle;
	ret = ibvd_call_reply(call, &reply.base, &theirs, 1);
	close(theirs);
	if (ret < 0 && ibvd_call_ctx(call))
		ibvd_channel_destroy(ch);
	return ret;
}

/*
 * No CQ uses ch any more, so no engine thread can be sending on it; the
 * objects lock is not needed (the teardown holds it anyway).
 */
void ibvd_channel_destroy(struct ibvd_comp_channel *ch)
{
	ibvd_handle_remove(&ch->ctx->handles, ch->handle, IBVD_OBJ_COMP_CHANNEL);
	close(ch->sock);
	channel_close(ch);
}

void ibvd_channel_unmake(struct ibvd_comp_channel *ch, int theirs)
{
	ibvd_handle_remove(&ch->ctx->handles, ch->handle, IBVD_OBJ_COMP_CHANNEL);
	pair_unused(ch->sock, theirs);
	channel_close(ch);
}

int ibvd_req_destroy_comp_channel(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_comp_channel *ch =
		ibvd_handle_lookup(&ctx->handles, req->handle, IBVD_OBJ_COMP_CHANNEL);

	if (!ch)
		return ibvd_call_error(call, -EINVAL, "no completion channel %#x",
				       req->handle);
	if (ch->users)
		return ibvd_call_error(call, -EBUSY,
				       "completion channel %#x is used by %u CQs",
				       req->handle, ch->users);
	ibvd_channel_destroy(ch);
	return 0;
}
