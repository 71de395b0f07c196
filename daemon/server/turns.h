/*
 * Turns on the control thread: tenants first, then their sessions.
 *
 * A session whose socket has a frame waiting is queued behind its uid's
 * other ready sessions (read events only queue it); after each pass of
 * the event loop ibvd_turns_serve() hands out turns, one frame each,
 * round robin over the uids with a session ready, and within a uid over
 * its ready sessions in the order they became ready.  So a uid's share
 * of the control thread is one turn in each round whatever its number
 * of sessions, while a uid alone on the daemon (no other uid holds a
 * session) is served much as before: its ready sessions one after the
 * other in one pass of the loop, for up to 1 ms, then the loop looks
 * for newcomers.  A session has at most one frame handled at a time, so
 * its requests are answered in order.
 */
#ifndef IBVD_TURNS_H
#define IBVD_TURNS_H

struct ibvd_session;

/* s's place among its uid's sessions; -ENOMEM.  At session setup. */
int ibvd_turns_join(struct ibvd_session *s);

/* s goes away (closed): out of the queue, its uid's place dropped. */
void ibvd_turns_leave(struct ibvd_session *s);

/* s has a frame waiting: queue it, unless it already is. */
void ibvd_turns_ready(struct ibvd_session *s);

/* s stops being read (paused): out of the queue. */
void ibvd_turns_unready(struct ibvd_session *s);

/*
 * Give out the turns of one round, after a pass of the loop: one to each
 * uid with a session ready, each handling one frame of the uid's next
 * session; a uid alone on the daemon has turns for its ready sessions
 * in order for up to 1 ms.  Sessions not served stay queued: their sockets stay
 * readable, so the next pass of the loop does not sleep.
 */
void ibvd_turns_serve(void);

#endif /* IBVD_TURNS_H */
