// Package dir is an objstore.Bucket kept in a local directory: the embedded
// default store of `strand dev`, readable by a person with ls and cat.
//
// # Layout
//
//	<root>/<bucket>/                 the bucket (Open creates it)
//	<root>/<bucket>/<key>            one regular file per object; the
//	                                 slashes of a key are directories
//	<root>/<bucket>/.tmp/put-*       bodies being written where the
//	                                 filesystem has no anonymous files;
//	                                 never objects
//
// # Writes
//
// PutIfAbsent is atomic and never exposes a torn object, even across a crash:
//
//  1. stage the body: write it to a new anonymous file (Linux: open(2) with
//     O_TMPFILE in <bucket>/.tmp, a file in no directory) and fsync it.
//     Where the kernel or filesystem has no O_TMPFILE, or /proc is not
//     mounted (Open probes once), and outside Linux, the body goes to a
//     new named temp file in <bucket>/.tmp instead. The open waits on the
//     filesystem's journal (a new inode on ext4's orphan list), so each
//     staging directory keeps two empty anonymous files opened ahead and
//     a put writes into one of them (spare_linux.go);
//  2. create the key's parent directories (fsyncing the parent of each one
//     created);
//  3. link the staged file to the key's path: linkat(2) of
//     /proc/self/fd/N with AT_SYMLINK_FOLLOW for an anonymous file (no
//     privilege needed, unlike AT_EMPTY_PATH), os.Link for a named one.
//     Link creates the name only if it does not exist (EEXIST otherwise,
//     reported as objstore.ErrExists), so exactly one of any number of
//     concurrent writers, in this process or another, wins;
//  4. close the anonymous file (or remove the named temp file) and fsync
//     the key's parent directory, so the new name is durable before nil is
//     returned.
//
// A crash before step 3 leaves nothing visible as an object: an anonymous
// file is freed by the filesystem (nothing is left at all), a named temp
// file stays in .tmp, which List skips and no key may name. RemoveTemp
// deletes such leftovers when no writer is running.
//
// The anonymous file saves the directory entry a named temp file costs
// twice (its create and its unlink, each a change to .tmp) on every put;
// the fsyncs, the cost a durable put cannot avoid, are the same. See
// ADR 0047 and BenchmarkPutIfAbsent.
//
// # Shared bodies
//
// The buckets opened under one root share their staged anonymous files
// by key (the last 64 in the process): a put of a key whose body is, byte
// for byte, the file another bucket staged for it (read back and
// compared) links that file in step 3 instead of staging its own. A chain slot's copies in a
// set of buckets under one root (an Express flight on `strand dev`) are
// then one write and one file fsync, and a link and a directory fsync
// per bucket: hard links of one inode, each name deleted on its own. A
// body that differs gets its own file; a shared file that cannot be
// linked any more (every name deleted, or a bucket on another mount:
// ENOENT, EXDEV) is staged anew. A file is closed once no put can still
// link its /proc/self/fd name. See share.go and BenchmarkPutSet.
//
// # Reads and deletes
//
// Get opens the file (never through a symlink: O_NOFOLLOW) and uses
// ReadAt; Head stats it (Lstat). A symlink planted in the bucket is no
// object to any of them. Delete unlinks the file
// (a missing key is not an error), fsyncs its directory and removes parent
// directories left empty, up to the bucket. List walks the bucket and sorts
// the keys in byte order.
//
// # Keys
//
// A key is a non-empty sequence of non-empty '/'-separated segments; no
// segment may be "." or "..", the key may not start or end with '/', contain
// a NUL byte, or start with ".tmp/" (or be ".tmp"). Such keys fail with
// ErrInvalidKey. A filesystem cannot hold both "a" and "a/b" as files, which
// S3 can: writing one when the other exists fails with ErrKeyConflict.
// Strand's key layout never does this.
package dir
