/*
 * What a daemon started as root leaves in root's directories (its socket,
 * the /dev/infiniband links), removed once it is gone (leftovers.c).
 */
#ifndef IBVD_LEFTOVERS_H
#define IBVD_LEFTOVERS_H

/*
 * Fork the process that waits for the daemon to end and then removes the
 * socket bound at socket_path (NULL: none of ours) and the device links
 * made so far.  0 or a negative errno.
 */
int ibvd_leftovers_start(const char *socket_path);

/*
 * At a clean shutdown: let it remove them now, and wait until it has, so
 * that they are gone when the daemon's exit is seen.
 */
void ibvd_leftovers_finish(void);

#endif /* IBVD_LEFTOVERS_H */
