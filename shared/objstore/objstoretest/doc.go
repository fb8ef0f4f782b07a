// Package objstoretest is the conformance suite for objstore.Bucket.
//
// Every implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return open(t) })
//	}
//
// open must return a fresh, empty bucket on every call; each subtest opens its
// own. The suite checks the contract in the objstore package documentation:
//
//   - put then get, whole and ranged; a range past the end is a short read;
//     an offset at or past the end is ErrRange; n < 0 reads to the end;
//   - PutIfAbsent twice: the second returns ErrExists and the first body
//     stays;
//   - 48 concurrent PutIfAbsent calls on one new key with different bodies:
//     exactly one returns nil, all others ErrExists, and Get returns exactly
//     the winner's body;
//   - Get and Head of a missing key return ErrNotFound;
//   - Delete is idempotent, and a deleted key can be created again;
//   - List by prefix returns matching keys in lexical (byte) order;
//   - keys with slashes, an empty body, a 5 MiB body;
//   - no key is used both as an object and as a directory of another key
//     ("a" and "a/b"): S3 allows that, a filesystem store cannot, and
//     strand's key layout never needs it, so the suite does not ask for it;
//   - stored bodies are not aliased with the caller's slices;
//   - a context that is already cancelled makes every operation fail, and a
//     PutIfAbsent under it writes nothing.
//
// The suite depends on no timing, so it also runs against S3 on an emulator,
// where it is the check that the emulator's conditional writes are atomic.
// Errors are matched with errors.Is only, never by text.
package objstoretest
