/*
 * privdrop-helper: a server that connects to the daemon and then gives up
 * its privileges, as servers do (call-privilege.sh).
 *
 * usage: privdrop-helper SOCKET MODE PORT UID
 *
 * Connects as whoever runs it: an rdma_cm event channel with two ids, a
 * device context (the first device) with two UD QPs, and an ibvctl
 * connection (a raw ADMIN request, as ibvctl sends it).  Then, by MODE:
 *	stay	tries the privileged operations itself;
 *	drop	becomes UID (setgroups, setgid, setuid: no way back), then
 *		tries them;
 *	fork	a child becomes UID and sends the reload on the ibvctl
 *		connection it inherited, as raw frames (our libraries refuse
 *		a forked child's calls on its parent's connections, but
 *		another client may not); once it is gone, the parent tries
 *		all three.
 * The operations, each printed as "WHO OP ERRNO" (WHO: "self", "child" or
 * "parent"; ERRNO 0 when allowed):
 *	bind	rdma_bind_addr to 127.0.0.1 port PORT (PORT + 1 for the
 *		parent), a port below 1024
 *	qkey	ibv_modify_qp to INIT with the controlled Q_Key 0x80010000
 *	reload	ibvctl's "daemon reload", which needs root or the admin group
 * Exit status 0 when it could set everything up and drop, else 2.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "conn.h"
#include "frame.h"
#include "ibverbsd.pb-c.h"

#define CONTROLLED_QKEY	0x80010000u

/* What one party tries with: its own id and QP, the shared connections. */
struct party {
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
};

static struct ibvd_conn admin;

static int die(const char *what)
{
	fprintf(stderr, "privdrop-helper: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int try_bind(struct rdma_cm_id *id, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return rdma_bind_addr(id, (struct sockaddr *)&sin) ? errno : 0;
}

static int try_qkey(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qkey = CONTROLLED_QKEY,
	};

	return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_QKEY);
}

static int try_reload(void)
{
	static char *argv[] = { (char *)"daemon", (char *)"reload" };
	Ibvd__AdminRequest req = IBVD__ADMIN_REQUEST__INIT;
	int ret;

	req.n_argv = 2;
	req.argv = argv;
	ret = ibvd_conn_call(&admin, IBVD_MSG_ADMIN, &req.base, NULL, NULL,
			     NULL, NULL);
	return -ret;
}

/* The reload as raw frames on the connection's socket: the reply's errno. */
static int raw_reload(void)
{
	static char *argv[] = { (char *)"daemon", (char *)"reload" };
	Ibvd__AdminRequest req = IBVD__ADMIN_REQUEST__INIT;
	static uint8_t buf[IBVD_FRAME_MAX];
	struct ibvd_frame frame;
	Ibvd__Error *err;
	int ret;

	req.n_argv = 2;
	req.argv = argv;
	ret = ibvd_frame_send(admin.sock, IBVD_MSG_ADMIN, 1000, &req.base,
			      NULL, 0, 0);
	if (ret == 0)
		ret = ibvd_frame_recv(admin.sock, buf, sizeof(buf), &frame, 0);
	if (ret < 0)
		return -ret;
	if (ret == 0)
		return EPIPE;
	ibvd_frame_close_fds(&frame);
	if (frame.hdr.type == (IBVD_MSG_ADMIN | IBVD_REPLY))
		return 0;
	if (frame.hdr.type != IBVD_MSG_ERROR)
		return EPROTO;
	err = ibvd__error__unpack(NULL, frame.hdr.len, frame.payload);
	ret = err ? (int)err->errnum : EPROTO;
	if (err)
		ibvd__error__free_unpacked(err, NULL);
	return ret;
}

static void try_all(const char *who, const struct party *p, int port)
{
	printf("%s bind %d\n", who, try_bind(p->id, port));
	printf("%s qkey %d\n", who, try_qkey(p->qp));
	printf("%s reload %d\n", who, try_reload());
	fflush(stdout);
}

static void become(uid_t uid)
{
	if (setgroups(0, NULL) < 0 || setgid((gid_t)uid) < 0 ||
	    setuid(uid) < 0)
		die("dropping privileges");
	if (getuid() != uid || geteuid() != uid)
		die("still another uid");
}

static void party_make(struct party *p, struct rdma_event_channel *ch,
		       struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	if (rdma_create_id(ch, &p->id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	p->qp = ibv_create_qp(pd, &init);
	if (!p->qp)
		die("ibv_create_qp");
}

static void party_free(struct party *p)
{
	ibv_destroy_qp(p->qp);
	rdma_destroy_id(p->id);
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct party self, other;	/* other: the parent's after a fork */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int port, st;
	uid_t uid;
	pid_t pid;

	if (argc != 5) {
		fprintf(stderr, "usage: privdrop-helper SOCKET stay|drop|fork PORT UID\n");
		return 2;
	}
	port = atoi(argv[3]);
	uid = (uid_t)atoi(argv[4]);
	ch = rdma_create_event_channel();
	if (!ch)
		die("rdma_create_event_channel");
	devs = ibv_get_device_list(NULL);
	if (!devs || !devs[0])
		die("no device");
	ctx = ibv_open_device(devs[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 4, NULL, NULL, 0) : NULL;
	if (!cq)
		die("device context");
	party_make(&self, ch, pd, cq);
	party_make(&other, ch, pd, cq);
	errno = -ibvd_conn_open(&admin, argv[1]);
	if (errno)
		die("connecting for ADMIN");

	if (!strcmp(argv[2], "stay")) {
		try_all("self", &self, port);
	} else if (!strcmp(argv[2], "drop")) {
		become(uid);
		try_all("self", &self, port);
	} else if (!strcmp(argv[2], "fork")) {
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			become(uid);
			printf("child reload %d\n", raw_reload());
			fflush(stdout);
			_exit(0);
		}
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			die("the child failed");
		try_all("parent", &other, port + 1);
	} else {
		fprintf(stderr, "privdrop-helper: unknown mode %s\n", argv[2]);
		return 2;
	}
	/* Everything back, so that a leak checker sees only the libraries'. */
	ibvd_conn_close(&admin);
	party_free(&other);
	party_free(&self);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	rdma_destroy_event_channel(ch);
	return 0;
}
