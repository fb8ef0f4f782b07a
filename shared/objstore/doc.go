// Package objstore is strand's object-store contract: the one small interface
// every protocol (commit, fence, walk, absorb, settle, trim, probe, reads)
// uses to reach S3 Standard buckets, S3 Express One Zone directory buckets,
// a local directory or memory.
//
// # Contract
//
// A Bucket is one bucket. A set of buckets (the K buckets of a class) is a
// plain []Bucket owned by the caller.
//
//   - PutIfAbsent(key, body) writes body at key only if no object exists at
//     key. It returns nil when this call created the object, ErrExists when an
//     object was already there (whoever wrote it, possibly this caller on an
//     earlier attempt whose answer was lost), and ErrAmbiguous when the outcome
//     is unknown: the request may or may not have landed (a timeout after the
//     request was sent, a reset connection). Callers resolve ErrAmbiguous by
//     reading the object back (strand reads the envelope and compares the
//     writer nonce). Exactly one of any number of concurrent PutIfAbsent calls
//     on a new key returns nil. A created object is never torn: readers see
//     all of body or nothing. body is only lent: once PutIfAbsent returns,
//     whatever it returns, the bucket holds no reference to it and reads
//     no more of it, so the caller may write it (settle reuses its object
//     buffers, ADR 0072). Memory copies it, the directory store writes it
//     to a file before it returns, and S3's adapter uploads it through a
//     reader that fails every read once the call returned (net/http may
//     read a request's body after RoundTrip returned). The conformance
//     suite's NoAliasing checks it.
//   - Get(key, off, n) returns n bytes from offset off. n < 0 means "to the
//     end". A range that runs past the end returns the bytes that exist
//     (short read, no error); an offset at or past the end of a non-empty
//     object returns ErrRange; a missing key returns ErrNotFound.
//   - Head(key) returns the object's size, or ErrNotFound.
//   - Delete(key) removes the object; deleting a missing key is not an error
//     (idempotent).
//   - List(prefix) exists for tools and tests only. No protocol path lists:
//     walks are point lookups at derivable keys.
//
// Two optional interfaces save a copy where a bucket can: ReaderInto
// (GetInto reads into the caller's buffer) and Keeper (PutGiven hands the
// body over: the bucket may keep it, and the caller must not write it
// after: the one exception to the lent body, so a buffer the caller
// reuses is never given). Each is PutIfAbsent's or Get's contract otherwise; the
// functions GetInto and PutGiven fall back to Get and PutIfAbsent, and a
// wrapper that changes reads or puts (WithFaults) does not forward them.
//
// Errors are sentinels matched with errors.Is; implementations wrap them with
// context (bucket, key). Adapters translate SDK errors at their boundary.
//
// # Implementations
//
// Memory (NewMem, here), a local directory (package objstore/dir), S3
// (package objstore/s3obj) and a fault-injecting wrapper (WithFaults, here)
// that wraps any of them. The conformance suite in objstore/objstoretest
// runs against every one.
//
// # Faults
//
// WithFaults(b, inj) passes every call through an Injector, configurable at
// run time and seeded (NewInjector(seed)), so a failing simulation replays
// from its seed. It can add latency drawn from a log-normal distribution
// given by its p50 and p99 (through an injectable sleep, so simulations keep
// their own clock; SetPutLatencyCoversCall makes a put's latency cover the
// wrapped call instead of preceding it, for a model whose latency is the
// whole remote put), fail calls with ErrUnavailable at a rate or all of them
// while the bucket is down, answer PutIfAbsent with ErrAmbiguous after the
// write landed or without it, and corrupt reads (one bit flipped, or
// truncated). Faults can be random or forced for the next n calls. It
// counts calls per Op and calls an OnCall hook for every call, for traces.
// With nothing configured it is transparent.
package objstore
