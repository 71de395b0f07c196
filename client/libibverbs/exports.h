/*
 * Exported functions that Debian's <infiniband/verbs.h> does not declare:
 * rdma-core keeps their prototypes in driver.h and marshall.h, which
 * Debian does not install.  The signatures are rdma-core 44's.
 */
#ifndef IBVD_EXPORTS_H
#define IBVD_EXPORTS_H

#include <stddef.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* sysfs.c */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

/* fork.c */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

/* marshall.c: kernel uverbs ABI structs to verbs structs and back */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src);

#endif /* IBVD_EXPORTS_H */
