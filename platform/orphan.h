// Temporary files whose writer died (SIGKILL, a crash, the OOM killer) and left them behind,
// each as large as what it was writing. A writer holds an flock on its temporary file from
// creation to rename; a file in a directory whose lock can be taken has no writer. flock works
// across PID namespaces and hosts sharing the directory, where a PID in the name would not.
#pragma once

// Takes the writer's lock on fd, a temporary file just created at path, and says whether path
// still names it: 0 yes; -1 a sweep removed the name between the create and the lock (then
// close fd and create another).
int orphan_hold(int fd, const char *path);
// Removes file if no writer holds it. The lock is held across the unlink, so a writer that
// created it just now and waits in orphan_hold sees the name gone.
void orphan_remove(const char *file);
// orphan_remove on each entry of dir whose name holds part followed by PID.N (two numbers, as
// the writers name their files) and nothing else.
void orphan_sweep(const char *dir, const char *part);
