/*
 * The data engine: the threads that play the NIC (DESIGN.md §3.2, §3.4).
 *
 * Engine threads consume the work queues clients fill in shared memory
 * (common/ring.h), move bytes between registered memory of the processes
 * involved and write completions.  Each device context is served by one
 * engine thread, chosen round-robin when the context opens; a thread polls
 * while there is work, spins for a bounded idle budget, then sleeps until
 * a client kicks its context's eventfd or a timer (RNR or transport retry)
 * expires.
 *
 * This is what the rest of the daemon calls.  All of it runs on the control
 * thread.
 */
#ifndef IBVD_ENGINE_H
#define IBVD_ENGINE_H

struct ibvd_context;
struct ibvd_qp;

/* Start nthreads engine threads (0 means 1).  0 or a negative errno. */
int ibvd_engine_start(unsigned int nthreads);

/* Stop and join every engine thread; contexts must be gone already. */
void ibvd_engine_stop(void);

/*
 * OPEN_DEVICE: give ctx its context page (doorbells, ring.h) and kick
 * eventfd, and attach it to an engine thread.  On success *page_fd is a
 * sealed memfd of IBVD_CTX_PAGE_SIZE bytes for the reply (the caller closes
 * it after sending) and *kick_fd the eventfd, which stays the engine's
 * (send it, do not close it).  0 or a negative errno.
 */
int ibvd_engine_ctx_open(struct ibvd_context *ctx, int *page_fd, int *kick_fd);

/*
 * Context teardown, first step: no engine thread serves ctx any more once
 * this returns (takes ibvd_objects_lock for writing).  Its objects may still
 * be reached by other contexts' traffic until they are destroyed.
 */
void ibvd_engine_ctx_detach(struct ibvd_context *ctx);

/* Context teardown, last step, after every object of ctx is destroyed. */
void ibvd_engine_ctx_free(struct ibvd_context *ctx);

/*
 * The control path changed qp (modify_qp: a new state, an ERR flush, SQD,
 * or a RESET that rewound its queues); make its engine thread look at it.
 * Callable with or without ibvd_objects_lock held for writing.
 */
void ibvd_engine_qp_kick(struct ibvd_qp *qp);

/*
 * DESTROY_QP, objects lock held for writing: send what the client posted
 * to a UD QP and the engine has not run yet.
 */
void ibvd_engine_qp_finish_ud(struct ibvd_qp *qp);

#endif /* IBVD_ENGINE_H */
