/*
 * The libibverbs 1.0 ABI (2006): 33 verbs exist twice in Debian's library,
 * as name@@IBVERBS_1.1 (the real ones, defined elsewhere) and as hidden
 * name@IBVERBS_1.0 twins that converted the old struct layouts.  No program
 * we target imports a twin; they exist so that the export table matches
 * Debian's exactly.  We will never speak the 1.0 layouts, so each twin fails
 * with ENOSYS (and since ibv_get_device_list@IBVERBS_1.0 never yields a
 * device, no 1.0 object can reach the others).
 *
 * The symbol version needs a global function; the version script's
 * "local: *" keeps the compat_1_0_* names themselves out of the table.
 * Arguments are ignored, so the twins are declared without parameters.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Declares impl, exported as VER (name@VERSION): GCC 10's attribute, or
 * the assembler's directive where the compiler lacks it (clang 14).
 */
#if defined(__has_attribute) && __has_attribute(symver)
#define COMPAT_DECLARE(type, impl, ver)					\
	type impl(void) __attribute__((symver(ver)))
#else
#define COMPAT_DECLARE(type, impl, ver)					\
	type impl(void);						\
	__asm__(".symver " #impl ", " ver)
#endif

/* A 1.0 twin that fails: returns RET with errno set to ENOSYS. */
#define COMPAT_1_0(type, name, ret)					\
	COMPAT_DECLARE(type, compat_1_0_##name, #name "@IBVERBS_1.0");	\
	type compat_1_0_##name(void)					\
	{								\
		errno = ENOSYS;						\
		return ret;						\
	}

/* A 1.0 twin of a void verb (acks and frees): nothing to do. */
#define COMPAT_1_0_VOID(name)						\
	COMPAT_DECLARE(void, compat_1_0_##name, #name "@IBVERBS_1.0");	\
	void compat_1_0_##name(void)					\
	{								\
	}

/* Devices and contexts */
COMPAT_1_0(void *, ibv_get_device_list, NULL)
COMPAT_1_0_VOID(ibv_free_device_list)
COMPAT_1_0(const char *, ibv_get_device_name, NULL)
COMPAT_1_0(uint64_t, ibv_get_device_guid, 0)
COMPAT_1_0(void *, ibv_open_device, NULL)
COMPAT_1_0(int, ibv_close_device, ENOSYS)
COMPAT_1_0(int, ibv_get_async_event, -1)
COMPAT_1_0_VOID(ibv_ack_async_event)
COMPAT_1_0(int, ibv_query_device, ENOSYS)
COMPAT_1_0(int, ibv_query_port, ENOSYS)
COMPAT_1_0(int, ibv_query_gid, -1)
COMPAT_1_0(int, ibv_query_pkey, -1)

/* PDs, MRs, CQs */
COMPAT_1_0(void *, ibv_alloc_pd, NULL)
COMPAT_1_0(int, ibv_dealloc_pd, ENOSYS)
COMPAT_1_0(void *, ibv_reg_mr, NULL)
COMPAT_1_0(int, ibv_dereg_mr, ENOSYS)
COMPAT_1_0(void *, ibv_create_cq, NULL)
COMPAT_1_0(int, ibv_resize_cq, ENOSYS)
COMPAT_1_0(int, ibv_destroy_cq, ENOSYS)
COMPAT_1_0(int, ibv_get_cq_event, -1)
COMPAT_1_0_VOID(ibv_ack_cq_events)

/* SRQs, QPs, AHs, multicast */
COMPAT_1_0(void *, ibv_create_srq, NULL)
COMPAT_1_0(int, ibv_modify_srq, ENOSYS)
COMPAT_1_0(int, ibv_query_srq, ENOSYS)
COMPAT_1_0(int, ibv_destroy_srq, ENOSYS)
COMPAT_1_0(void *, ibv_create_qp, NULL)
COMPAT_1_0(int, ibv_query_qp, ENOSYS)
COMPAT_1_0(int, ibv_modify_qp, ENOSYS)
COMPAT_1_0(int, ibv_destroy_qp, ENOSYS)
COMPAT_1_0(void *, ibv_create_ah, NULL)
COMPAT_1_0(int, ibv_destroy_ah, ENOSYS)
COMPAT_1_0(int, ibv_attach_mcast, ENOSYS)
COMPAT_1_0(int, ibv_detach_mcast, ENOSYS)

/*
 * ibv_register_driver@IBVERBS_1.1 (hidden, no default version): how
 * pre-2018 provider libraries registered themselves.  We load no
 * providers, so a registration is accepted and forgotten.
 */
COMPAT_DECLARE(void, compat_ibv_register_driver,
	       "ibv_register_driver@IBVERBS_1.1");
void compat_ibv_register_driver(void)
{
}
