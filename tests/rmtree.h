/*
 * Removing a test's temporary tree, for unit, integration and fuzz tests alike.
 */
#ifndef TESTS_RMTREE_H
#define TESTS_RMTREE_H

/*
 * Removes path and everything under it as rm -rf would: depth first, never following a
 * symlink (a test may have made one pointing anywhere), going on past what it cannot remove.
 * 0 when nothing is left (or path never existed), -1 otherwise.
 */
int rm_tree(const char *path);

#endif
