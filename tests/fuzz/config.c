/*
 * Fuzz harness: ibverbsd.conf parsed from text (daemon/config/config.c),
 * as start-up and every reload parse it (ibvd_config_load reads the file
 * and parses the same way), and the questions the daemon then asks of it:
 * which limit rule applies to whom, the limits it gives, each device's
 * index.  Besides what the sanitizers catch, it aborts where a promise is
 * broken:
 * - a parse either gives a config or an error message naming the input
 *   ("fuzz:LINE:COL: ..." or "fuzz: ..."), never both, never neither;
 * - every configured device is found by its name at its index.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)

static void ask(const struct ibvd_config *cfg, uid_t uid, const char *cgroup)
{
	const gid_t groups[] = { 0, 1001, 27 };
	const struct ibvd_limit_who who = {
		.uid = uid, .gid = uid, .groups = groups,
		.ngroups = sizeof(groups) / sizeof(groups[0]), .cgroup = cgroup,
	};
	const struct ibvd_config_limit_rule *rule;
	struct ibvd_quota q;
	char name[128];
	size_t i;

	rule = ibvd_config_limit_rule_for(cfg, &who);
	ibvd_config_limits_all(cfg, rule, &q);
	ibvd_config_rule_name(cfg, rule, name, sizeof(name));
	CHECK(memchr(name, '\0', sizeof(name)));
	for (i = 0; i < cfg->ndevices; i++)
		ibvd_config_limits_dev(cfg, rule, cfg->devices[i].name, &q);
	ibvd_config_limits_dev(cfg, rule, "no-such-device", &q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ibvd_config *cfg;
	char err[512] = "";
	char *text;
	size_t i;

	text = malloc(size + 1);
	CHECK(text);
	memcpy(text, data, size);
	text[size] = '\0';
	cfg = ibvd_config_parse(text, "fuzz", err, sizeof(err));
	free(text);
	if (!cfg) {
		CHECK(strncmp(err, "fuzz:", 5) == 0);
		return 0;
	}
	for (i = 0; i < cfg->ndevices; i++)
		CHECK(ibvd_config_device_index(cfg, cfg->devices[i].name) ==
		      (int)i);
	ask(cfg, 0, NULL);
	ask(cfg, 1001, "/user.slice/user-1001.slice/session-1.scope");
	ask(cfg, 1002, "/");
	ibvd_config_free(cfg);
	return 0;
}
