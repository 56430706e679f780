// The user's cache directory for decode's files (the GEMV tuning, packed weights):
// $XDG_CACHE_HOME/decode when XDG_CACHE_HOME is an absolute path, else ~/.cache/decode when HOME
// is an absolute path to an existing directory; else none.
#pragma once
#include <stddef.h>

// buf = the cache directory followed by "/name"; 0 ok, -1 when neither variable is usable or buf
// is too short.
int cachedir_path(const char *name, char *buf, size_t n);
// mkdir -p of the directory that holds path (path is restored; new directories 0700, as the XDG
// spec asks); 0 ok, -1 with errno.
int cachedir_make_parents(char *path);
