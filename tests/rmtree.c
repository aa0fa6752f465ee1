#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>

#include "rmtree.h"

/* nftw's callback takes no argument of ours. */
static __thread bool rm_tree_left_some;

static int rm_tree_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0)
		rm_tree_left_some = true;
	return 0;
}

int rm_tree(const char *path)
{
	rm_tree_left_some = false;
	if (nftw(path, rm_tree_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return errno == ENOENT ? 0 : -1;
	return rm_tree_left_some ? -1 : 0;
}
