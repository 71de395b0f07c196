/*
 * hostile-helper: a client that scribbles over its own shared memory, and
 * an honest client that must not notice (hostile.sh runs them at once, as
 * different uids).
 *
 * hostile-helper hostile SECONDS
 *	Creates RC, UC and UD QPs, an SRQ and CQs (one with a completion
 *	channel), posts valid work, then for SECONDS: finds every memfd our
 *	library mapped (/proc/self/maps: the context's ring arena
 *	"ibvd-rings", whose pages in use hold every queue, and its
 *	"ibverbsd-context" page), makes the read-only parts writable where
 *	the kernel lets it (mprotect), and
 *	writes random bytes and random counter values all over them: WQE and
 *	CQE slots, producer and consumer counters, arm words, doorbell bits;
 *	writes and reads the context's kick eventfd; and keeps posting and
 *	polling through the library in between.  Then it reports the QPs'
 *	states (ibv_query_qp) and the error completions it saw, frees
 *	everything and exits 0.
 *	Prints "hostile: qps N err E, error completions C".
 *
 * hostile-helper honest DIR SECONDS
 *	Two device contexts (two connections), an RC QP in each connected to
 *	the other, and for SECONDS rounds of: SEND both ways and RDMA WRITE
 *	both ways, each with a fresh pattern that the receiver checks.  A
 *	"canary" MR with remote write and read access, whose rkey nobody
 *	learns, must still hold its pattern at the end.  Writes DIR/honest.ready
 *	once connected.  Prints "honest: ok R rounds ...".
 *
 * Exit 0 on success, 1 on failure.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"
#include "vt.h"

/* ---- random numbers (xorshift64*) ------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- honest ------------------------------------------------------------------ */

#define H_LEN		(64 * 1024)
#define CANARY_LEN	(256 * 1024)
#define CANARY_SEED	0xc0ffeeu

static int honest(const char *dir, double secs)
{
	struct vt_dev d[2];
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
	struct ibv_mr *sbuf[2], *rbuf[2], *wbuf[2], *canary;
	struct vt_qp_opts o;
	struct vt_addr a[2];
	struct ibv_wc wc;
	long end, worst = 0;
	unsigned long rounds = 0, bytes = 0;
	int i;

	memset(&o, 0, sizeof(o));
	for (i = 0; i < 2; i++) {
		vt_open(&d[i]);
		cq[i] = ibv_create_cq(d[i].ctx, 64, NULL, NULL, 0);
		vt_assert(cq[i], "ibv_create_cq: %s", strerror(errno));
		o.psn = 100u + (unsigned int)i;
		qp[i] = vt_qp(&d[i], cq[i], cq[i], &o);
		vt_qp_addr(&d[i], qp[i], &o, &a[i]);
		sbuf[i] = vt_reg(d[i].pd, H_LEN, VT_ACCESS_ALL);
		rbuf[i] = vt_reg(d[i].pd, H_LEN, VT_ACCESS_ALL);
		wbuf[i] = vt_reg(d[i].pd, H_LEN, VT_ACCESS_ALL);
	}
	canary = vt_reg(d[1].pd, CANARY_LEN, VT_ACCESS_ALL);
	vt_fill(canary->addr, CANARY_LEN, 0, CANARY_SEED);
	for (i = 0; i < 2; i++) {
		o.psn = 100u + (unsigned int)i;
		vt_connect(&d[i], qp[i], &a[1 - i], &o);
	}
	vt_put(dir, "honest.ready", "%u %u\n", qp[0]->qp_num, qp[1]->qp_num);

	end = vt_now_ms() + (long)(secs * 1000);
	while (vt_now_ms() < end) {
		uint32_t seed = (uint32_t)rounds * 7919u + 1;
		uint32_t len = 1 + (uint32_t)(rounds * 4099 % H_LEN);
		long t0 = vt_now_ms(), dt;

		for (i = 0; i < 2; i++) {
			int j = 1 - i;
			char what[96];

			/* SEND i -> j */
			memset(rbuf[j]->addr, 0, len);
			vt_fill(sbuf[i]->addr, len, 0, seed + (uint32_t)i);
			vt_recv(qp[j], 2, rbuf[j]->addr, H_LEN, rbuf[j]->lkey);
			vt_send(qp[i], 1, IBV_WR_SEND, IBV_SEND_SIGNALED, sbuf[i]->addr, len,
				sbuf[i]->lkey, 0, 0);
			snprintf(what, sizeof(what), "round %lu: SEND %d->%d", rounds, i, j);
			vt_expect_ok(cq[i], &wc, 1, IBV_WC_SEND, what);
			vt_expect_ok(cq[j], &wc, 2, IBV_WC_RECV, what);
			vt_assert(wc.byte_len == len, "%s: byte_len %u, want %u", what,
				  wc.byte_len, len);
			vt_expect_pat(rbuf[j]->addr, len, 0, seed + (uint32_t)i, what);

			/* RDMA WRITE i -> j's wbuf */
			vt_fill(sbuf[i]->addr, len, 0, seed + 2 + (uint32_t)i);
			vt_send(qp[i], 3, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, sbuf[i]->addr,
				len, sbuf[i]->lkey, (uintptr_t)wbuf[j]->addr, wbuf[j]->rkey);
			snprintf(what, sizeof(what), "round %lu: RDMA WRITE %d->%d", rounds, i, j);
			vt_expect_ok(cq[i], &wc, 3, IBV_WC_RDMA_WRITE, what);
			vt_expect_pat(wbuf[j]->addr, len, 0, seed + 2 + (uint32_t)i, what);
			bytes += 2ul * len;
		}
		dt = vt_now_ms() - t0;
		if (dt > worst)
			worst = dt;
		rounds++;
		if (rounds % 64 == 0)
			vt_expect_pat(canary->addr, CANARY_LEN, 0, CANARY_SEED, "canary MR");
	}
	vt_expect_pat(canary->addr, CANARY_LEN, 0, CANARY_SEED, "canary MR at the end");
	vt_expect_none(cq[0], 50, "honest CQ 0 after the last round");
	vt_expect_none(cq[1], 50, "honest CQ 1 after the last round");
	for (i = 0; i < 2; i++)
		vt_assert(vt_qp_state(qp[i]) == IBV_QPS_RTS, "honest QP %d left RTS", i);

	for (i = 0; i < 2; i++) {
		vt_assert(ibv_destroy_qp(qp[i]) == 0, "ibv_destroy_qp");
		vt_assert(ibv_destroy_cq(cq[i]) == 0, "ibv_destroy_cq");
		vt_dereg(sbuf[i]);
		vt_dereg(rbuf[i]);
		vt_dereg(wbuf[i]);
	}
	vt_dereg(canary);
	vt_close(&d[1]);
	vt_close(&d[0]);
	printf("honest: ok %lu rounds (SEND + RDMA WRITE both ways, checked), %lu bytes, "
	       "slowest round %ld ms\n", rounds, bytes, worst);
	return rounds > 0 ? 0 : 1;
}

/* ---- hostile ------------------------------------------------------------------ */

#define MAX_REGIONS	64

struct region {
	uint8_t *base;		/* start of the whole memfd mapping */
	size_t len;
	unsigned long ino;
	char name[32];
	int ctx_page;		/* the context page */
	int arena;		/* pages in use of the ring arena: */
	int arena_client;	/* ... in its client half */
	int all_writable;	/* mprotect to read-write worked */
};

static struct region R[MAX_REGIONS];
static unsigned int nregions;
static int kick_fds[16];
static unsigned int nkick;

static unsigned char resident[IBVD_ARENA_BYTES / IBVD_PAGE_SIZE];

/* A run of n pages of the arena at base, in its engine or client half. */
static void add_arena_run(uint8_t *base, size_t n, int client)
{
	struct region *r;

	if (nregions == MAX_REGIONS)
		return;
	r = &R[nregions++];
	memset(r, 0, sizeof(*r));
	r->base = base;
	r->len = n * IBVD_PAGE_SIZE;
	snprintf(r->name, sizeof(r->name), "ibvd-rings %s", client ? "client" : "engine");
	r->arena = 1;
	r->arena_client = client;
}

/*
 * The ring arena as regions: only its pages in use (mincore), so that the
 * scribbling lands on queues and never fills the 2 GiB file; runs split at
 * the halves.
 */
static void split_arena(struct region *a)
{
	size_t half = IBVD_ARENA_HALF / IBVD_PAGE_SIZE, i, start;
	uint8_t *base = a->base;
	int h;

	vt_assert(a->len == IBVD_ARENA_BYTES, "ring arena of %zu bytes", a->len);
	vt_assert(mincore(base, a->len, resident) == 0, "mincore: %s", strerror(errno));
	nregions--;			/* a is the last region: replaced by runs */
	for (h = 0; h < 2; h++) {
		for (i = h * half; i < (h + 1) * half;) {
			if (!(resident[i] & 1)) {
				i++;
				continue;
			}
			for (start = i; i < (h + 1) * half && (resident[i] & 1); i++)
				;
			add_arena_run(base + start * IBVD_PAGE_SIZE, i - start, h);
		}
	}
}

/* The memfd mappings, one region per file (the library maps each memfd
 * read-only and then parts of it read-write on top: several VMAs). */
static void find_regions(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned int r;

	vt_assert(f, "/proc/self/maps: %s", strerror(errno));
	nregions = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, off, ino;
		char perms[8], name[256];
		unsigned int i;
		char *m = strstr(line, "/memfd:");

		if (!m || (!strstr(m, "ibvd-") && !strstr(m, "ibverbsd-context")))
			continue;
		/*
		 * Transit rings come and go with connections (the library
		 * unmaps them at reset), so a list made once cannot keep
		 * them; direct-helper's hostile case writes garbage there.
		 */
		if (strstr(m, "ibvd-transit"))
			continue;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %255s", &start, &end, perms, &off,
			   &ino, name) != 6)
			continue;
		for (i = 0; i < nregions; i++)
			if (R[i].ino == ino && R[i].base == (uint8_t *)(start - off))
				break;
		if (i == nregions) {
			if (nregions == MAX_REGIONS)
				continue;
			nregions++;
			memset(&R[i], 0, sizeof(R[i]));
			R[i].base = (uint8_t *)(start - off);
			R[i].ino = ino;
			snprintf(R[i].name, sizeof(R[i].name), "%.31s", name + strlen("/memfd:"));
			R[i].ctx_page = strstr(name, "ibverbsd-context") != NULL;
		}
		if (end - (unsigned long)R[i].base > R[i].len)
			R[i].len = end - (unsigned long)R[i].base;
	}
	fclose(f);
	for (r = 0; r < nregions; r++)
		if (strcmp(R[r].name, "ibvd-rings") == 0) {
			struct region a = R[r];

			R[r] = R[nregions - 1];
			R[nregions - 1] = a;
			split_arena(&R[nregions - 1]);
			break;
		}
}

static void find_kick_fds(void)
{
	char path[64], link[128];
	int fd;

	nkick = 0;
	for (fd = 0; fd < 1024 && nkick < VT_ARRAY_SIZE(kick_fds); fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, "anon_inode:[eventfd]") == 0)
			kick_fds[nkick++] = fd;
	}
}

/*
 * May we store to [off, off + n) of r?  Everything, once mprotect made it
 * writable; otherwise what the library mapped read-write: the ring
 * arena's client half (client headers, work-queue slots) and the context
 * page's client half (the doorbells).
 */
static int can_write(const struct region *r, size_t off, size_t n)
{
	if (off + n > r->len)
		return 0;
	if (r->all_writable)
		return 1;
	if (r->arena)
		return r->arena_client;
	return off >= 4096;
}

/* One random act of vandalism. */
static void scribble(unsigned long *nwrites, unsigned long *nkicks)
{
	struct region *r;
	uint64_t x = rnd(), v;
	size_t off, n, i;

	if (x % 16 == 0 && nkick) {
		int fd = kick_fds[(x >> 8) % nkick];

		v = (x >> 16) % 3 == 0 ? ~0ull - 1 : rnd() & 0xffff;
		if ((x >> 20) % 2) {
			if (write(fd, &v, sizeof(v)) == sizeof(v))
				(*nkicks)++;
		} else if (fcntl(fd, F_GETFL) & O_NONBLOCK) {
			/* take what others wrote: a stolen wakeup */
			if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				vt_fail("read(eventfd %d): %s", fd, strerror(errno));
		}
		return;
	}
	if (!nregions)
		return;
	r = &R[(x >> 8) % nregions];
	if ((x >> 16) % 4 == 0) {
		/* a counter or flag: the first words of the engine or client page,
		 * or a doorbell word of the context page */
		if (r->ctx_page)
			off = 4096 + ((x >> 24) % 512) * 8;
		else if (r->arena)	/* headers are 128-byte blocks */
			off = ((x >> 24) % (r->len / 128)) * 128 + ((x >> 32) % 32) * 4;
		else
			off = ((x >> 24) % 2) * 4096 + ((x >> 32) % 32) * 4;
		n = (x >> 36) % 2 ? 8 : 4;
		v = (x >> 40) % 3 == 0 ? ~0ull : (x >> 40) % 3 == 1 ? rnd() & 0xffff : rnd();
		if (can_write(r, off, n)) {
			memcpy(r->base + off, &v, n);
			(*nwrites)++;
		}
		return;
	}
	/* random bytes anywhere we may write */
	off = (size_t)(rnd() % r->len);
	n = 1 + (size_t)((x >> 24) % 128);
	if (off + n > r->len)
		n = r->len - off;
	if (!can_write(r, off, n))
		return;
	for (i = 0; i < n; i++)
		r->base[off + i] = (uint8_t)rnd();
	(*nwrites)++;
}

static int hostile(double secs)
{
	struct vt_dev d;
	struct vt_pair rc, uc;
	struct vt_qp_opts uco, udo;
	struct ibv_comp_channel *ch;
	struct ibv_cq *udcq;
	struct ibv_qp *ud;
	struct ibv_srq *srq;
	struct ibv_srq_init_attr sia;
	struct ibv_ah_attr aha;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct ibv_qp *all[5];
	struct ibv_cq *cqs[9];
	struct ibv_wc wc[16];
	unsigned long nwrites = 0, nkicks = 0, nposts = 0, errs = 0, oks = 0, garbage = 0;
	unsigned int i, nerr = 0, writable = 0, ncq = 0;
	const char *seed_env = getenv("HOSTILE_SEED");
	long end;
	int n;

	rng_state = seed_env ? strtoull(seed_env, NULL, 0) :
		((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
	if (!rng_state)
		rng_state = 1;
	printf("hostile: seed 0x%llx (HOSTILE_SEED to repeat)\n", (unsigned long long)rng_state);

	vt_open(&d);
	vt_pair(&rc, &d, NULL, 64);
	memset(&uco, 0, sizeof(uco));
	uco.type = IBV_QPT_UC;
	vt_pair(&uc, &d, &uco, 64);
	ch = ibv_create_comp_channel(d.ctx);
	vt_assert(ch, "ibv_create_comp_channel: %s", strerror(errno));
	udcq = ibv_create_cq(d.ctx, 64, NULL, ch, 0);
	vt_assert(udcq, "ibv_create_cq: %s", strerror(errno));
	memset(&sia, 0, sizeof(sia));
	sia.attr.max_wr = 32;
	sia.attr.max_sge = 1;
	srq = ibv_create_srq(d.pd, &sia);
	vt_assert(srq, "ibv_create_srq: %s", strerror(errno));
	memset(&udo, 0, sizeof(udo));
	udo.type = IBV_QPT_UD;
	udo.srq = srq;
	ud = vt_qp(&d, udcq, udcq, &udo);
	vt_connect(&d, ud, NULL, &udo);
	mr = vt_reg(d.pd, 1 << 16, VT_ACCESS_ALL);
	memset(&aha, 0, sizeof(aha));
	aha.dlid = d.port.lid;
	aha.port_num = d.port_num;
	ah = ibv_create_ah(d.pd, &aha);
	vt_assert(ah, "ibv_create_ah: %s", strerror(errno));
	all[0] = rc.qp[0];
	all[1] = rc.qp[1];
	all[2] = uc.qp[0];
	all[3] = uc.qp[1];
	all[4] = ud;
	for (i = 0; i < 2; i++) {
		cqs[ncq++] = rc.scq[i];
		cqs[ncq++] = rc.rcq[i];
		cqs[ncq++] = uc.scq[i];
		cqs[ncq++] = uc.rcq[i];
	}
	cqs[ncq++] = udcq;
	vt_assert(ibv_req_notify_cq(udcq, 0) == 0, "ibv_req_notify_cq");

	/* Valid work first, so the rings hold real WQEs and CQEs. */
	for (i = 0; i < 8; i++) {
		vt_recv(rc.qp[1], i, mr->addr, 4096, mr->lkey);
		vt_recv(uc.qp[1], i, mr->addr, 4096, mr->lkey);
		vt_srq_recv(srq, i, (uint8_t *)mr->addr + 8192, 4096, mr->lkey);
		vt_send(rc.qp[0], i, IBV_WR_SEND, IBV_SEND_SIGNALED, mr->addr, 512, mr->lkey, 0, 0);
		vt_send(uc.qp[0], i, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, mr->addr, 512,
			mr->lkey, (uintptr_t)mr->addr + 16384, mr->rkey);
	}
	vt_sleep_ms(50);

	find_regions();
	find_kick_fds();
	for (i = 0; i < nregions; i++) {
		R[i].all_writable = mprotect(R[i].base, R[i].len, PROT_READ | PROT_WRITE) == 0;
		writable += (unsigned int)R[i].all_writable;
		printf("hostile: region %s %zu bytes at %p%s\n", R[i].name, R[i].len,
		       (void *)R[i].base, R[i].all_writable ? ", made writable" :
		       ", read-only parts stay so");
	}
	for (i = 0, n = 0; i < nregions; i++)
		n |= R[i].ctx_page ? 1 : R[i].arena_client ? 2 : R[i].arena ? 4 : 0;
	vt_assert(n == 7, "want the context page and the ring arena's pages in use "
		  "in both its halves; found %u regions", nregions);
	printf("hostile: %u memfd regions (%u made fully writable), %u eventfds\n",
	       nregions, writable, nkick);

	end = vt_now_ms() + (long)(secs * 1000);
	while (vt_now_ms() < end) {
		for (i = 0; i < 64; i++)
			scribble(&nwrites, &nkicks);
		/* the library keeps ringing doorbells over the garbage */
		for (i = 0; i < 5; i++) {
			struct ibv_send_wr wr, *bad;
			struct ibv_sge sge = { (uintptr_t)mr->addr, (uint32_t)(rnd() % 8192),
					       mr->lkey };

			memset(&wr, 0, sizeof(wr));
			wr.wr_id = rnd();
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = i == 4 ? IBV_WR_SEND : (enum ibv_wr_opcode)(rnd() % 7);
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = (uintptr_t)mr->addr + rnd() % 65536;
			wr.wr.rdma.rkey = rnd() % 2 ? mr->rkey : (uint32_t)rnd();
			if (i == 4) {
				/* datagrams to QP numbers near ours: the honest
				 * client's RC QPs are likely among them */
				wr.wr.ud.ah = ah;
				wr.wr.ud.remote_qpn = rnd() % 2 ? (uint32_t)rnd() & 0xffffff :
					(ud->qp_num + (uint32_t)(rnd() % 128) - 64) & 0xffffff;
				wr.wr.ud.remote_qkey = rnd() % 2 ? VT_QKEY : (uint32_t)rnd();
				sge.length %= 4096;
			}
			if (ibv_post_send(all[i], &wr, &bad) == 0)
				nposts++;
			if (i < 4) {
				struct ibv_recv_wr rw, *rbad;

				memset(&rw, 0, sizeof(rw));
				rw.wr_id = rnd();
				rw.sg_list = &sge;
				rw.num_sge = 1;
				if (ibv_post_recv(all[i], &rw, &rbad) == 0)
					nposts++;
			} else {
				struct ibv_recv_wr rw, *rbad;

				memset(&rw, 0, sizeof(rw));
				rw.sg_list = &sge;
				rw.num_sge = 1;
				if (ibv_post_srq_recv(srq, &rw, &rbad) == 0)
					nposts++;
			}
		}
		for (i = 0; i < ncq; i++) {
			int k;

			n = ibv_poll_cq(cqs[i], (int)VT_ARRAY_SIZE(wc), wc);
			if (n < 0) {
				garbage++;
				continue;
			}
			for (k = 0; k < n; k++) {
				if (wc[k].status == IBV_WC_SUCCESS)
					oks++;
				else
					errs++;
			}
		}
		ibv_req_notify_cq(udcq, (int)(rnd() % 2));
	}
	printf("hostile: %lu scribbles, %lu eventfd writes, %lu posts accepted, "
	       "completions: %lu ok, %lu error, %lu failed polls\n",
	       nwrites, nkicks, nposts, oks, errs, garbage);

	/* What the daemon thinks of our QPs now. */
	for (i = 0; i < VT_ARRAY_SIZE(all); i++) {
		int st = vt_qp_state(all[i]);

		printf("hostile: QP %u (%s) state %d%s\n", all[i]->qp_num,
		       i < 2 ? "RC" : i < 4 ? "UC" : "UD", st, st == IBV_QPS_ERR ? " (ERR)" : "");
		if (st == IBV_QPS_ERR)
			nerr++;
	}
	/* The CQ rings are garbage now: don't poll them; destroy everything. */
	vt_assert(ibv_destroy_qp(ud) == 0, "ibv_destroy_qp(UD)");
	vt_assert(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
	vt_assert(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	vt_pair_free(&rc);
	vt_pair_free(&uc);
	{
		/* events the arms produced (the channel fd is ours to read) */
		struct ibv_cq *ecq;
		void *ectx;
		unsigned int nev = 0;
		int fl = fcntl(ch->fd, F_GETFL);

		fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
		while (ibv_get_cq_event(ch, &ecq, &ectx) == 0)
			nev++;
		if (nev)
			ibv_ack_cq_events(udcq, nev);
	}
	vt_assert(ibv_destroy_cq(udcq) == 0, "ibv_destroy_cq");
	vt_assert(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
	vt_dereg(mr);
	vt_close(&d);
	printf("hostile: qps %u err %u, error completions %lu\n",
	       (unsigned int)VT_ARRAY_SIZE(all), nerr, errs);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "hostile") == 0)
		return hostile(atof(argv[2]));
	if (argc == 4 && strcmp(argv[1], "honest") == 0)
		return honest(argv[2], atof(argv[3]));
	fprintf(stderr, "usage: %s hostile SECONDS | honest DIR SECONDS\n", argv[0]);
	return 2;
}
