// Package dir is an objstore.Bucket kept in a local directory: the embedded
// default store of `strand dev`, readable by a person with ls and cat.
//
// # Layout
//
//	<root>/<bucket>/                 the bucket (Open creates it)
//	<root>/<bucket>/<key>            one regular file per object; the
//	                                 slashes of a key are directories
//	<root>/<bucket>/.tmp/put-*       bodies being written; never objects
//
// # Writes
//
// PutIfAbsent is atomic and never exposes a torn object, even across a crash:
//
//  1. write the body to a new temp file in <bucket>/.tmp and fsync it;
//  2. create the key's parent directories (fsyncing the parent of each one
//     created);
//  3. os.Link the temp file to the key's path. Link creates the name only if
//     it does not exist (EEXIST otherwise, reported as objstore.ErrExists),
//     so exactly one of any number of concurrent writers, in this process or
//     another, wins;
//  4. remove the temp file and fsync the key's parent directory, so the new
//     name is durable before nil is returned.
//
// A crash before step 3 leaves only a temp file, which is never visible as an
// object: List skips .tmp and no key may name it. RemoveTemp deletes such
// leftovers when no writer is running.
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
