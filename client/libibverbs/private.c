/*
 * The IBVERBS_PRIVATE_34 node: rdma-core's interface to its provider
 * libraries.  We have no providers, but Debian's libmlx5 and libefa get
 * loaded anyway (perftest links them, pyverbs imports them), bind to these
 * names at start-up (BIND_NOW) and call verbs_register_driver_34() from
 * their constructors before main().  So every name must exist, the
 * registration must be a harmless no-op, and anything else, should a
 * provider ever reach it, must fail cleanly.
 *
 * rdma-core declares these in driver.h, which Debian does not install, and
 * no caller ever runs on our devices, so we declare them minimally here and
 * ignore all arguments.  (On the SysV ABIs we build for, a caller passing
 * arguments to a function declared without parameters is harmless.)
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* A provider command that fails with EOPNOTSUPP (returned, and in errno). */
#define PRIVATE_CMD(name)						\
	int name(void);							\
	int name(void)							\
	{								\
		errno = EOPNOTSUPP;					\
		return EOPNOTSUPP;					\
	}

/* A provider helper with nothing to do. */
#define PRIVATE_NOOP(name)						\
	void name(void);						\
	void name(void)							\
	{								\
	}

/*
 * Read by providers when a device is disassociated (hot-unplugged); a data
 * object, not a function: libmlx5 has a GLOB_DAT relocation against it.
 */
bool verbs_allow_disassociate_destroy;

/* Called by every provider's constructor with its ops; never dereferenced. */
PRIVATE_NOOP(verbs_register_driver_34)
PRIVATE_NOOP(verbs_set_ops)
PRIVATE_NOOP(verbs_uninit_context)
PRIVATE_NOOP(verbs_init_cq)
PRIVATE_NOOP(__verbs_log)

void *_verbs_init_and_alloc_context(void);
void *_verbs_init_and_alloc_context(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void *verbs_open_device(void);
void *verbs_open_device(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* Reads "<device's sysfs dir>/<fmt...>": our devices have none. */
int ibv_read_ibdev_sysfs_file(void);
int ibv_read_ibdev_sysfs_file(void)
{
	errno = ENOENT;
	return -1;
}

/*
 * Sizes a command buffer chain on the caller's stack: answering with the
 * caller's own count (first argument) keeps that allocation sane.
 */
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	return num_attrs;
}

/* A poll verb: a positive result would be a completion count. */
int ibv_cmd_poll_cq(void);
int ibv_cmd_poll_cq(void)
{
	errno = EOPNOTSUPP;
	return -1;
}

PRIVATE_CMD(execute_ioctl)
PRIVATE_CMD(ibv_cmd_advise_mr)
PRIVATE_CMD(ibv_cmd_alloc_dm)
PRIVATE_CMD(ibv_cmd_alloc_mw)
PRIVATE_CMD(ibv_cmd_alloc_pd)
PRIVATE_CMD(ibv_cmd_attach_mcast)
PRIVATE_CMD(ibv_cmd_close_xrcd)
PRIVATE_CMD(ibv_cmd_create_ah)
PRIVATE_CMD(ibv_cmd_create_counters)
PRIVATE_CMD(ibv_cmd_create_cq)
PRIVATE_CMD(ibv_cmd_create_cq_ex)
PRIVATE_CMD(ibv_cmd_create_flow)
PRIVATE_CMD(ibv_cmd_create_flow_action_esp)
PRIVATE_CMD(ibv_cmd_create_qp)
PRIVATE_CMD(ibv_cmd_create_qp_ex)
PRIVATE_CMD(ibv_cmd_create_qp_ex2)
PRIVATE_CMD(ibv_cmd_create_rwq_ind_table)
PRIVATE_CMD(ibv_cmd_create_srq)
PRIVATE_CMD(ibv_cmd_create_srq_ex)
PRIVATE_CMD(ibv_cmd_create_wq)
PRIVATE_CMD(ibv_cmd_dealloc_mw)
PRIVATE_CMD(ibv_cmd_dealloc_pd)
PRIVATE_CMD(ibv_cmd_dereg_mr)
PRIVATE_CMD(ibv_cmd_destroy_ah)
PRIVATE_CMD(ibv_cmd_destroy_counters)
PRIVATE_CMD(ibv_cmd_destroy_cq)
PRIVATE_CMD(ibv_cmd_destroy_flow)
PRIVATE_CMD(ibv_cmd_destroy_flow_action)
PRIVATE_CMD(ibv_cmd_destroy_qp)
PRIVATE_CMD(ibv_cmd_destroy_rwq_ind_table)
PRIVATE_CMD(ibv_cmd_destroy_srq)
PRIVATE_CMD(ibv_cmd_destroy_wq)
PRIVATE_CMD(ibv_cmd_detach_mcast)
PRIVATE_CMD(ibv_cmd_free_dm)
PRIVATE_CMD(ibv_cmd_get_context)
PRIVATE_CMD(ibv_cmd_modify_cq)
PRIVATE_CMD(ibv_cmd_modify_flow_action_esp)
PRIVATE_CMD(ibv_cmd_modify_qp)
PRIVATE_CMD(ibv_cmd_modify_qp_ex)
PRIVATE_CMD(ibv_cmd_modify_srq)
PRIVATE_CMD(ibv_cmd_modify_wq)
PRIVATE_CMD(ibv_cmd_open_qp)
PRIVATE_CMD(ibv_cmd_open_xrcd)
PRIVATE_CMD(ibv_cmd_post_recv)
PRIVATE_CMD(ibv_cmd_post_send)
PRIVATE_CMD(ibv_cmd_post_srq_recv)
PRIVATE_CMD(ibv_cmd_query_context)
PRIVATE_CMD(ibv_cmd_query_device_any)
PRIVATE_CMD(ibv_cmd_query_mr)
PRIVATE_CMD(ibv_cmd_query_port)
PRIVATE_CMD(ibv_cmd_query_qp)
PRIVATE_CMD(ibv_cmd_query_srq)
PRIVATE_CMD(ibv_cmd_read_counters)
PRIVATE_CMD(ibv_cmd_reg_dm_mr)
PRIVATE_CMD(ibv_cmd_reg_dmabuf_mr)
PRIVATE_CMD(ibv_cmd_reg_mr)
PRIVATE_CMD(ibv_cmd_req_notify_cq)
PRIVATE_CMD(ibv_cmd_rereg_mr)
PRIVATE_CMD(ibv_cmd_resize_cq)
