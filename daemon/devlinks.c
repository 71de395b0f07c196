/*
 * Device links under /dev/infiniband (devlinks.h).
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "devlinks.h"
#include "log.h"

#define LINK_TARGET	"/dev/null"

struct devlink {
	LIST_ENTRY(devlink) link;
	char name[IBVD_DEV_NAME_MAX];
	char path[PATH_MAX];
};

static LIST_HEAD(, devlink) made = LIST_HEAD_INITIALIZER(made);
/* The directory, if we made it: removed with the last link, if empty. */
static char made_dir[PATH_MAX];

static bool points_at_null(const char *path)
{
	char target[sizeof(LINK_TARGET) + 1];
	ssize_t n = readlink(path, target, sizeof(target));

	return n == (ssize_t)strlen(LINK_TARGET) &&
	       memcmp(target, LINK_TARGET, (size_t)n) == 0;
}

static struct devlink *find(const char *name)
{
	struct devlink *l;

	LIST_FOREACH(l, &made, link)
		if (strcmp(l->name, name) == 0)
			return l;
	return NULL;
}

/* 0755 whatever the umask (the unit's UMask=0077 would hide it). */
static int make_dir(const char *dir)
{
	if (mkdir(dir, 0755) == 0) {
		chmod(dir, 0755);
		snprintf(made_dir, sizeof(made_dir), "%s", dir);
		return 0;
	}
	return errno == EEXIST ? 0 : -errno;
}

static void make_one(const char *dir, const char *name)
{
	struct devlink *l;
	int ret;

	if (find(name))
		return;
	l = calloc(1, sizeof(*l));
	if (!l) {
		log_warn("no memory for the link of device %s", name);
		return;
	}
	snprintf(l->name, sizeof(l->name), "%s", name);
	snprintf(l->path, sizeof(l->path), "%s/%s", dir, name);
	ret = make_dir(dir);
	if (ret == 0 && symlink(LINK_TARGET, l->path) < 0)
		ret = -errno;
	if (ret == -EEXIST) {
		/* someone else's: theirs to remove */
		log_debug("%s exists already; leaving it alone", l->path);
	} else if (ret < 0) {
		log_notice("cannot make %s: %s (programs that look for it, as "
			   "UCX does, will not list device %s)", l->path,
			   strerror(-ret), name);
	} else {
		log_debug("made %s -> %s", l->path, LINK_TARGET);
		LIST_INSERT_HEAD(&made, l, link);
		return;
	}
	free(l);
}

static void remove_one(struct devlink *l)
{
	LIST_REMOVE(l, link);
	/* Only if it is still the link we made. */
	if (points_at_null(l->path) && unlink(l->path) == 0)
		log_debug("removed %s", l->path);
	free(l);
	if (LIST_EMPTY(&made) && made_dir[0]) {
		/* fails, as it should, while anything else is in it */
		if (rmdir(made_dir) == 0)
			made_dir[0] = '\0';
	}
}

static bool device_listed(const struct ibvd_device_list *devs, const char *name)
{
	const struct ibvd_device *dev;

	TAILQ_FOREACH(dev, devs, link)
		if (strcmp(dev->name, name) == 0)
			return true;
	return false;
}

void ibvd_devlinks_sync(const char *dir, const struct ibvd_device_list *devs,
			bool enabled)
{
	struct devlink *l, *next;
	const struct ibvd_device *dev;

	for (l = LIST_FIRST(&made); l; l = next) {
		next = LIST_NEXT(l, link);
		if (!enabled || !device_listed(devs, l->name))
			remove_one(l);
	}
	if (!enabled)
		return;
	TAILQ_FOREACH(dev, devs, link)
		make_one(dir, dev->name);
}

void ibvd_devlinks_remove_all(void)
{
	while (!LIST_EMPTY(&made))
		remove_one(LIST_FIRST(&made));
}

static bool config_names(const struct ibvd_config *cfg, const char *name)
{
	unsigned int i;

	for (i = 0; i < cfg->ndevices; i++)
		if (strcmp(cfg->devices[i].name, name) == 0)
			return true;
	return false;
}

/* Unlink dir's links to /dev/null but those of cfg's devices if keep. */
static int remove_stale(const char *dir, const struct ibvd_config *cfg,
			bool keep)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);
	int ret = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (keep && config_names(cfg, e->d_name)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (points_at_null(path) && unlink(path) < 0) {
			log_err("cannot remove %s: %s", path, strerror(errno));
			ret = ret ? ret : -errno;
		}
	}
	closedir(d);
	return ret;
}

int ibvd_devlinks_oneshot(const char *dir, const struct ibvd_config *cfg,
			  enum ibvd_devlinks_step step)
{
	char path[PATH_MAX];
	unsigned int i;
	int ret = 0;

	if (step != IBVD_DEVLINKS_ADD)
		ret = remove_stale(dir, cfg, step == IBVD_DEVLINKS_MAKE &&
					     cfg->device_links);
	if (step == IBVD_DEVLINKS_REMOVE) {
		(void)rmdir(dir);	/* only if empty */
		return ret;
	}
	if (!cfg->device_links)
		return ret;
	if (make_dir(dir) < 0)
		return -errno;
	for (i = 0; i < cfg->ndevices; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, cfg->devices[i].name);
		if (symlink(LINK_TARGET, path) < 0 && errno != EEXIST) {
			log_err("cannot make %s: %s", path, strerror(errno));
			ret = ret ? ret : -errno;
		}
	}
	return ret;
}
