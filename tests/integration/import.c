/*
 * import-helper: sharing one device context between two processes of two
 * uids (import.sh), as ibv_import_device(3), ibv_import_pd(3),
 * ibv_import_mr(3) and ibv_import_dm(3) define it.
 *
 *   import-helper owner DIR      opens the device, makes a PD, an MR,
 *                                device memory and a QP, hands its cmd_fd
 *                                over DIR/cmd.sock
 *   import-helper importer DIR   imports the context, the PD, the MR and
 *                                the device memory, makes a QP of its own
 *                                on that PD and talks to the owner's QP
 *
 * What it shows: the importer's work requests reach the owner's memory
 * through the imported MR's lkey (its memory is the owner's, addressed by
 * iova), its own MR is its own memory, the imported device memory is the
 * owner's (each reads what the other wrote), both processes' QPs are one
 * context's, bad handles and fds fail cleanly, the context outlives the
 * owner's ibv_close_device while the importer still uses it, and the
 * importer hears the async events about its own objects.
 *
 *   import-helper grant-owner DIR, grant-importer DIR
 *                                the importer registers an MR on a file of
 *                                its own (a memfd) in the owner's context,
 *                                then leaves it; the owner's RDMA into it
 *                                goes through the engine, and the owner's
 *                                library is never granted the file, as it
 *                                is granted the owner's own
 *   import-helper standin-owner DIR, standin-importer DIR SUB
 *                                the owner's context, with objects, is
 *                                imported by a process of the owner's uid
 *                                (SUB "a") and then one of another (SUB
 *                                "b"); the owner closes, and import.sh
 *                                finds the objects under uid a's process
 *                                in ibvctl client show
 *
 * The two meet through files in DIR (vt_put/vt_get).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <infiniband/verbs.h>

#include "vt.h"

#define HALF		4096u
#define SEED_SRC	11u	/* owner's first half: what the importer SENDs */
#define SEED_WRITE	22u	/* importer's WRITE into the owner's second half */
#define SEED_LATE	33u	/* importer's WRITE after the owner closed */
#define SEED_DM		44u	/* owner's device memory, first half */
#define SEED_DM_IMP	55u	/* the importer's, into its second half */
#define SEED_THEIRS	66u	/* the importer's file, as it left it */
#define SEED_OVER	77u	/* the owner's WRITEs into either file */

#define GRANT_OURS	"import-grant-ours"	/* the owner's memfd */
#define GRANT_THEIRS	"import-grant-theirs"	/* the importer's */

static void sock_path(const char *dir, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	vt_assert(strlen(dir) + 10 < sizeof(sun->sun_path), "%s: too long", dir);
	snprintf(sun->sun_path, sizeof(sun->sun_path), "%s/cmd.sock", dir);
}

/* Owner: hand fd to the first process that connects to DIR/cmd.sock. */
static void give_fd(const char *dir, int fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct sockaddr_un sun;
	char byte = 'f';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *c;
	int ls, cs;

	sock_path(dir, &sun);
	ls = socket(AF_UNIX, SOCK_STREAM, 0);
	vt_assert(ls >= 0, "socket: %s", strerror(errno));
	vt_assert(bind(ls, (struct sockaddr *)&sun, sizeof(sun)) == 0,
		  "bind %s: %s", sun.sun_path, strerror(errno));
	vt_assert(chmod(sun.sun_path, 0777) == 0, "chmod: %s", strerror(errno));
	vt_assert(listen(ls, 1) == 0, "listen: %s", strerror(errno));
	vt_put(dir, "listening", "1\n");
	/* an importer that died before connecting fails the test, not hangs it */
	vt_assert(poll(&(struct pollfd){ .fd = ls, .events = POLLIN }, 1,
		       vt_tmo_ms()) == 1, "no importer connected");
	cs = accept(ls, NULL, NULL);
	vt_assert(cs >= 0, "accept: %s", strerror(errno));
	memset(&cm, 0, sizeof(cm));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	vt_assert(sendmsg(cs, &mh, 0) == 1, "sendmsg: %s", strerror(errno));
	close(cs);
	close(ls);
}

/* Importer: the fd the owner hands over. */
static int take_fd(const char *dir)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct sockaddr_un sun;
	char byte, buf[8];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *c;
	int s, fd;

	vt_assert(vt_get(dir, "listening", buf, sizeof(buf), vt_tmo_ms()),
		  "the owner never listened");
	sock_path(dir, &sun);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	vt_assert(s >= 0, "socket: %s", strerror(errno));
	vt_assert(connect(s, (struct sockaddr *)&sun, sizeof(sun)) == 0,
		  "connect %s: %s", sun.sun_path, strerror(errno));
	vt_assert(recvmsg(s, &mh, 0) == 1, "recvmsg: %s", strerror(errno));
	c = CMSG_FIRSTHDR(&mh);
	vt_assert(c && c->cmsg_type == SCM_RIGHTS, "no fd came");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	close(s);
	return fd;
}

/* ---- the owner ---------------------------------------------------------- */

/*
 * The owner's objects outlive its ibv_close_device (the importer still
 * uses them), so their structs are never freed here, as with rdma-core:
 * kept where the leak checker sees them.
 */
static struct ibv_mr *owner_mr, *owner_rmr;
static struct ibv_cq *owner_cq;
static struct ibv_qp *owner_qp;
static struct ibv_dm *owner_dm;

static int owner(const char *dir)
{
	struct vt_qp_opts o = { 0 };
	struct vt_addr me, peer;
	struct vt_dev d;
	struct ibv_wc wc;
	char buf[256];
	int fd;

	vt_open(&d);
	owner_mr = vt_reg(d.pd, 2 * HALF, VT_ACCESS_ALL);
	owner_rmr = vt_reg(d.pd, HALF, IBV_ACCESS_LOCAL_WRITE);
	vt_fill(owner_mr->addr, HALF, 0, SEED_SRC);
	owner_dm = ibv_alloc_dm(d.ctx, &(struct ibv_alloc_dm_attr){ .length = 2 * HALF });
	vt_assert(owner_dm, "ibv_alloc_dm: %s", strerror(errno));
	vt_fill(buf, sizeof(buf), 0, SEED_DM);
	vt_assert(ibv_memcpy_to_dm(owner_dm, 0, buf, sizeof(buf)) == 0,
		  "ibv_memcpy_to_dm");
	owner_cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	vt_assert(owner_cq, "ibv_create_cq: %s", strerror(errno));
	owner_qp = vt_qp(&d, owner_cq, owner_cq, &o);
	vt_qp_addr(&d, owner_qp, &o, &me);
	vt_addr_str(&me, buf, sizeof(buf));
	vt_put(dir, "owner", "%u %u %u %u %llu %u %s\n", d.pd->handle, owner_mr->handle,
	       owner_mr->lkey, owner_mr->rkey, (unsigned long long)(uintptr_t)owner_mr->addr,
	       owner_dm->handle, buf);
	fd = dup(d.ctx->cmd_fd);
	vt_assert(fd >= 0, "dup: %s", strerror(errno));
	give_fd(dir, fd);
	close(fd);

	vt_assert(vt_get(dir, "importer", buf, sizeof(buf), vt_tmo_ms()),
		  "the importer never made its QP");
	vt_assert(vt_addr_parse(buf, &peer) == 0, "bad address '%s'", buf);
	vt_connect(&d, owner_qp, &peer, &o);
	vt_recv(owner_qp, 1, owner_rmr->addr, HALF, owner_rmr->lkey);
	vt_put(dir, "ready", "1\n");

	vt_expect_ok(owner_cq, &wc, 1, IBV_WC_RECV, "the importer's SEND");
	vt_assert(wc.byte_len == HALF, "SEND of %u bytes", wc.byte_len);
	vt_expect_pat(owner_rmr->addr, HALF, 0, SEED_SRC,
		      "the SEND the importer made from our MR, by its imported lkey");
	vt_assert(vt_get(dir, "sent", buf, sizeof(buf), vt_tmo_ms()),
		  "the importer never finished sending");
	vt_expect_pat((uint8_t *)owner_mr->addr + HALF, HALF, 0, SEED_WRITE,
		      "the importer's WRITE from its own MR");
	vt_assert(ibv_memcpy_from_dm(owner_rmr->addr, owner_dm, HALF, HALF) == 0,
		  "ibv_memcpy_from_dm");
	vt_expect_pat(owner_rmr->addr, HALF, 0, SEED_DM_IMP,
		      "what the importer copied into our device memory");
	printf("owner: the importer's SEND, WRITE and device memory copy landed\n");

	/* Our close leaves the context to the importer: our objects stay. */
	vt_assert(ibv_close_device(d.ctx) == 0, "ibv_close_device: %s",
		  strerror(errno));
	vt_put(dir, "closed", "1\n");
	vt_assert(vt_get(dir, "late", buf, sizeof(buf), vt_tmo_ms()),
		  "the importer never wrote after our close");
	vt_expect_pat(owner_mr->addr, HALF, 0, SEED_LATE,
		      "the importer's WRITE after our ibv_close_device");
	printf("owner: after our ibv_close_device the importer still wrote into our MR\n");
	vt_put(dir, "done", "1\n");
	return 0;
}

/* ---- the importer ------------------------------------------------------- */

/* Bad fds and handles fail cleanly, with the errno the man pages imply. */
static void bad_imports(struct ibv_context *ctx, struct ibv_pd *pd,
			uint32_t mr_handle)
{
	struct ibv_pd *other;
	int p[2];

	errno = 0;
	vt_assert(!ibv_import_device(-1) && errno == EBADF,
		  "import_device(-1): errno %d", errno);
	vt_assert(pipe(p) == 0, "pipe: %s", strerror(errno));
	errno = 0;
	vt_assert(!ibv_import_device(p[0]) && errno == EINVAL,
		  "import_device(a pipe): errno %d", errno);
	close(p[0]);
	close(p[1]);
	errno = 0;
	vt_assert(!ibv_import_pd(ctx, 0xdeadbeef) && errno == EINVAL,
		  "import_pd(bad handle): errno %d", errno);
	errno = 0;
	vt_assert(!ibv_import_mr(pd, 0xdeadbeef) && errno == EINVAL,
		  "import_mr(bad handle): errno %d", errno);
	errno = 0;
	vt_assert(!ibv_import_dm(ctx, 0xdeadbeef) && errno == EINVAL,
		  "import_dm(bad handle): errno %d", errno);
	other = ibv_alloc_pd(ctx);
	vt_assert(other, "ibv_alloc_pd: %s", strerror(errno));
	errno = 0;
	vt_assert(!ibv_import_mr(other, mr_handle) && errno == EINVAL,
		  "import_mr on another PD: errno %d", errno);
	vt_assert(ibv_dealloc_pd(other) == 0, "ibv_dealloc_pd");
	printf("importer: bad fds and handles fail cleanly\n");
}

/* RTS -> SQD, asking for IBV_EVENT_SQ_DRAINED. */
static void drain_sq(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD,
				 .en_sqd_async_notify = 1 };

	vt_assert(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY) == 0,
		  "modify to SQD: %s", strerror(errno));
}

/*
 * ibv_unimport_pd before the MR imported on it goes (rdma-core lets go of
 * the PD's struct at once and its MR never looks at it again): the later
 * ibv_unimport_mr must not write into the freed struct.  The PD's memory
 * is handed out again right after the unimport; whatever of it comes back
 * to us is filled and must stay as we filled it.
 */
#define REUSE_TRIES	16

static void unimport_pd_first(struct ibv_context *ctx, unsigned int pd_handle,
			      unsigned int mr_handle)
{
	unsigned char *again[REUSE_TRIES];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	size_t size;
	int i, j, reused = 0;

	pd = ibv_import_pd(ctx, pd_handle);
	vt_assert(pd, "ibv_import_pd: %s", strerror(errno));
	mr = ibv_import_mr(pd, mr_handle);
	vt_assert(mr, "ibv_import_mr: %s", strerror(errno));
	size = malloc_usable_size(pd);
	ibv_unimport_pd(pd);
	for (i = 0; i < REUSE_TRIES; i++) {
		again[i] = malloc(size);
		vt_assert(again[i], "malloc");
		memset(again[i], 0x5a, size);
		reused |= (void *)again[i] == (void *)pd;
	}
	ibv_unimport_mr(mr);
	for (i = 0; i < REUSE_TRIES; i++) {
		for (j = 0; j < (int)size; j++)
			vt_assert(again[i][j] == 0x5a,
				  "ibv_unimport_mr wrote byte %d of memory freed "
				  "by ibv_unimport_pd and allocated again (%#x)",
				  j, again[i][j]);
		free(again[i]);
	}
	printf("importer: ibv_unimport_pd before ibv_unimport_mr%s\n",
	       reused ? ", the PD's memory allocated again in between" : "");
}

static int importer(const char *dir)
{
	unsigned int pd_handle, mr_handle, lkey, rkey, dm_handle;
	unsigned long long raddr;
	struct vt_qp_opts o = { 0 };
	struct vt_addr me, peer;
	struct vt_dev d = { 0 };
	struct ibv_mr *imr, *mr;
	struct ibv_dm *idm;
	struct ibv_sge sge;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	char buf[256], addr[200];
	int fd;

	fd = take_fd(dir);
	vt_assert(vt_get(dir, "owner", buf, sizeof(buf), vt_tmo_ms()),
		  "no word from the owner");
	vt_assert(sscanf(buf, "%u %u %u %u %llu %u %199[^\n]", &pd_handle,
			 &mr_handle, &lkey, &rkey, &raddr, &dm_handle, addr) == 7,
		  "bad owner line '%s'", buf);
	vt_assert(vt_addr_parse(addr, &peer) == 0, "bad address '%s'", addr);

	d.ctx = ibv_import_device(fd);
	vt_assert(d.ctx, "ibv_import_device: %s", strerror(errno));
	d.pd = ibv_import_pd(d.ctx, pd_handle);
	vt_assert(d.pd, "ibv_import_pd: %s", strerror(errno));
	vt_assert(d.pd->handle == pd_handle, "imported PD handle");
	d.port_num = 1;
	vt_assert(ibv_query_device(d.ctx, &d.attr) == 0, "ibv_query_device");
	vt_assert(ibv_query_port(d.ctx, 1, &d.port) == 0, "ibv_query_port");
	vt_assert(ibv_query_gid(d.ctx, 1, 0, &d.gid) == 0, "ibv_query_gid");
	imr = ibv_import_mr(d.pd, mr_handle);
	vt_assert(imr, "ibv_import_mr: %s", strerror(errno));
	vt_assert(imr->lkey == lkey && imr->rkey == rkey && imr->length == 2 * HALF &&
		  imr->addr == NULL && imr->pd == d.pd,
		  "imported MR: lkey %#x rkey %#x length %zu addr %p",
		  imr->lkey, imr->rkey, imr->length, imr->addr);
	bad_imports(d.ctx, d.pd, mr_handle);
	/* Another context's MR: rdma-core rereg's only what it registered. */
	errno = 0;
	vt_assert(ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT &&
		  errno == EINVAL, "ibv_rereg_mr of an imported MR: %s",
		  strerror(errno));
	idm = ibv_import_dm(d.ctx, dm_handle);
	vt_assert(idm, "ibv_import_dm: %s", strerror(errno));
	vt_assert(idm->handle == dm_handle, "imported device memory's handle");
	vt_assert(ibv_memcpy_from_dm(buf, idm, 0, sizeof(buf)) == 0,
		  "ibv_memcpy_from_dm");
	vt_expect_pat(buf, sizeof(buf), 0, SEED_DM, "the owner's device memory");

	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	vt_assert(cq, "ibv_create_cq: %s", strerror(errno));
	qp = vt_qp(&d, cq, cq, &o);
	mr = vt_reg(d.pd, HALF, VT_ACCESS_ALL);
	vt_fill(mr->addr, HALF, 0, SEED_DM_IMP);
	vt_assert(ibv_memcpy_to_dm(idm, HALF, mr->addr, HALF) == 0,
		  "ibv_memcpy_to_dm");
	vt_fill(mr->addr, HALF, 0, SEED_WRITE);
	vt_qp_addr(&d, qp, &o, &me);
	vt_addr_str(&me, buf, sizeof(buf));
	vt_put(dir, "importer", "%s\n", buf);
	vt_assert(vt_get(dir, "ready", buf, sizeof(buf), vt_tmo_ms()),
		  "the owner never connected");
	vt_connect(&d, qp, &peer, &o);

	/* The imported MR's memory is the owner's: its addresses are iovas. */
	sge.addr = raddr;
	sge.length = HALF;
	sge.lkey = imr->lkey;
	vt_assert(vt_post_sgl(qp, 10, IBV_WR_SEND, IBV_SEND_SIGNALED, &sge, 1,
			      0, 0) == 0, "post SEND");
	vt_expect_ok(cq, &wc, 10, IBV_WC_SEND, "SEND from the imported MR");
	vt_send(qp, 11, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mr->addr, HALF,
		mr->lkey, raddr + HALF, rkey);
	vt_expect_ok(cq, &wc, 11, IBV_WC_RDMA_WRITE, "WRITE from our own MR");
	vt_put(dir, "sent", "1\n");

	vt_assert(vt_get(dir, "closed", buf, sizeof(buf), vt_tmo_ms()),
		  "the owner never closed");
	vt_fill(mr->addr, HALF, 0, SEED_LATE);
	vt_send(qp, 12, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mr->addr, HALF,
		mr->lkey, raddr, imr->rkey);
	vt_expect_ok(cq, &wc, 12, IBV_WC_RDMA_WRITE,
		     "WRITE after the owner's ibv_close_device");
	vt_put(dir, "late", "1\n");
	vt_assert(vt_get(dir, "done", buf, sizeof(buf), vt_tmo_ms()),
		  "the owner never finished");

	/* Our own connection hears the context's events about our objects. */
	drain_sq(qp);
	vt_expect_async(d.ctx, IBV_EVENT_SQ_DRAINED, qp, "our QP drained");
	printf("importer: async events reach the importer\n");

	unimport_pd_first(d.ctx, pd_handle, mr_handle);
	ibv_unimport_dm(idm);
	/* Destroying through an import destroys for everyone. */
	vt_assert(ibv_dereg_mr(imr) == 0, "ibv_dereg_mr of the imported MR");
	vt_dereg(mr);
	vt_assert(ibv_destroy_qp(qp) == 0, "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(cq) == 0, "ibv_destroy_cq");
	/* The owner's QP is still on the PD: it stays, we let go of it. */
	vt_assert(ibv_dealloc_pd(d.pd) == EBUSY, "dealloc of a PD in use");
	ibv_unimport_pd(d.pd);
	vt_assert(ibv_close_device(d.ctx) == 0, "ibv_close_device");
	printf("importer: imported, used, and let go of the owner's context\n");
	return 0;
}

/* ---- a file grant across uids ------------------------------------------- */

/* From qp (its CQ cq, its buffer buf): READ [raddr, +HALF) of rkey. */
static void read_into(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *buf,
		      uint64_t raddr, uint32_t rkey, const char *what)
{
	struct ibv_wc wc;

	memset(buf->addr, 0, HALF);
	vt_send(qp, 2, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, buf->addr, HALF,
		buf->lkey, raddr, rkey);
	vt_expect_ok(cq, &wc, 2, IBV_WC_RDMA_READ, what);
}

/* ... WRITE seed's pattern there, and READ it back. */
static void write_read(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *buf,
		       uint64_t raddr, uint32_t rkey, uint32_t seed,
		       const char *what)
{
	struct ibv_wc wc;

	vt_fill(buf->addr, HALF, 0, seed);
	vt_send(qp, 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, buf->addr, HALF,
		buf->lkey, raddr, rkey);
	vt_expect_ok(cq, &wc, 1, IBV_WC_RDMA_WRITE, what);
	read_into(qp, cq, buf, raddr, rkey, what);
	vt_expect_pat(buf->addr, HALF, 0, seed, what);
}

/* Two RC QPs of ours connected: t on d (the shared context), i on d2. */
static void connect_two(struct vt_dev *d, struct ibv_qp **t,
			struct vt_dev *d2, struct ibv_qp **i)
{
	struct vt_qp_opts o = { 0 };
	struct ibv_cq *tcq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct ibv_cq *icq = ibv_create_cq(d2->ctx, 16, NULL, NULL, 0);
	struct vt_addr ta, ia;

	vt_assert(tcq && icq, "ibv_create_cq: %s", strerror(errno));
	*t = vt_qp(d, tcq, tcq, &o);
	*i = vt_qp(d2, icq, icq, &o);
	vt_qp_addr(d, *t, &o, &ta);
	vt_qp_addr(d2, *i, &o, &ia);
	vt_connect(d, *t, &ia, &o);
	vt_connect(d2, *i, &ta, &o);
}

/*
 * The owner: hands its context over, and once the importer registered
 * its file there and left, RDMAs into both files from a QP of its own
 * (another context, the same uid).  Its own file is granted (its library
 * maps it a second time); the importer's never is, whose bytes the
 * engine moves, intact.
 */
static struct vt_dev grant_ctx;	/* its PD stays: the importer's MR is on it */

static int grant_owner(const char *dir)
{
	struct vt_dev *d = &grant_ctx, d2;
	struct ibv_cq *tcq, *icq;
	struct ibv_mr *ours, *buf;
	unsigned long long raddr;
	struct ibv_qp *t, *i;
	unsigned int rkey;
	char line[256];
	int fd, round;

	vt_open(d);
	vt_put(dir, "gowner", "%u\n", d->pd->handle);
	fd = dup(d->ctx->cmd_fd);
	vt_assert(fd >= 0, "dup: %s", strerror(errno));
	give_fd(dir, fd);
	close(fd);
	vt_assert(vt_get(dir, "theirs", line, sizeof(line), vt_tmo_ms()),
		  "the importer never registered its file");
	vt_assert(sscanf(line, "%u %llu", &rkey, &raddr) == 2,
		  "bad importer line '%s'", line);
	vt_assert(vt_get(dir, "left", line, sizeof(line), vt_tmo_ms()),
		  "the importer never left");

	vt_open(&d2);
	connect_two(d, &t, &d2, &i);
	tcq = t->send_cq;
	icq = i->send_cq;
	buf = vt_reg(d2.pd, HALF, VT_ACCESS_ALL);
	ours = vt_reg_memfd(d->pd, HALF, VT_ACCESS_ALL, GRANT_OURS);
	for (round = 0; round < 3; round++)
		write_read(i, i->send_cq, buf, (uintptr_t)ours->addr, ours->rkey,
			   SEED_OVER + (uint32_t)round, "RDMA into our own file");
	vt_assert(vt_memfd_maps(GRANT_OURS, NULL, NULL) == 2,
		  "our own file was not granted: %d mappings of it",
		  vt_memfd_maps(GRANT_OURS, NULL, NULL));

	read_into(i, i->send_cq, buf, raddr, rkey, "READ of the importer's file");
	vt_expect_pat(buf->addr, HALF, 0, SEED_THEIRS, "the importer's file");
	for (round = 0; round < 3; round++)
		write_read(i, i->send_cq, buf, raddr, rkey,
			   SEED_OVER + (uint32_t)round, "RDMA into the importer's file");
	vt_assert(vt_memfd_maps(GRANT_THEIRS, NULL, NULL) == 0,
		  "uid %u was granted the importer's file",
		  (unsigned int)getuid());
	printf("owner: our file granted; the importer's not, its bytes moved by the engine\n");

	vt_dereg_memfd(ours);
	vt_dereg(buf);
	vt_assert(ibv_destroy_qp(i) == 0 && ibv_destroy_qp(t) == 0,
		  "ibv_destroy_qp");
	vt_assert(ibv_destroy_cq(icq) == 0 && ibv_destroy_cq(tcq) == 0,
		  "ibv_destroy_cq");
	vt_close(&d2);
	/* the importer's MR and our PD go with the context */
	vt_assert(ibv_close_device(d->ctx) == 0, "ibv_close_device");
	return 0;
}

/* Kept, never deregistered: it stays the owner's context's when we go. */
static struct ibv_mr *theirs_mr;

/* The importer: registers its file in the owner's context, and leaves. */
static int grant_importer(const char *dir)
{
	struct vt_dev d = { 0 };
	unsigned int pd_handle;
	char line[64];
	int fd;

	fd = take_fd(dir);
	vt_assert(vt_get(dir, "gowner", line, sizeof(line), vt_tmo_ms()),
		  "no word from the owner");
	vt_assert(sscanf(line, "%u", &pd_handle) == 1, "bad line '%s'", line);
	d.ctx = ibv_import_device(fd);
	vt_assert(d.ctx, "ibv_import_device: %s", strerror(errno));
	d.pd = ibv_import_pd(d.ctx, pd_handle);
	vt_assert(d.pd, "ibv_import_pd: %s", strerror(errno));
	theirs_mr = vt_reg_memfd(d.pd, HALF, VT_ACCESS_ALL, GRANT_THEIRS);
	vt_fill(theirs_mr->addr, HALF, 0, SEED_THEIRS);
	vt_put(dir, "theirs", "%u %llu\n", theirs_mr->rkey,
	       (unsigned long long)(uintptr_t)theirs_mr->addr);
	ibv_unimport_pd(d.pd);
	vt_assert(ibv_close_device(d.ctx) == 0, "ibv_close_device");
	vt_put(dir, "left", "1\n");
	printf("importer: registered a file of ours in the owner's context, and left\n");
	return 0;
}

/* ---- who stands for a context its creator left --------------------------- */

/*
 * The owner's objects: they stay the context's when it closes.  Volatile:
 * stored only, they would be optimised away, and the leak checker would
 * not see them kept.
 */
static struct vt_dev standin_ctx;
static struct ibv_cq *volatile standin_cq;
static struct ibv_qp *volatile standin_qp;
static struct ibv_mr *volatile standin_mr;

/* Hand our cmd_fd to whoever takes it from DIR/SUB, and wait till it joined. */
static void standin_give(const char *dir, const char *sub)
{
	char path[512], line[16];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	fd = dup(standin_ctx.ctx->cmd_fd);
	vt_assert(fd >= 0, "dup: %s", strerror(errno));
	give_fd(path, fd);
	close(fd);
	vt_assert(vt_get(path, "joined", line, sizeof(line), vt_tmo_ms()),
		  "importer %s never joined", sub);
}

static int standin_owner(const char *dir)
{
	struct vt_qp_opts o = { 0 };

	vt_open(&standin_ctx);
	standin_mr = vt_reg(standin_ctx.pd, HALF, VT_ACCESS_ALL);
	standin_cq = ibv_create_cq(standin_ctx.ctx, 16, NULL, NULL, 0);
	vt_assert(standin_cq, "ibv_create_cq: %s", strerror(errno));
	standin_qp = vt_qp(&standin_ctx, standin_cq, standin_cq, &o);
	/* ours first, then the other uid's: it is first of the rest then */
	standin_give(dir, "a");
	standin_give(dir, "b");
	vt_assert(ibv_close_device(standin_ctx.ctx) == 0, "ibv_close_device");
	vt_put(dir, "closed", "%d\n", (int)getpid());
	printf("standin-owner: made a PD, an MR, a CQ and a QP, and left them to two importers\n");
	return 0;
}

static int standin_importer(const char *dir, const char *sub)
{
	char path[512], line[16];
	struct ibv_context *ctx;
	int fd, nul;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	fd = take_fd(path);
	ctx = ibv_import_device(fd);
	vt_assert(ctx, "ibv_import_device: %s", strerror(errno));
	/*
	 * The library keeps the owner's connection (the fd we passed) till
	 * the context closes, and so keeps the owner's session: let go of
	 * it, so that the owner leaves with its process, and the context is
	 * ours.  The fd's number stays, for ibv_close_device to close.
	 */
	nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	vt_assert(nul >= 0 && dup2(nul, fd) == fd, "dup2: %s", strerror(errno));
	close(nul);
	vt_put(path, "joined", "%d\n", (int)getpid());
	vt_assert(vt_get(dir, "end", line, sizeof(line), 4 * vt_tmo_ms()),
		  "never told to end");
	vt_assert(ibv_close_device(ctx) == 0, "ibv_close_device");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "owner"))
		return owner(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "importer"))
		return importer(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "grant-owner"))
		return grant_owner(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "grant-importer"))
		return grant_importer(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "standin-owner"))
		return standin_owner(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "standin-importer"))
		return standin_importer(argv[2], argv[3]);
	fprintf(stderr, "usage: import-helper owner|importer|grant-owner|grant-importer|standin-owner DIR | standin-importer DIR a|b\n");
	return 2;
}
