/*
 * mpi-coll-rma: collectives and one-sided communication, every result
 * checked.  Usage: mpi-coll-rma [ITERS [COUNT [no-cas]]] (default 10,
 * 65536 int64).
 *
 * Each iteration: MPI_Allreduce of 1 and COUNT elements, MPI_Alltoall,
 * and MPI_Bcast of 1, COUNT/64 and COUNT elements from a root that moves
 * round the ranks.  Then, on a window MPI_Win_allocate made and on one
 * MPI_Win_create made over memory of the program's own: MPI_Put and
 * MPI_Get to the right-hand rank and MPI_Accumulate to every rank, each
 * closed by MPI_Win_fence; an MPI_Put under an exclusive MPI_Win_lock and
 * an MPI_Get under a shared one; under MPI_Win_lock_all with
 * MPI_Win_flush, MPI_Fetch_and_op and an MPI_Compare_and_swap loop on
 * rank 0, of 64-bit elements, and the same on a window of 32-bit ones.
 * With "no-cas", MPI_Fetch_and_op makes the increments MPI_Compare_and_swap
 * would (Open MPI 4.1's osc rdma hands its BTL a null target handle for
 * MPI_Compare_and_swap, and the BTL dereferences it).
 * Rank 0 prints "verified: 0 errors, ..." when every rank found every
 * value as it must be, and the job exits 0; otherwise "FAILED" and 1.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read-modify-write rounds each rank makes on rank 0's counters */
#define ROUNDS	10

static int rank, size, errs;
static int no_cas;	/* MPI_Fetch_and_op instead of MPI_Compare_and_swap */

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond) && errs++ < 10) {				\
			fprintf(stderr, "rank %d: ", rank);		\
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
		}							\
	} while (0)

/* What rank r puts in iteration it at index i (its own tag in the top bits) */
static int64_t val(int r, size_t i, int it)
{
	return ((int64_t)r << 32) | (int64_t)(i * 3 + (size_t)it);
}

static void allreduce(int64_t *a, int64_t *b, size_t n, int it)
{
	int64_t sum = (int64_t)size * (size + 1) / 2;
	size_t i;

	for (i = 0; i < n; i++)
		a[i] = (int64_t)(rank + 1) * (int64_t)(i + (size_t)it);
	MPI_Allreduce(a, b, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	for (i = 0; i < n; i++)
		CHECK(b[i] == sum * (int64_t)(i + (size_t)it), "allreduce %zu %d/%zu", n, it, i);
}

/* Bcast of n elements from the root this iteration and size pick */
static void bcast(int64_t *a, size_t n, int it)
{
	int root = (it + (int)(n % 7)) % size;
	size_t i;

	for (i = 0; i < n; i++)
		a[i] = rank == root ? val(root, i, it) : -1;
	MPI_Bcast(a, (int)n, MPI_INT64_T, root, MPI_COMM_WORLD);
	for (i = 0; i < n; i++)
		CHECK(a[i] == val(root, i, it), "bcast %zu from %d %d/%zu", n, root, it, i);
}

static void collectives(int64_t *a, int64_t *b, size_t n, int it)
{
	size_t per = n / (size_t)size, i;
	int p;

	allreduce(a, b, 1, it);
	allreduce(a, b, n, it);
	for (p = 0; p < size; p++)
		for (i = 0; i < per; i++)
			a[(size_t)p * per + i] = val(rank, i, it) ^ ((int64_t)p << 48);
	MPI_Alltoall(a, (int)per, MPI_INT64_T, b, (int)per, MPI_INT64_T, MPI_COMM_WORLD);
	for (p = 0; p < size; p++)
		for (i = 0; i < per; i++)
			CHECK(b[(size_t)p * per + i] == (val(p, i, it) ^ ((int64_t)rank << 48)),
			      "alltoall %d/%d/%zu", it, p, i);
	bcast(a, 1, it);
	bcast(a, n / 64 ? n / 64 : 1, it);
	bcast(a, n, it);
}

/*
 * rmw_TYPE: 2 * ROUNDS increments of rank 0's element at disp, of TYPE,
 * under MPI_Win_lock_all: ROUNDS by MPI_Compare_and_swap, each retried
 * from the value it found until it lands, then ROUNDS by
 * MPI_Fetch_and_op (or, with no_cas, 2 * ROUNDS by MPI_Fetch_and_op).
 * Every rank at once: an increment lost to a torn or non-atomic update
 * shows in the count rank 0 checks.
 */
#define RMW(type, mpitype)						\
static void rmw_##type(MPI_Win win, MPI_Aint disp)			\
{									\
	type one = 1, seen, want, got;					\
	int k;								\
									\
	MPI_Win_lock_all(0, win);					\
	MPI_Fetch_and_op(&one, &seen, mpitype, 0, disp, MPI_NO_OP, win); \
	MPI_Win_flush(0, win);						\
	for (k = 0; k < ROUNDS && !no_cas; k++) {			\
		for (;;) {						\
			want = (type)(seen + 1);			\
			MPI_Compare_and_swap(&want, &seen, &got, mpitype, 0, disp, win); \
			MPI_Win_flush(0, win);				\
			if (got == seen)				\
				break;					\
			seen = got;					\
		}							\
		seen = want;						\
	}								\
	for (k = 0; k < (no_cas ? 2 : 1) * ROUNDS; k++) {		\
		MPI_Fetch_and_op(&one, &got, mpitype, 0, disp, MPI_SUM, win); \
		MPI_Win_flush(0, win);					\
	}								\
	MPI_Win_unlock_all(win);					\
}
RMW(int64_t, MPI_INT64_T)
RMW(int32_t, MPI_INT32_T)

static void one_sided(MPI_Win win, int64_t *w, int64_t *a, int64_t *b, size_t n, int it)
{
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	int64_t sum = (int64_t)size * (size + 1) / 2;
	size_t i;
	int k;

	/* active target: fence epochs */
	MPI_Win_fence(0, win);
	for (i = 0; i < n; i++)
		w[i] = -1;
	MPI_Win_fence(0, win);
	for (i = 0; i < n; i++)
		a[i] = val(rank, i, it);
	MPI_Put(a, (int)n, MPI_INT64_T, right, 0, (int)n, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < n; i++)
		CHECK(w[i] == val(left, i, it), "put/fence %d/%zu", it, i);
	MPI_Get(b, (int)n, MPI_INT64_T, right, 0, (int)n, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < n; i++)
		CHECK(b[i] == val(rank, i, it), "get/fence %d/%zu", it, i);
	for (i = 0; i < n; i++)
		a[i] = rank + 1;
	for (k = 0; k < size; k++)
		MPI_Accumulate(a, (int)n, MPI_INT64_T, k, 0, (int)n, MPI_INT64_T, MPI_SUM, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < n; i++)
		CHECK(w[i] == val(left, i, it) + sum, "accumulate/fence %d/%zu", it, i);
	MPI_Win_fence(0, win);

	/* passive target: lock and unlock */
	for (i = 0; i < n; i++)
		a[i] = val(rank + 7, i, it);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
	MPI_Put(a, (int)n, MPI_INT64_T, right, 0, (int)n, MPI_INT64_T, win);
	MPI_Win_unlock(right, win);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win);
	MPI_Get(b, (int)n, MPI_INT64_T, left, 0, (int)n, MPI_INT64_T, win);
	MPI_Win_unlock(left, win);
	for (i = 0; i < n; i++)	/* left's window: from left's left */
		CHECK(b[i] == val((left + size - 1) % size + 7, i, it), "get/lock %d/%zu", it, i);
	MPI_Barrier(MPI_COMM_WORLD);

	/* atomics: a counter in rank 0's last element */
	rmw_int64_t(win, (MPI_Aint)(n - 1));
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		CHECK(w[n - 1] == val(left + 7, n - 1, it) + 2 * ROUNDS * size,
		      "64-bit compare_and_swap and fetch_and_op %d: %lld", it,
		      (long long)(w[n - 1] - val(left + 7, n - 1, it)));
		MPI_Win_unlock(0, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
}

/* The 32-bit counters: element 1 of rank 0's window w32 of 4 */
static void one_sided32(MPI_Win win, int32_t *w, int it)
{
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
	w[1] = it * 1000;
	MPI_Win_unlock(rank, win);
	MPI_Barrier(MPI_COMM_WORLD);
	rmw_int32_t(win, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		CHECK(w[1] == it * 1000 + 2 * ROUNDS * size,
		      "32-bit compare_and_swap and fetch_and_op %d: %d", it,
		      (int)(w[1] - it * 1000));
		CHECK(w[0] == 0 && w[2] == 0 && w[3] == 0, "32-bit neighbours %d", it);
		MPI_Win_unlock(0, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 10, it, total;
	size_t n = argc > 2 ? (size_t)atol(argv[2]) : 65536;
	int64_t *a, *b, *w, *own;
	int32_t own32[4] = { 0 };
	MPI_Win win, win32;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	no_cas = argc > 3 && strcmp(argv[3], "no-cas") == 0;
	a = malloc(n * sizeof(*a));
	b = malloc(n * sizeof(*b));
	own = malloc(n * sizeof(*own));
	if (!a || !b || !own || iters < 1 || n < (size_t)size)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (it = 0; it < iters; it++)
		collectives(a, b, n, it);
	MPI_Win_allocate((MPI_Aint)(n * sizeof(*w)), sizeof(*w), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &w, &win);
	for (it = 0; it < iters; it++)
		one_sided(win, w, a, b, n, it);
	MPI_Win_free(&win);
	MPI_Win_create(own, (MPI_Aint)(n * sizeof(*own)), sizeof(*own), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &win);
	for (it = 0; it < iters; it++)
		one_sided(win, own, a, b, n, it);
	MPI_Win_free(&win);
	MPI_Win_create(own32, sizeof(own32), sizeof(*own32), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &win32);
	for (it = 0; it < iters; it++)
		one_sided32(win32, own32, it);
	MPI_Win_free(&win32);
	MPI_Allreduce(&errs, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: %d errors, %d iterations of %zu int64\n",
		       total ? "FAILED" : "verified", total, iters, n);
	free(own);
	free(a);
	free(b);
	MPI_Finalize();
	return total ? 1 : 0;
}
