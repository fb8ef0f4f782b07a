// Package s3obj is the S3 implementation of objstore.Bucket, over
// aws-sdk-go-v2. One Bucket is one bucket: a general purpose bucket (S3
// Standard) or an S3 Express One Zone directory bucket (<base>--<zone-id>--x-s3).
// For directory buckets the SDK signs with CreateSession credentials and uses
// the zonal endpoint on its own; this package adds two things for them: List
// (below), and the session mode. The SDK's default session provider asks
// CreateSession for no mode, which S3 serves as a ReadWrite session, so a
// principal whose policy allows s3express:CreateSession only with
// s3express:SessionMode = ReadOnly is refused. With
// Options.ExpressSessionMode (or the environment's
// STRAND_S3EXPRESS_SESSION_MODE) set to ReadOnly or ReadWrite, NewClient
// installs its own provider (express.go) that sends that mode
// (x-amz-create-session-mode), caches one session per bucket and renews it
// a minute before it expires. A mode other than those two is ErrSessionMode. Directory buckets do not accept path-style requests: leave
// Options.PathStyle false on AWS; set it for emulators and MinIO.
//
// # Operations
//
//   - PutIfAbsent: PutObject with If-None-Match: * and the body's exact
//     Content-Length.
//   - Get(key, off, n): one GetObject. off = 0 and n < 0 sends no Range (an
//     empty object has no satisfiable range); n < 0 sends Range bytes=off-;
//     n > 0 sends bytes=off-(off+n-1), which S3 shortens at the end of the
//     object (a short read, no error). n = 0 is answered by HeadObject (no
//     byte range selects zero bytes). A negative off is ErrRange without a
//     request. A Get returns at most DefaultMaxGet (256 MiB; WithMaxGet
//     changes it): a longer answer (by Content-Length, or by the bytes that
//     arrive) is ErrTooLarge, and nothing past the bound is read.
//   - Head: HeadObject's Content-Length.
//   - Delete: DeleteObject, which S3 answers 204 for a missing key too.
//   - List: ListObjectsV2, every page, sorted here. Directory buckets list in
//     no particular order and accept only prefixes ending in "/", so List asks
//     for the prefix cut after its last "/" and filters. Tools only.
//
// # Retries and PutIfAbsent
//
// PutIfAbsent makes exactly one HTTP attempt per PUT: the SDK's retryer is
// limited to one attempt for this call (retry.AddWithMaxAttempts(r, 1)). A
// retry inside the SDK of a PUT that had landed, but whose answer was lost,
// would come back 412 and turn "created by this call" into ErrExists, hiding
// the ambiguity; with one attempt the caller sees ErrAmbiguous and resolves it
// by reading the object back (strand compares the writer nonce in the
// envelope). Callers must still read back after ErrExists whenever they need
// to know who wrote the object: ErrExists only says an object is there.
//
// The one retry PutIfAbsent does itself is on 409 ConditionalRequestConflict,
// which S3 documents as "a conflicting operation occurred, retry": nothing was
// written. It retries up to ConflictAttempts attempts in all, waiting
// ConflictBackoff and doubling (no jitter), then returns ErrUnavailable.
// Get, Head, Delete and List keep the SDK's standard retries: they are
// idempotent.
//
// # Error mapping
//
// SDK errors are translated here, with smithy-go's APIError code and the HTTP
// status (errors.As), and wrapped with the operation, bucket and key; the SDK
// error stays in the chain (errors.Is/As reach it, and context errors).
//
//	answer                                   PutIfAbsent      Get/Head/Delete/List
//	412 PreconditionFailed                   ErrExists        (no sentinel)
//	409 ConditionalRequestConflict           retried, then    -
//	                                         ErrUnavailable
//	404 NoSuchKey / NotFound                 -                ErrNotFound (Delete: nil)
//	404 NoSuchBucket                         no sentinel      no sentinel
//	416 InvalidRange                         -                ErrRange (off 0: empty object, no error)
//	429, 503, throttling codes (SlowDown...) ErrUnavailable   ErrUnavailable
//	500, 502, 504 and other 5xx              ErrAmbiguous     ErrUnavailable
//	other 4xx (AccessDenied, ...)            no sentinel      no sentinel
//	no answer, request never left            ErrUnavailable   ErrUnavailable
//	  (dial refused, DNS, serialization,
//	  context done before the call)
//	no answer after the request may have     ErrAmbiguous     ErrUnavailable
//	  left (timeout, reset, context ended
//	  during the call, unreadable answer)
//
// 5xx on a PUT is ErrAmbiguous rather than ErrUnavailable because
// objstore.ErrUnavailable promises nothing was written, and an internal error
// or a gateway timeout can follow a write that S3 applied. Throttling (503
// SlowDown, 429) is a refusal before processing. Errors with no sentinel are
// permanent for the configuration (a missing bucket, missing permissions): a
// missing bucket in particular is never ErrNotFound, so it cannot pass for a
// missing key. HeadObject has no body, so a Head on a missing bucket reads
// as 404 NotFound and does map to ErrNotFound.
//
// # Tests
//
// The session provider is tested against a local HTTP server: the mode
// header, the base credentials signing CreateSession, the session token
// signing the GETs, one session per bucket, renewal.
//
// The package runs objstoretest.Run against S3 on the emulator (package
// emulator: single-threaded moto, or STRAND_AWS_ENDPOINT), a fresh bucket per
// subtest, and drives the error mapping through a fault proxy on loopback
// that forwards a PUT and then drops or stalls the answer (ErrAmbiguous, and
// the object landed), answers 409, 503 or 500, or refuses connections.
package s3obj
