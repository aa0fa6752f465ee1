/*
 * Fuzzes the configuration parsers on arbitrary bytes: the config file (config.c), the
 * host name map (hostmap.c) and the command line. The parsers read files, so the input
 * is put in memory files (memfd) at fixed descriptors and parsed by their /proc/self/fd
 * paths: the real code, getline and fgets included, with no disk and no temporary files.
 * Byte 0 picks what is parsed (mod 3):
 *   0  a config file: the text up to the first "%%\n"; what follows is the file
 *      FUZZ_HOSTS_PATH holds, so "hosts /proc/self/fd/201" in the text loads it
 *   1  a host name map
 *   2  a command line: NUL-separated arguments up to the first "%%\n"; what follows is
 *      the file FUZZ_CONFIG_PATH holds, for "-c /proc/self/fd/200"
 * Host names in client rules never reach DNS: getaddrinfo() below answers only numeric
 * addresses and names ending in ".fuzz", so a run is fast, offline and repeatable.
 * Besides crashes and leaks, every outcome is checked: an error names its origin and a
 * config that parsed keeps the promises of config.h (and passes config_validate); a map
 * that loaded gives every line's address the line's name.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "exports.h"
#include "hostmap.h"
#include "union.h"
#include "views.h"

#define FUZZ_CONFIG_FD 200
#define FUZZ_HOSTS_FD 201
#define FUZZ_CONFIG_PATH "/proc/self/fd/200"
#define FUZZ_HOSTS_PATH "/proc/self/fd/201"
#define FUZZ_MAX_ARGS 64
#define FUZZ_SPLIT "%%\n"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_config: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

/*
 * The resolver as the fuzzer sees it: numeric addresses as libc parses them, a name
 * ending in ".fuzz" as a fixed documentation address, anything else unknown.
 */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	static int (*real)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	struct addrinfo h = { 0 };
	size_t len = node ? strlen(node) : 0;

	if (real == NULL)
		real = (int (*)(const char *, const char *, const struct addrinfo *,
				struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
	if (real == NULL)
		abort();
	if (hints != NULL)
		h = *hints;
	h.ai_flags |= AI_NUMERICHOST;
	if (len > 5 && !strcmp(node + len - 5, ".fuzz"))
		return real(len % 2 ? "192.0.2.7" : "2001:db8::7", service, &h, res);
	return real(node, service, &h, res);
}

static void fuzz_memfd(int want)
{
	int fd = memfd_create("fuzz_config", MFD_CLOEXEC);

	if (fd < 0 || dup2(fd, want) != want) {
		perror("fuzz_config: memfd");
		abort();
	}
	close(fd);
}

/* FUZZ_CONFIG_VERBOSE=1 prints each outcome: whether a seed gets where it is meant to. */
static int fuzz_verbose;

static void fuzz_outcome(const char *what, int rc, const char *err)
{
	if (fuzz_verbose)
		fprintf(stderr, "  %s: %s\n", what, rc == 0 ? "parsed" : err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int null = open("/dev/null", O_RDONLY);

	(void)argc;
	(void)argv;
	/* "hosts /dev/stdin" must not wait for a terminal. */
	if (null < 0 || dup2(null, 0) != 0)
		abort();
	close(null);
	fuzz_verbose = getenv("FUZZ_CONFIG_VERBOSE") != NULL;
	fuzz_memfd(FUZZ_CONFIG_FD);
	fuzz_memfd(FUZZ_HOSTS_FD);
	return 0;
}

static void fuzz_fill(int fd, const uint8_t *p, size_t n)
{
	if (ftruncate(fd, 0) != 0 || (n > 0 && pwrite(fd, p, n, 0) != (ssize_t)n)) {
		perror("fuzz_config: memfd write");
		abort();
	}
}

/*
 * An error from a file is one line that says where: "PATH..." (config errors add ":LINE").
 * A flag's error may quote the flag, which can hold a newline.
 */
static void fuzz_check_err(const char *err, const char *path)
{
	fuzz_check(err[0] != '\0');
	if (path != NULL) {
		fuzz_check(strchr(err, '\n') == NULL);
		fuzz_check(!strncmp(err, path, strlen(path)));
	}
}

/* The template with %a / %h replaced by client and %% by %, as the README describes it. */
static void fuzz_check_upper(const char *tmpl)
{
	static const char *const clients[] = { "10.1.2.3", "lab01", "" };
	char err[CONFIG_ERRLEN], out[256], ref[256];

	fuzz_check(tmpl[0] == '/');
	fuzz_check(views_upper_check(tmpl, err, sizeof(err)) == 0);
	for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
		size_t n = 0;
		int fits = 1;

		for (const char *p = tmpl; *p && fits; p++) {
			const char *put = p;
			size_t plen = 1;

			if (*p == '%') {
				p++;
				put = *p == '%' ? "%" : clients[i];
				plen = strlen(put);
			}
			if (n + plen >= sizeof(ref))
				fits = 0;
			else
				memcpy(ref + n, put, plen), n += plen;
		}
		ref[n] = '\0';
		if (views_upper_expand(tmpl, clients[i], out, sizeof(out)) == 0)
			fuzz_check(fits && !strcmp(out, ref));
		else
			fuzz_check(!fits);
	}
}

/* What config.h promises of a parsed config. */
static void fuzz_check_config(const struct config *cf)
{
	char err[CONFIG_ERRLEN];

	for (int i = 0; i < cf->cf_nexports; i++) {
		const struct export_conf *ec = &cf->cf_exports[i];
		size_t nlen = strlen(ec->ec_name);

		fuzz_check(ec->ec_name[0] == '/');
		fuzz_check(strstr(ec->ec_name, "//") == NULL);
		fuzz_check(nlen == 1 || ec->ec_name[nlen - 1] != '/');
		fuzz_check(ec->ec_nbranches >= 1 && ec->ec_nbranches <= UNION_MAX_BRANCHES);
		fuzz_check(ec->ec_nrules >= 1);
		for (int j = 0; j < ec->ec_nbranches; j++) {
			fuzz_check(ec->ec_branches[j][0] == '/');
			for (int k = 0; k < j; k++)
				fuzz_check(strcmp(ec->ec_branches[j], ec->ec_branches[k]) != 0);
		}
		for (int j = 0; j < ec->ec_nrules; j++) {
			const struct export_rule *r = &ec->ec_rules[j];

			/* parsing resolves nothing: a host name rule has no addresses yet */
			fuzz_check(r->er_kind == EXPORTS_NET ? r->er_nnets == 1 : r->er_nnets == 0);
			for (int k = 0; k < r->er_nnets; k++)
				fuzz_check(r->er_nets[k].xn_prefix <= 128);
		}
		if (ec->ec_upper != NULL) {
			fuzz_check(ec->ec_opts.eo_ro);
			fuzz_check_upper(ec->ec_upper);
		}
		for (int j = 0; j < i; j++)
			fuzz_check(strcmp(ec->ec_name, cf->cf_exports[j].ec_name) != 0);
	}
	if (cf->cf_nexports > 0 && config_validate(cf, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_config: a parsed config fails validation: %s\n", err);
		abort();
	}
}

/* The input up to the first FUZZ_SPLIT (its length); what follows it goes into fd. */
static size_t fuzz_split(const uint8_t *data, size_t size, int fd)
{
	const uint8_t *split = memmem(data, size, FUZZ_SPLIT, strlen(FUZZ_SPLIT));
	size_t head = split ? (size_t)(split - data) : size;

	if (split)
		fuzz_fill(fd, split + strlen(FUZZ_SPLIT), size - head - strlen(FUZZ_SPLIT));
	else
		fuzz_fill(fd, NULL, 0);
	return head;
}

static void fuzz_config_file(const uint8_t *data, size_t size)
{
	char err[CONFIG_ERRLEN] = "";
	struct config cf;
	int rc;

	fuzz_fill(FUZZ_CONFIG_FD, data, fuzz_split(data, size, FUZZ_HOSTS_FD));
	config_init(&cf);
	rc = config_parse_file(&cf, FUZZ_CONFIG_PATH, err, sizeof(err));
	fuzz_outcome("config file", rc, err);
	if (rc == 0)
		fuzz_check_config(&cf);
	else
		fuzz_check_err(err, FUZZ_CONFIG_PATH ":");
	config_free(&cf);
}

/* Splits a /etc/hosts line as the map does: '#' ends it, the first two words count. */
static int fuzz_hosts_line(char *line, char **addr, char **name)
{
	const char *sep = " \t\r\n\f\v";
	char *save = NULL, *hash = strchr(line, '#');

	if (hash)
		*hash = '\0';
	*addr = strtok_r(line, sep, &save);
	*name = *addr ? strtok_r(NULL, sep, &save) : NULL;
	return *addr != NULL;
}

/* Every line of a map that loaded must be found, under its name in lower case. */
static void fuzz_check_hosts(const struct hostmap *hm, const uint8_t *data, size_t size)
{
	char line[4096], *addr, *name;
	size_t pos = 0;

	fuzz_check(!strcmp(hostmap_path(hm), FUZZ_HOSTS_PATH));
	while (pos < size) {
		/* fgets(line, 4096): up to 4095 bytes, through the newline. */
		size_t n = 0;
		const char *found;

		while (pos + n < size && n < sizeof(line) - 1) {
			line[n] = (char)data[pos + n];
			if (data[pos + n++] == '\n')
				break;
		}
		line[n] = '\0';
		pos += n;
		if (!fuzz_hosts_line(line, &addr, &name))
			continue;
		fuzz_check(name != NULL && hostmap_is_address(addr) && hostmap_name_ok(name));
		found = hostmap_find(hm, addr);
		fuzz_check(found != NULL && strlen(found) == strlen(name));
		for (size_t k = 0; name[k]; k++)
			fuzz_check(found[k] == tolower((unsigned char)name[k]));
	}
}

static void fuzz_hosts(const uint8_t *data, size_t size)
{
	char err[CONFIG_ERRLEN] = "";
	struct hostmap *hm = NULL;
	int rc;

	fuzz_fill(FUZZ_HOSTS_FD, data, size);
	rc = hostmap_load(FUZZ_HOSTS_PATH, &hm, err, sizeof(err));
	fuzz_outcome("host map", rc, err);
	if (rc == 0) {
		fuzz_check(hm != NULL);
		fuzz_check_hosts(hm, data, size);
		fuzz_check(hostmap_find(hm, "not an address") == NULL);
	} else {
		fuzz_check(hm == NULL);
		fuzz_check_err(err, FUZZ_HOSTS_PATH);
	}
	hostmap_free(hm);
}

static void fuzz_args(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *argv[FUZZ_MAX_ARGS + 1];
	char err[CONFIG_ERRLEN] = "";
	struct config cf;
	int argc = 1, rc;

	if (buf == NULL)
		abort();
	size = fuzz_split(data, size, FUZZ_CONFIG_FD);
	fuzz_fill(FUZZ_HOSTS_FD, NULL, 0); /* nothing left over from an earlier input */
	memcpy(buf, data, size);
	buf[size] = '\0';
	argv[0] = "unionnfsd";
	for (char *p = buf; p < buf + size && argc < FUZZ_MAX_ARGS; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	config_init(&cf);
	rc = config_parse_args(&cf, argc, argv, err, sizeof(err));
	fuzz_outcome("command line", rc, rc == 1 ? "usage" : err);
	if (rc == 0)
		fuzz_check_config(&cf);
	else if (rc < 0)
		fuzz_check_err(err, NULL);
	else
		fuzz_check(rc == 1 && !strncmp(err, "usage: ", 7));
	config_free(&cf);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_config_file(data + 1, size - 1);
		break;
	case 1:
		fuzz_hosts(data + 1, size - 1);
		break;
	default:
		fuzz_args(data + 1, size - 1);
		break;
	}
	return 0;
}
