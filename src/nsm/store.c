/*
 * The files of STATE_DIR/nsm (include/nsm.h has their layout): reading them defensively
 * (a file we cannot read as ours is reported and treated as empty), replacing them
 * atomically, the lists they hold.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "fsio.h"
#include "log.h"
#include "nsm_int.h"

#define NSM_STATE_TEXT_MAX 16

int nsm_list_find(const struct nsm_list *l, const char *addr, const char *local)
{
	for (unsigned i = 0; i < l->nl_n; i++)
		if (strcmp(l->nl_v[i].nc_addr, addr) == 0 && strcmp(l->nl_v[i].nc_local, local) == 0)
			return (int)i;
	return -1;
}

int nsm_list_add(struct nsm_list *l, const char *addr, const char *local, const char *name)
{
	struct nsm_client *v, *c;

	if (l->nl_n >= NSM_MAX_CLIENTS)
		return -ENOSPC;
	if (strlen(addr) >= INET6_ADDRSTRLEN || strlen(local) >= INET6_ADDRSTRLEN ||
	    strlen(name) > NSM_MAX_NAME)
		return -EINVAL;
	v = realloc(l->nl_v, (l->nl_n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->nl_v = v;
	c = &v[l->nl_n];
	memset(c, 0, sizeof(*c));
	c->nc_name = strdup(name);
	if (!c->nc_name)
		return -ENOMEM;
	strcpy(c->nc_addr, addr);
	strcpy(c->nc_local, local);
	l->nl_n++;
	return 0;
}

void nsm_list_remove(struct nsm_list *l, unsigned i)
{
	free(l->nl_v[i].nc_name);
	l->nl_v[i] = l->nl_v[--l->nl_n];
}

void nsm_list_free(struct nsm_list *l)
{
	for (unsigned i = 0; i < l->nl_n; i++)
		free(l->nl_v[i].nc_name);
	free(l->nl_v);
	l->nl_v = NULL;
	l->nl_n = 0;
}

/* ---- lines ---- */

static bool name_plain(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '_' || ch == '-';
}

size_t nsm_format_line(const struct nsm_client *c, char *buf)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = (size_t)sprintf(buf, "%s =", c->nc_addr);

	for (const unsigned char *p = (const unsigned char *)c->nc_name; *p; p++) {
		if (name_plain(*p)) {
			buf[o++] = (char)*p;
		} else {
			buf[o++] = '%';
			buf[o++] = hex[*p >> 4];
			buf[o++] = hex[*p & 15];
		}
	}
	o += (size_t)sprintf(buf + o, " %s\n", c->nc_local);
	return o;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* "=escaped" into name (NSM_MAX_NAME + 1 bytes); false when it is not one. */
static bool unescape_name(const char *s, char *name)
{
	size_t o = 0;

	if (*s++ != '=')
		return false;
	for (; *s; s++) {
		int ch = (unsigned char)*s;

		if (ch == '%') {
			int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);

			if (lo < 0)
				return false;
			ch = hi << 4 | lo;
			s += 2;
		} else if (!name_plain((unsigned char)ch)) {
			return false;
		}
		if (ch == 0 || o >= NSM_MAX_NAME)
			return false;
		name[o++] = (char)ch;
	}
	name[o] = '\0';
	return true;
}

static bool addr_valid(const char *s)
{
	unsigned char a[sizeof(struct in6_addr)];

	return strlen(s) < INET6_ADDRSTRLEN &&
	       (inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1);
}

/* Parses one line (without its newline) into l; false when it is not a valid one. */
static bool parse_line(char *line, struct nsm_list *l, int *err)
{
	char *addr = line, *name, *local, *end;
	char *buf;

	name = strchr(addr, ' ');
	if (!name)
		return false;
	*name++ = '\0';
	local = strchr(name, ' ');
	if (!local)
		return false;
	*local++ = '\0';
	end = strchr(local, ' ');
	if (end || !addr_valid(addr) || !addr_valid(local))
		return false;
	buf = malloc(NSM_MAX_NAME + 1);
	if (!buf) {
		*err = -ENOMEM;
		return true;
	}
	if (!unescape_name(name, buf)) {
		free(buf);
		return false;
	}
	if (nsm_list_find(l, addr, local) < 0) {
		*err = nsm_list_add(l, addr, local, buf);
		if (*err == -ENOSPC)
			*err = -EBADMSG; /* more clients than we ever list */
	}
	free(buf);
	return true;
}

static void report_corrupt(const struct nsm *n, const char *name, const char *why)
{
	log_err("nsm: %s/%s %s; its clients are ignored (they will not be told that we restarted). "
		"Delete the file to silence this", n->sm_path, name, why);
}

/* Reads a whole file of at most max bytes (malloc, NUL-terminated); -EFBIG beyond. */
static int read_file(const struct nsm *n, const char *name, size_t max, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	int fd, r;

	r = fsio_open_file(n->sm_dirfd, name, O_RDONLY, 0, &fd);
	if (r < 0)
		return r;
	r = fsio_stat(fd, &st);
	if (r == 0 && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max))
		r = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
	if (r < 0) {
		fsio_close(fd);
		return r;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		fsio_close(fd);
		return -ENOMEM;
	}
	r = fsio_pread(fd, buf, (size_t)st.st_size, 0, len);
	fsio_close(fd);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

int nsm_read_clients(struct nsm *n, const char *name, struct nsm_list *l)
{
	size_t hdr = strlen(NSM_CLIENTS_HEADER), len;
	struct nsm_list got = { 0 };
	char *buf, *p, *nl;
	int r = read_file(n, name, NSM_FILE_MAX, &buf, &len);

	if (r == -EFBIG || r == -EINVAL) {
		report_corrupt(n, name, r == -EFBIG ? "is longer than any list we write" :
						      "is not a regular file");
		return -EBADMSG;
	}
	if (r < 0)
		return r;
	if (len < hdr || memcmp(buf, NSM_CLIENTS_HEADER, hdr) != 0 || strlen(buf) != len) {
		report_corrupt(n, name, strlen(buf) != len && len >= hdr &&
				memcmp(buf, NSM_CLIENTS_HEADER, hdr) == 0 ? "holds a NUL byte" :
				"does not start with \"unionnfsd-nsm-clients 1\"");
		free(buf);
		return -EBADMSG;
	}
	/* A last line without its newline is an append cut short by a crash: not listed yet. */
	for (p = buf + hdr; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		*nl = '\0';
		if (!parse_line(p, &got, &r)) {
			r = -EBADMSG;
			report_corrupt(n, name, "has a line that is not \"ADDRESS =NAME ADDRESS\"");
		} else if (r == -EBADMSG) {
			report_corrupt(n, name, "lists more clients than we ever keep");
		}
		if (r < 0)
			break;
	}
	free(buf);
	for (unsigned i = 0; r == 0 && i < got.nl_n; i++) {
		const struct nsm_client *c = &got.nl_v[i];

		if (nsm_list_find(l, c->nc_addr, c->nc_local) < 0)
			r = nsm_list_add(l, c->nc_addr, c->nc_local, c->nc_name);
	}
	nsm_list_free(&got);
	if (r == -ENOSPC) {
		log_warn("nsm: more than %d clients await SM_NOTIFY; those past them in %s/%s "
			 "will not be told", NSM_MAX_CLIENTS, n->sm_path, name);
		r = 0;
	}
	return r;
}

int nsm_write_atomic(struct nsm *n, const char *name, const void *buf, size_t len)
{
	char tmp[NAME_MAX + 1];
	size_t done;
	int fd, r;

	snprintf(tmp, sizeof(tmp), "%s%s", name, NSM_TMP_SUFFIX);
	r = fsio_open_file(n->sm_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600, &fd);
	if (r < 0)
		return r;
	r = fsio_pwrite(fd, buf, len, 0, &done);
	if (r == 0)
		r = fsio_fsync(fd);
	fsio_close(fd);
	if (r == 0)
		r = fsio_rename(n->sm_dirfd, tmp, n->sm_dirfd, name, false);
	if (r == 0)
		r = fsio_fsync_dir(n->sm_dirfd);
	else
		(void)fsio_unlink(n->sm_dirfd, tmp, false);
	return r;
}

int nsm_write_clients(struct nsm *n, const char *name, const struct nsm_list *l)
{
	size_t len = strlen(NSM_CLIENTS_HEADER);
	char *buf;
	int r;

	if (l->nl_n == 0) {
		r = fsio_unlink(n->sm_dirfd, name, false);
		if (r == 0)
			r = fsio_fsync_dir(n->sm_dirfd);
		return r == -ENOENT ? 0 : r;
	}
	buf = malloc(len + (size_t)l->nl_n * NSM_LINE_MAX + 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, NSM_CLIENTS_HEADER, len);
	for (unsigned i = 0; i < l->nl_n; i++)
		len += nsm_format_line(&l->nl_v[i], buf + len);
	r = nsm_write_atomic(n, name, buf, len);
	free(buf);
	return r;
}

int nsm_read_state(struct nsm *n, uint32_t *state)
{
	char *buf, *end;
	unsigned long v = 0;
	size_t len;
	int r = read_file(n, NSM_STATE_FILE, NSM_STATE_TEXT_MAX, &buf, &len);

	if (r == -EFBIG || r == -EINVAL)
		r = -EBADMSG;
	else if (r < 0)
		return r;
	if (r == 0) {
		errno = 0;
		v = strtoul(buf, &end, 10);
		if (errno || end == buf || buf[0] < '0' || buf[0] > '9' || v > UINT32_MAX ||
		    strcmp(end, "\n") != 0)
			r = -EBADMSG;
		free(buf);
	}
	if (r < 0) {
		log_err("nsm: %s/%s does not hold a state number; a new one is made from the clock "
			"(delete the file to silence this)", n->sm_path, NSM_STATE_FILE);
		return r;
	}
	*state = (uint32_t)v;
	return 0;
}
