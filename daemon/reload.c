/*
 * Configuration reload (SIGHUP, "ibvctl daemon reload").
 *
 * Either the whole new configuration applies or none of it: the file is
 * parsed and the device set validated before anything changes.  Devices
 * that keep their identity keep their clients; removed ones tell their
 * contexts IBV_EVENT_DEVICE_FATAL and drop them.  The socket path stays
 * what it was at start (moving it under running clients helps nobody).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "cm/cm.h"
#include "config/config.h"
#include "devices.h"
#include "devlinks.h"
#include "engine/watch/copy_watch.h"
#include "log.h"
#include "reload.h"
#include "server/notify.h"
#include "server/server.h"
#include "server/session.h"
#include "verbs/async.h"
#include "verbs/context.h"
#include "verbs/verbs.h"

enum ibvd_log_level ibvd_log_level_for(int base, unsigned int verbosity)
{
	unsigned int level;

	if (base < IBVD_LOG_ERR || base > IBVD_LOG_DEBUG)
		base = IBVD_LOG_INFO;
	level = (unsigned int)base + verbosity;
	return level > IBVD_LOG_DEBUG ? IBVD_LOG_DEBUG : (enum ibvd_log_level)level;
}

void ibvd_daemon_apply_log_level(const struct ibvd_daemon *d)
{
	ibvd_log_set_level(ibvd_log_level_for(d->cfg->log_level, d->verbosity));
}

struct ibvd_config *ibvd_daemon_load_config(const struct ibvd_daemon *d,
					    char *err, size_t errlen)
{
	struct ibvd_config *cfg;

	if (d->config_arg)
		return ibvd_config_load_over(d->config_arg, d->cfg, err, errlen);
	/*
	 * No config file is fine; one we cannot read is not.  Nor is one
	 * that went away since we read it: a reload in the instant an editor
	 * or a package upgrade replaces the file must not fall back to the
	 * built-in defaults, which lift every limit.
	 */
	if (access(IBVD_DEFAULT_CONFIG, F_OK) == 0 || errno != ENOENT ||
	    (d->cfg && d->cfg->path))
		return ibvd_config_load_over(IBVD_DEFAULT_CONFIG, d->cfg, err, errlen);
	cfg = ibvd_config_default();
	if (!cfg)
		snprintf(err, errlen, "out of memory");
	return cfg;
}

static int same_string(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The socket settings a reload applies, as its devices' last step. */
struct socket_step {
	struct ibvd_daemon *d;
	const struct ibvd_config *old, *cfg;
};

/*
 * The socket's mode and group: the last step of a reload that may fail
 * (a daemon that dropped its privileges may not give the socket to
 * another group), after every other, so that a reload refused for any
 * reason leaves the socket as it was, and one refused for this leaves
 * everything as it was (ibvd_server_set_access undoes its own steps).
 */
static int apply_socket_settings(void *arg, char *err, size_t errlen)
{
	const struct socket_step *st = arg;
	char why[200];

	/* Irrelevant under --socket or socket activation: we never used it. */
	if (!st->d->socket_arg && !ibvd_server_activated(st->d->server) &&
	    !same_string(st->old->socket_path, st->cfg->socket_path))
		log_warn("socket path changed to %s: ignored until restart (still serving %s)",
			 st->cfg->socket_path ? st->cfg->socket_path : "(default)",
			 st->d->socket_path);
	if (st->old->socket_mode == st->cfg->socket_mode &&
	    same_string(st->old->socket_group, st->cfg->socket_group))
		return 0;
	if (ibvd_server_set_access(st->d->server, st->cfg->socket_mode,
				   st->cfg->socket_group, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "socket permissions: %s", why);
		return -EPERM;
	}
	return 0;
}

/* What a reload cannot change: said, so that nobody waits for it. */
static void warn_restart_only(const struct ibvd_config *old,
			      const struct ibvd_config *cfg)
{
	if (!same_string(old->user, cfg->user))
		log_warn("\"user\" changed to %s: ignored until restart",
			 cfg->user ? cfg->user : "(none)");
	if (old->engine_threads != cfg->engine_threads)
		log_warn("engine.threads changed: ignored until restart");
}

/* Tell the contexts of each removed device, drop them, free the device. */
static void drop_removed_devices(struct ibvd_device_list *removed)
{
	struct ibvd_device *dev;
	struct ibvd_context *ctx;

	while ((dev = TAILQ_FIRST(removed))) {
		TAILQ_REMOVE(removed, dev, link);
		log_notice("device %s removed; closing its %u context%s",
			   dev->name, dev->ncontexts, dev->ncontexts == 1 ? "" : "s");
		ibvd_async_device_event(dev, IBV_EVENT_DEVICE_FATAL);
		/* CM ids are not contexts: they learn it and stay, deviceless. */
		ibvd_cm_device_removed(dev);
		/* Closing a session frees its context, which unlinks it. */
		while ((ctx = TAILQ_FIRST(&dev->contexts)))
			ibvd_session_close(ctx->session);
		ibvd_devices_drop(dev);
	}
}

static void announce_changes(struct ibvd_daemon *d, uint32_t first_new_ifindex)
{
	struct ibvd_device *dev;
	unsigned int p;

	TAILQ_FOREACH(dev, &d->devices, link) {
		if (dev->ifindex >= first_new_ifindex) {
			log_notice("device %s added", dev->name);
			continue;
		}
		for (p = 0; p < dev->nports; p++) {
			if (!dev->ports[p].lid_changed)
				continue;
			log_notice("device %s port %u: LID is now %u", dev->name,
				   p + 1, dev->ports[p].lid);
			ibvd_async_port_event(dev, p + 1, IBV_EVENT_LID_CHANGE);
			dev->ports[p].lid_changed = 0;
		}
	}
}

int ibvd_daemon_reload(struct ibvd_daemon *d, char *err, size_t errlen)
{
	struct ibvd_device_list removed = TAILQ_HEAD_INITIALIZER(removed);
	uint32_t first_new_ifindex = d->next_ifindex;
	struct socket_step socket = { .d = d };
	struct ibvd_devices_last_step last = { apply_socket_settings, &socket };
	struct ibvd_config *cfg, *old;
	int ret;

	ibvd_notify_reloading(d->notify);
	cfg = ibvd_daemon_load_config(d, err, errlen);
	if (!cfg) {
		ret = -EINVAL;
		goto out;
	}
	socket.old = d->cfg;
	socket.cfg = cfg;
	ret = ibvd_devices_apply(&d->devices, &d->ndevices, cfg,
				 &d->next_ifindex, &removed, &last, err, errlen);
	if (ret < 0) {
		ibvd_config_free(cfg);
		goto out;
	}
	old = d->cfg;
	d->cfg = cfg;
	/* sessions made from now on; those that exist keep what they had */
	ibvd_server_lookup_admin(d->server);
	warn_restart_only(old, cfg);
	ibvd_daemon_apply_log_level(d);
	/* live: what tenants hold stays, their next requests see these */
	ibvd_tenants_apply(cfg);
	/* a bandwidth limit holds at once: no SENDs past the engine */
	ibvd_direct_limits_changed();
	/* pairs made from now on; those that exist stay */
	ibvd_direct_configure(cfg->engine_direct);
	ibvd_staging_configure(cfg->engine_staging);
	ibvd_copy_watch_configure(cfg->engine_stuck_copy_ms);
	ibvd_config_free(old);
	drop_removed_devices(&removed);
	ibvd_devlinks_sync(IBVD_DEVLINKS_DIR, &d->devices, cfg->device_links);
	announce_changes(d, first_new_ifindex);
	log_info("configuration reloaded from %s: %u device%s",
		 ibvd_daemon_config_name(d), d->ndevices, d->ndevices == 1 ? "" : "s");
out:
	if (ret < 0)
		log_err("reload failed, keeping the running configuration: %s", err);
	ibvd_notify_ready(d->notify);
	return ret;
}
