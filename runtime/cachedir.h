// The user's cache directory for decode's files (the GEMV tuning, packed weights):
// $XDG_CACHE_HOME/decode when XDG_CACHE_HOME is an absolute path, else ~/.cache/decode when HOME
// is an absolute path to an existing directory; else none.
#pragma once
#include <stddef.h>
#include <sys/stat.h>

// buf = the cache directory followed by "/name"; 0 ok, -1 when neither variable is usable or buf
// is too short.
int cachedir_path(const char *name, char *buf, size_t n);
// mkdir -p of the directory that holds path (path is restored; new directories 0700, as the XDG
// spec asks); 0 ok, -1 with errno.
int cachedir_make_parents(char *path);
// Opens a file of the cache directory for reading, no link followed and no wait (a FIFO there
// would block the open), and keeps it only where it is a regular file of this user's (a link to
// /dev/zero would spin a read, another user's file steer this one's run). The descriptor, *st
// filled; -1 where the open failed (errno says why); -2 where the file is not one to read.
int cachedir_open_own(const char *path, struct stat *st);
