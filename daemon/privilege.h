/*
 * Least privilege (ibverbsd(8), SECURITY): the daemon's last step of
 * start-up gives up every capability, and with "user" (or --user) started
 * as root, becomes that user.  Only RoCE devices' raw sockets need a
 * privilege once the daemon runs: if it holds CAP_NET_RAW, a broker that
 * keeps that one capability is started first (netraw.h).
 */
#ifndef IBVD_PRIVILEGE_H
#define IBVD_PRIVILEGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Who to become: a user's uid and primary gid. */
struct ibvd_identity {
	uid_t uid;
	gid_t gid;
};

/* name (a user name or a number) into *id: 0 or -ENOENT. */
int ibvd_privilege_lookup(const char *name, struct ibvd_identity *id);

/*
 * Keep only the capability keep (-1: none) and become to (NULL: stay who
 * we are).  Also sets no_new_privs.  0 or a negative errno.
 */
int ibvd_privilege_restrict(const struct ibvd_identity *to, int keep);

/* Is cap in this process's permitted set? */
bool ibvd_privilege_holds(int cap);

/*
 * The daemon's drop: the broker if CAP_NET_RAW is held, then
 * ibvd_privilege_restrict(user, none).  user may be NULL or empty.
 * socket_path (NULL under socket activation) is handed to the new user,
 * so that a reload can still change its mode.  0, or a negative errno
 * with a message in err.
 */
int ibvd_privilege_drop(const char *user, const char *socket_path,
			char *err, size_t errlen);

#endif /* IBVD_PRIVILEGE_H */
