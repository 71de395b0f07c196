/*
 * ibverbsd: command line, start-up, signals and shutdown.
 *
 * Start-up does everything that can fail (config, devices, socket) before
 * detaching, so errors reach the terminal or the journal; the event loop
 * is created afterwards because libevent's backends do not survive fork.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "cm/cm.h"
#include "config/config.h"
#include "core/device.h"
#include "devices.h"
#include "engine/watch/copy_watch.h"
#include "engine/engine.h"
#include "frame.h"
#include "log.h"
#include "netdev_watch.h"
#include "devlinks.h"
#include "leftovers.h"
#include "netraw.h"
#include "privilege.h"
#include "reload.h"
#include "request.h"
#include "server/daemon.h"
#include "server/notify.h"
#include "server/server.h"
#include "server/session.h"
#include "verbs/async.h"
#include "verbs/context.h"
#include "verbs/verbs.h"

#define EXIT_USAGE	2

enum { OPT_SOCKET = 256, OPT_SYSTEMD, OPT_DEVICE_LINKS, OPT_USER };

static const struct option long_options[] = {
	{ "foreground",	no_argument,		NULL, 'f' },
	{ "config",	required_argument,	NULL, 'c' },
	{ "socket",	required_argument,	NULL, OPT_SOCKET },
	{ "systemd",	no_argument,		NULL, OPT_SYSTEMD },
	{ "device-links", required_argument,	NULL, OPT_DEVICE_LINKS },
	{ "user",	required_argument,	NULL, OPT_USER },
	{ "verbose",	no_argument,		NULL, 'v' },
	{ "help",	no_argument,		NULL, 'h' },
	{ "version",	no_argument,		NULL, 'V' },
	{ NULL, 0, NULL, 0 }
};

struct options {
	int foreground;
	const char *config;
	const char *socket;
	int systemd;
	const char *device_links;	/* "make", "add", "remove": one shot */
	const char *user;		/* overrides the config's "user" */
	unsigned int verbosity;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ibverbsd [-fv] [-c file] [--socket path] [--user name] [--systemd]\n"
		   "       ibverbsd [-c file] --device-links make|add|remove\n");
}

/* --device-links' argument as a step, or -1. */
static int devlinks_step(const char *arg)
{
	static const char *const names[] = {
		[IBVD_DEVLINKS_MAKE] = "make",
		[IBVD_DEVLINKS_ADD] = "add",
		[IBVD_DEVLINKS_REMOVE] = "remove",
	};
	unsigned int i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(arg, names[i]) == 0)
			return (int)i;
	return -1;
}

static void parse_options(int argc, char **argv, struct options *opts)
{
	int c;

	while ((c = getopt_long(argc, argv, "fc:vhV", long_options, NULL)) != -1) {
		switch (c) {
		case 'f':		opts->foreground = 1; break;
		case 'c':		opts->config = optarg; break;
		case OPT_SOCKET:	opts->socket = optarg; break;
		case OPT_SYSTEMD:	opts->systemd = 1; break;
		case OPT_DEVICE_LINKS:	opts->device_links = optarg; break;
		case OPT_USER:		opts->user = optarg; break;
		case 'v':		opts->verbosity++; break;
		case 'h':
			usage(stdout);
			exit(EXIT_SUCCESS);
		case 'V':
			printf("ibverbsd %s (protocol %d)\n", PACKAGE_VERSION,
			       IBVD_PROTO_VERSION);
			exit(EXIT_SUCCESS);
		default:
			usage(stderr);
			exit(EXIT_USAGE);
		}
	}
	if (opts->device_links && devlinks_step(opts->device_links) < 0) {
		fprintf(stderr, "ibverbsd: --device-links takes make, add or remove\n");
		usage(stderr);
		exit(EXIT_USAGE);
	}
	if (optind < argc) {
		fprintf(stderr, "ibverbsd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		exit(EXIT_USAGE);
	}
}

/* ---- configuration ---------------------------------------------------- */

/*
 * After daemonizing the working directory is "/": keep relative paths
 * given on the command line meaningful for reloads and for unlinking.
 */
static char *absolute_path(const char *path)
{
	char cwd[4096];
	char *abs;

	if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return strdup(path);
	if (asprintf(&abs, "%s/%s", cwd, path) < 0)
		return NULL;
	return abs;
}

/* ---- process setup ---------------------------------------------------- */

/*
 * Whatever our starter left open (a root shell's files, its terminal's
 * other fds) would outlive the drop of privilege: keep stdin, stdout,
 * stderr and the sockets systemd passes (LISTEN_FDS) only.
 */
static void close_inherited_fds(void)
{
	int passed = sd_listen_fds(0);
	unsigned int first = SD_LISTEN_FDS_START + (passed > 0 ? (unsigned int)passed : 0);

	if (close_range(first, ~0u, 0) < 0)
		fprintf(stderr, "ibverbsd: warning: cannot close inherited fds: %s\n",
			strerror(errno));
}

/* Each context holds two fds; let the connection cap, not the rlimit, bite. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warn("cannot raise the open-file limit: %s", strerror(errno));
}

static void redirect_to_null(int fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null < 0)
		return;
	if (null != fd) {
		dup2(null, fd);
		close(null);
	}
}

/*
 * Classic double fork.  stderr stays open unless it is a terminal, so that
 * "ibverbsd 2>>/var/log/ibverbsd.log" keeps a log.
 */
static int daemonize(void)
{
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(EXIT_SUCCESS);
	if (setsid() < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(EXIT_SUCCESS);
	if (chdir("/") < 0)
		return -errno;
	redirect_to_null(STDIN_FILENO);
	redirect_to_null(STDOUT_FILENO);
	if (isatty(STDERR_FILENO))
		redirect_to_null(STDERR_FILENO);
	return 0;
}

/* ---- signals ---------------------------------------------------------- */

struct signal_events {
	struct event *term, *intr, *hup;
};

static void stop_cb(evutil_socket_t sig, short what, void *arg)
{
	struct ibvd_daemon *d = arg;

	log_notice("received %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
	ibvd_notify_stopping(d->notify);
	event_base_loopbreak(d->base);
}

static void reload_cb(evutil_socket_t sig, short what, void *arg)
{
	struct ibvd_daemon *d = arg;
	char err[512];

	log_info("received SIGHUP, reloading %s", ibvd_daemon_config_name(d));
	ibvd_daemon_reload(d, err, sizeof(err));
}

static int add_signal(struct ibvd_daemon *d, struct event **ev, int sig,
		      event_callback_fn cb)
{
	*ev = evsignal_new(d->base, sig, cb, d);
	if (!*ev || evsignal_add(*ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

static int setup_signals(struct ibvd_daemon *d, struct signal_events *sigs)
{
	signal(SIGPIPE, SIG_IGN);
	if (add_signal(d, &sigs->term, SIGTERM, stop_cb) < 0 ||
	    add_signal(d, &sigs->intr, SIGINT, stop_cb) < 0 ||
	    add_signal(d, &sigs->hup, SIGHUP, reload_cb) < 0)
		return -ENOMEM;
	return 0;
}

static void free_signals(struct signal_events *sigs)
{
	if (sigs->term)
		event_free(sigs->term);
	if (sigs->intr)
		event_free(sigs->intr);
	if (sigs->hup)
		event_free(sigs->hup);
}

/* ---- start-up and shutdown -------------------------------------------- */

static void fatal_startup(int err, const char *message)
{
	log_err("%s", message);
	ibvd_notify_failure(err, message);
	exit(EXIT_FAILURE);
}

static void free_devices(struct ibvd_daemon *d)
{
	struct ibvd_device *dev;

	while ((dev = TAILQ_FIRST(&d->devices))) {
		TAILQ_REMOVE(&d->devices, dev, link);
		ibvd_devices_drop(dev);
	}
	d->ndevices = 0;
}

/* Config, devices and socket: everything that may fail before detaching. */
static void prepare(struct ibvd_daemon *d)
{
	struct ibvd_device_list removed = TAILQ_HEAD_INITIALIZER(removed);
	const char *path;
	char err[512];
	int ret;

	d->cfg = ibvd_daemon_load_config(d, err, sizeof(err));
	if (!d->cfg)
		fatal_startup(EINVAL, err);
	ibvd_daemon_apply_log_level(d);
	ret = ibvd_devices_apply(&d->devices, &d->ndevices, d->cfg,
				 &d->next_ifindex, &removed, NULL, err, sizeof(err));
	if (ret < 0)
		fatal_startup(-ret, err);
	ibvd_devlinks_sync(IBVD_DEVLINKS_DIR, &d->devices, d->cfg->device_links);
	path = d->socket_arg ? d->socket_arg :
	       d->cfg->socket_path ? d->cfg->socket_path : IBVERBSD_DEFAULT_SOCKET;
	ret = ibvd_server_open(&d->server, path, d->cfg->socket_mode,
			       d->cfg->socket_group, err, sizeof(err));
	if (ret < 0)
		fatal_startup(-ret, err);
	d->socket_path = strdup(ibvd_server_path(d->server));
	if (!d->socket_path)
		fatal_startup(ENOMEM, "out of memory");
}

/*
 * Everything privileged is done (socket, devices, links): give it all up
 * (privilege.h).  Under socket activation the socket is systemd's.
 */
static void drop_privileges(struct ibvd_daemon *d, const char *user_arg)
{
	const char *user = user_arg ? user_arg : d->cfg->user;
	char err[512];
	int ret;

	ret = ibvd_privilege_drop(user, ibvd_server_activated(d->server) ?
				  NULL : d->socket_path, err, sizeof(err));
	if (ret < 0)
		fatal_startup(-ret, err);
}

static int start_loop(struct ibvd_daemon *d, struct signal_events *sigs)
{
	int ret;

	d->base = event_base_new();
	d->rxbuf = malloc(IBVD_FRAME_MAX);
	if (!d->base || !d->rxbuf)
		return -ENOMEM;
	clock_gettime(CLOCK_MONOTONIC, &d->started);
	if (setup_signals(d, sigs) < 0)
		return -ENOMEM;
	d->notify = ibvd_notify_new(d);
	/* After daemonizing: threads do not survive fork. */
	/* before any copy of client memory, on any thread */
	ret = ibvd_copy_watch_start(d->cfg->engine_stuck_copy_ms, "control thread");
	if (ret < 0)
		return ret;
	ret = ibvd_async_start(d->base);
	if (ret < 0)
		return ret;
	ret = ibvd_engine_start(d->cfg->engine_threads, &ibvd_verbs_engine_events);
	if (ret < 0)
		return ret;
	ibvd_direct_configure(d->cfg->engine_direct);
	ibvd_staging_configure(d->cfg->engine_staging);
	/* Even without RoCE devices: a reload may add some. */
	ret = ibvd_netdev_watch_start(d, &d->netdev_watch);
	if (ret < 0)
		return ret;
	/* The CM hears other hosts on the RoCE devices' QP1. */
	ret = ibvd_cm_start(d);
	if (ret < 0)
		return ret;
	return ibvd_server_start(d->server, d);
}

static void shutdown_daemon(struct ibvd_daemon *d, struct signal_events *sigs)
{
	/* Listener first, so that nobody connects while we tear down. */
	ibvd_server_free(d->server);
	ibvd_session_close_all(d);
	/* Every context is gone, so no engine thread serves anything. */
	ibvd_engine_stop();
	ibvd_async_stop();
	ibvd_copy_watch_stop();
	ibvd_channel_spares_free();
	ibvd_netdev_watch_free(d->netdev_watch);
	ibvd_cm_stop();
	ibvd_devlinks_remove_all();
	free_devices(d);
	ibvd_netraw_stop();
	ibvd_leftovers_finish();
	ibvd_notify_free(d->notify);
	free_signals(sigs);
	if (d->base)
		event_base_free(d->base);
	ibvd_config_free(d->cfg);
	free(d->rxbuf);
	free(d->socket_path);
	free((char *)d->config_arg);
	free((char *)d->socket_arg);
	libevent_global_shutdown();
}

/* ibverbsd --device-links make|add|remove: the links alone, then exit. */
static int device_links_oneshot(struct ibvd_daemon *d,
				enum ibvd_devlinks_step step)
{
	char err[512];
	int ret;

	d->cfg = ibvd_daemon_load_config(d, err, sizeof(err));
	if (!d->cfg) {
		log_err("%s", err);
		return EXIT_FAILURE;
	}
	ret = ibvd_devlinks_oneshot(IBVD_DEVLINKS_DIR, d->cfg, step);
	ibvd_config_free(d->cfg);
	free((char *)d->config_arg);
	free((char *)d->socket_arg);
	return ret < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	struct options opts = { 0 };
	struct signal_events sigs = { 0 };
	struct ibvd_daemon d = { 0 };
	int ret;

	close_inherited_fds();
	parse_options(argc, argv, &opts);
	ibvd_log_init("ibverbsd", ibvd_log_level_for(IBVD_LOG_INFO, opts.verbosity));
	d.up.request_find = ibvd_request_type_find;
	d.up.context_leave = ibvd_context_leave;
	d.up.cm_free = ibvd_cm_session_free;
	d.up.cm_context_going = ibvd_cm_context_going;
	d.up.reload = ibvd_daemon_reload;
	ibvd_verbs_cm.qp_init = ibvd_cm_qp_init;
	TAILQ_INIT(&d.devices);
	TAILQ_INIT(&d.sessions);
	d.verbosity = opts.verbosity;
	d.systemd = opts.systemd;
	d.config_arg = opts.config ? absolute_path(opts.config) : NULL;
	d.socket_arg = opts.socket ? absolute_path(opts.socket) : NULL;
	if ((opts.config && !d.config_arg) || (opts.socket && !d.socket_arg))
		fatal_startup(ENOMEM, "out of memory");
	if (opts.device_links)
		return device_links_oneshot(&d, devlinks_step(opts.device_links));
	raise_fd_limit();
	prepare(&d);
	if (!opts.foreground && !opts.systemd) {
		ret = daemonize();
		if (ret < 0)
			fatal_startup(-ret, "cannot detach from the terminal");
	}
	/* Before any thread starts: the broker is forked here. */
	drop_privileges(&d, opts.user);
	ret = start_loop(&d, &sigs);
	if (ret < 0) {
		log_err("cannot set up the event loop: %s", strerror(-ret));
		ibvd_notify_failure(-ret, "cannot set up the event loop");
		shutdown_daemon(&d, &sigs);
		return EXIT_FAILURE;
	}
	log_notice("ibverbsd %s serving %u device%s on %s%s", PACKAGE_VERSION,
		   d.ndevices, d.ndevices == 1 ? "" : "s", d.socket_path,
		   ibvd_server_activated(d.server) ? " (socket activation)" : "");
	/*
	 * The spare channel pairs are all made before the first client, so
	 * the daemon's fds are as many idle as after any load (idle polls
	 * only put back what requests took).
	 */
	while (ibvd_channel_spare_make())
		;
	ibvd_notify_ready(d.notify);
	ret = ibvd_server_run(d.base, ibvd_channel_spare_make);
	if (ret < 0)
		log_err("event loop failed");
	shutdown_daemon(&d, &sigs);
	return ret < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
