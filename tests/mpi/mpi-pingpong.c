/*
 * mpi-pingpong: a two-rank MPI ping-pong and streaming bandwidth test with
 * every byte checked, for running MPI over ibverbsd (tests/integration/
 * mpi.sh, bench/mpi).  Rank 0 sends, rank 1 echoes.
 *
 *	mpi-pingpong [LAT_ITERS [BW_ITERS [BW_SIZE [sample]]]]
 *
 * Prints "latency SIZE B: X us" (half the round trip, median of the
 * iterations) for 8 B, 4 KiB and 64 KiB, then "bandwidth SIZE B: X MB/s"
 * (10^6 B/s; a window of 16 nonblocking sends, one reply per window),
 * and finally "verified N bytes"; exits 1 on the first wrong byte.  With
 * "sample" the bandwidth messages are written and checked at their first
 * and last 64 bytes only, so that the pattern does not bound a fast
 * transport.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW	16

static int rank;

/* The byte at offset i of message number seq. */
static unsigned char pattern(uint64_t seq, size_t i)
{
	return (unsigned char)((seq * 131u) ^ (i * 7u) ^ (i >> 8));
}

static void fill_range(unsigned char *buf, size_t from, size_t to,
		       uint64_t seq)
{
	for (size_t i = from; i < to; i++)
		buf[i] = pattern(seq, i);
}

static void fill(unsigned char *buf, size_t len, uint64_t seq)
{
	fill_range(buf, 0, len, seq);
}

static uint64_t verified;
static int sample_bw;	/* check bandwidth messages at both ends only */

/* Bytes [from, to) of message seq, received in buf. */
static void check_range(const unsigned char *buf, size_t from, size_t to,
			uint64_t seq)
{
	for (size_t i = from; i < to; i++) {
		if (buf[i] != pattern(seq, i)) {
			fprintf(stderr, "rank %d: message %llu byte %zu: got 0x%02x, "
				"expected 0x%02x\n", rank, (unsigned long long)seq,
				i, buf[i], pattern(seq, i));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	verified += to - from;
}

static void check(const unsigned char *buf, size_t len, uint64_t seq)
{
	check_range(buf, 0, len, seq);
}

static void check_bw(const unsigned char *buf, size_t len, uint64_t seq)
{
	const size_t edge = 64;

	if (!sample_bw || len <= 2 * edge) {
		check(buf, len, seq);
		return;
	}
	check_range(buf, 0, edge, seq);
	check_range(buf, len - edge, len, seq);
}

/* A bandwidth message: whole, or with "sample" its checked ends only. */
static void fill_bw(unsigned char *buf, size_t len, uint64_t seq)
{
	const size_t edge = 64;

	if (!sample_bw || len <= 2 * edge) {
		fill(buf, len, seq);
		return;
	}
	fill_range(buf, 0, edge, seq);
	fill_range(buf, len - edge, len, seq);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void latency(size_t size, int iters, unsigned char *sbuf,
		    unsigned char *rbuf)
{
	double *t = malloc(sizeof(*t) * (size_t)iters);

	if (!t)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int i = 0; i < iters; i++) {
		uint64_t seq = (uint64_t)i;

		if (rank == 0) {
			double t0 = MPI_Wtime();

			fill(sbuf, size, seq);
			MPI_Send(sbuf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			t[i] = (MPI_Wtime() - t0) / 2;
			check(rbuf, size, seq + 1);
		} else {
			MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			check(rbuf, size, seq);
			fill(sbuf, size, seq + 1);
			MPI_Send(sbuf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
		}
	}
	if (rank == 0) {
		qsort(t, (size_t)iters, sizeof(*t), cmp_double);
		printf("latency %zu B: %.2f us\n", size, t[iters / 2] * 1e6);
	}
	free(t);
}

static void bandwidth(size_t size, int iters, unsigned char *bufs)
{
	MPI_Request req[WINDOW];
	MPI_Status st[WINDOW];	/* not MPI_STATUSES_IGNORE: GCC 12 misreads it */
	double t0 = MPI_Wtime();
	char ack;
	int n = 0;

	while (n < iters) {
		int w = iters - n < WINDOW ? iters - n : WINDOW;

		for (int j = 0; j < w; j++) {
			unsigned char *b = bufs + (size_t)j * size;

			if (rank == 0) {
				fill_bw(b, size, (uint64_t)(n + j) + 1000);
				MPI_Isend(b, (int)size, MPI_BYTE, 1, 3,
					  MPI_COMM_WORLD, &req[j]);
			} else {
				MPI_Irecv(b, (int)size, MPI_BYTE, 0, 3,
					  MPI_COMM_WORLD, &req[j]);
			}
		}
		MPI_Waitall(w, req, st);
		if (rank == 1) {
			for (int j = 0; j < w; j++)
				check_bw(bufs + (size_t)j * size, size,
					 (uint64_t)(n + j) + 1000);
			MPI_Send(&ack, 1, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
		} else {
			MPI_Recv(&ack, 1, MPI_BYTE, 1, 4, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		}
		n += w;
	}
	if (rank == 0)
		printf("bandwidth %zu B: %.1f MB/s\n", size,
		       (double)size * iters / (MPI_Wtime() - t0) / 1e6);
}

int main(int argc, char **argv)
{
	int lat_iters = argc > 1 ? atoi(argv[1]) : 1000;
	int bw_iters = argc > 2 ? atoi(argv[2]) : 200;
	size_t bw_size = argc > 3 ? (size_t)atol(argv[3]) : 1u << 20;
	sample_bw = argc > 4 && strcmp(argv[4], "sample") == 0;
	static const size_t lat_sizes[] = { 8, 4096, 65536 };
	size_t max = bw_size * WINDOW;
	unsigned char *sbuf, *rbuf, *bufs;
	uint64_t total = 0;
	int size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2 || lat_iters < 1 || bw_iters < 1 || bw_size < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi-pingpong: needs exactly 2 ranks and "
				"positive counts\n");
		MPI_Finalize();
		return 2;
	}
	sbuf = malloc(65536);
	rbuf = malloc(65536);
	bufs = malloc(max);
	if (!sbuf || !rbuf || !bufs)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (size_t i = 0; i < sizeof(lat_sizes) / sizeof(lat_sizes[0]); i++)
		latency(lat_sizes[i], lat_iters, sbuf, rbuf);
	bandwidth(bw_size, bw_iters, bufs);
	MPI_Reduce(&verified, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("verified %llu bytes\n", (unsigned long long)total);
	free(bufs);
	free(rbuf);
	free(sbuf);
	MPI_Finalize();
	return 0;
}
