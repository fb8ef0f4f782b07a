// Package server serves the strand API (strand.v1.StrandService, see
// proto/strand/v1/strand.proto) from inside a star process, over Connect:
// gRPC, gRPC-Web and the Connect protocol, whose unary calls are plain
// HTTP POSTs with JSON bodies, so curl works:
//
//	curl -H "Authorization: Bearer $STRAND_TOKEN" -H 'Content-Type: application/json' \
//	  -d '{"stream":"hello"}' http://127.0.0.1:4780/strand.v1.StrandService/CheckTail
//
// # Streams and leaders
//
// CreateStream draws a random 16-byte id, records the stream with its
// leader star (Config.DefaultStar, or this star) in the metastore, and
// opens it on the star. Every call that names a stream looks the stream up
// in the metastore once (cached while this star leads it) before admission:
// a stream led by another star is answered with Unavailable and a Leader
// detail (star id and URL from Config.Peers), which the Go client follows;
// a stream this star leads but has not opened since it started is opened
// with its tail recovered from the metastore's last ref. That read runs
// outside the server's lock and once per stream (calls for a stream being
// opened wait for its one read), so a slow metastore delays only the
// streams being opened. A stream being drained or deleted by DeleteStream
// is never (re)opened: an open reads the stream again from the metastore
// once it is registered, and checks for a drain under the lock just before
// the star opens it (a DeleteStream waits for an open registered before
// its drain), so an Append that looked the stream up as active before the
// delete gets NotFound. The server keeps no set of deleted ids: the
// metastore is the record, so nothing grows with deletions.
//
// # Moves
//
// MoveStream (move.go, ADR 0065; an admin token over every stream) seals
// the stream on this star (star.Seal), drains it and writes the new
// leader (metastore MoveStream, conditioned on this star leading it). A
// batch refused by the seal is answered Unavailable with a Leader detail
// naming the new leader (movedInterceptor). An open checks the leader in
// the metastore again after recovering the stream, refuses a stream this
// server moved away after the open's metastore read began (moved), and
// rolls forward a stream it finds sealed to another star (the old
// leader died between the seal and the metastore write): it writes the
// seal's target as the leader and answers with it. It never unseals a
// stream sealed to another star.
//
// # Errors
//
//	bad input (names, records, limits)      InvalidArgument, with the reason
//	match_seq_num miss                      FailedPrecondition + Tail detail
//	producer batch_seq gap / below window   FailedPrecondition (nothing written)
//	fencing token not the stream's current  FailedPrecondition (nothing written)
//	unknown stream                          NotFound
//	stream exists (or is being deleted)     AlreadyExists
//	not the leader                          Unavailable + Leader detail
//	stream moved (sealed) to another star   Unavailable + Leader detail
//	MoveStream to its own leader, to a star FailedPrecondition (nothing
//	  without the stream's class, or too    written)
//	  soon after a move
//	star stopping, stores unavailable       Unavailable
//	epoch halted past --halt-wait (new)     Unavailable (nothing written)
//	DeleteStream could not drain in time    Unavailable (nothing deleted)
//	DeleteStream while another one drains   FailedPrecondition
//	                                        (ErrDeleteInProgress)
//	append whose outcome is unknown         Aborted ("outcome unknown": the
//	                                        batch may be committed; retry
//	                                        with its producer_id and batch_seq,
//	                                        or with match_seq_num)
//	no or unknown token / not allowed       Unauthenticated / PermissionDenied
//	message or body over a limit            ResourceExhausted (not retriable)
//	decoding budget or sessions spent       ResourceExhausted (retriable)
//	too many lookups of unknown tokens      ResourceExhausted (retriable)
//	tenant past its append byte rate        ResourceExhausted (retriable;
//	                                        ErrRateQuota, quota.go)
//	tenant at its stream quota              ResourceExhausted (not
//	                                        retriable; ErrStreamQuota)
//	uncapped timestamp > 24 h ahead         InvalidArgument (nothing written)
//	append over 1000 records / 65535 headers InvalidArgument, before decoding
//	session whose token is revoked/expired  Unauthenticated
//	corrupt data with no good copy          DataLoss (text in the log only)
//	the server failed                       Internal (text in the log only)
//	client gone / deadline                  Canceled / DeadlineExceeded
//
// # Tokens
//
// CreateToken, RevokeToken and ListTokens need the admin operation and stay
// within the caller's prefix: a new token's prefix must start with the
// caller's and its operations be ones the caller holds; a revoked token's
// prefix must start with the caller's (else PermissionDenied; an unknown
// hash, or one revoked already, is NotFound); a listing is narrowed to the
// caller's prefix and leaves revoked tokens out. A new token's expiry is at
// the latest the caller's, and it records the caller as its parent: a
// tenant is a root token and the tokens under it (ADR 0048), or a token
// created with tenant (only by an admin for every stream outside any
// started tenant; else PermissionDenied) and the tokens under it, with
// its own quotas (quota.go, ADR 0060). A revoked or
// expired token (or one whose ancestor is) is Unauthenticated with a
// message that says which. Bad ops, prefixes, descriptions (invisible or
// reordering characters too) or hashes are InvalidArgument with the
// reason. CreateToken returns the secret once and stores only its hash;
// logs carry hashes, never secrets. A revoke is seen at once by this
// server (its Checker forgets the grant and its descendants') and by the
// others within their cache TTL; open sessions end within
// Limits.SessionRecheck after that (watchGrant).
//
// Authentication is the auth package's middleware, from the headers, before
// any body is read; then the operations the procedure needs (requireOp),
// also before the body; each handler then authorizes its operation on the
// stream it names (authorize) before it validates the rest or changes or
// reads anything; an append's stream is read from its encoded bytes and
// authorized before the append is decoded (authorizeAppend,
// appendstream.go). Fence needs the fence operation, Trim the trim
// operation; a token without fence reads fence records without their body.
// An append's producer id is scoped to its token (ScopeProducer), so no
// other principal's batch is answered for or deduplicated against it.
//
// # Limits
//
// Handler bounds every request (Config.Limits, limits.go): one message
// (6 MiB for the appends, 64 KiB for every other procedure, after
// decompression; gzip stops inflating there), an append's records and
// headers counted in its encoded bytes before it is decoded (decode.go),
// the body of every call but AppendSession (message + framing, read within
// 30 s of the headers), the memory of requests being read and decoded at
// once (64 MiB of encoded bytes and, for an append, an upper bound of what
// it decodes to, taken before it is decoded; AppendSession messages
// included: stream_budget.go, decode_budget.go), and the sessions one
// tenant holds open (1000), and each response write: 64 KiB at a time
// under a write deadline (30 s; writebound.go), so a client that stops
// reading is cut off and its call's resources released. An Append's
// stream is authorized from the first 64 KiB of its message before the
// rest of its body is read (sniff.go). NewHTTPServer bounds headers (10 s, 64 KiB),
// idle connections (2 min) and HTTP/2 streams per connection (100);
// NewListener (conns.go) bounds connections (1024, 256 per source until a
// call with a valid token charges one to its tenant, 512 per tenant, 10 s
// to authenticate; the oldest stranger, else the longest idle, is shed for
// a new one). Internal and DataLoss answers carry a log id, not their text
// (redact.go). docs/reliability.md lists each limit with the test that
// holds it, docs/security.md the threat model. Every append names its
// token's tenant (the root's hash) as its tenant
// (star.AppendOptions.Tenant), so the star shares each class's pool,
// flights and dedupe bound fairly among tenants (shared/star/fair.go).
//
// # Sessions
//
// AppendSession pipelines: each request is submitted as it arrives and its
// ack is sent when it is durable, in request order. At most
// Config.MaxPendingAppends batches await their acks; past that the server
// stops reading the request stream (backpressure reaches the producer
// through HTTP/2 flow control). A failed batch ends the session with its
// error after the acks of the batches before it. Acks that are ready
// together share one HTTP/2 write: the send loop holds connect's flush
// while the next queued ack is already there, never for one still to come
// nor for a timer (flush.go). ReadSession is
// read.Reader.Session: history, then the live tail with heartbeats. A
// tailing session's open is answered at once with a heartbeat carrying the
// tail (answerOpen), so an open at an idle tail does not wait for the first
// heartbeat interval.
//
// # Shutdown
//
// BeginDrain refuses Append, AppendSession and ReadSession with
// unavailable and the leader hint (this star: its successor takes it
// over); EndSessions then ends every open session the same way, an append
// session after the acks it has earned (shutdown.go). node.Close calls
// them around star.Quiesce.
package server
