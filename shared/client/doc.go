// Package client is the Go client of the strand API.
//
//	c, err := client.New("http://127.0.0.1:4780", client.WithToken(os.Getenv("STRAND_TOKEN")))
//	_, err = c.CreateStream(ctx, "orders", client.CreateOptions{})
//
// # Appending: ProducerSession
//
// The recommended way to append is a ProducerSession: Append sends a
// batch (1 to 1000 records, at most 1 MiB) at once and returns a Future
// that resolves when the batch is durable; up to ProducerWindow batches
// are in flight. Every batch carries the session's producer id and a
// batch seq, so after a restart, a takeover or a dropped connection the
// session reconnects (at once after a session that made progress, else
// after the client's Retry backoff, as a server refusing sessions at its
// cap would be asked again) and resends what is unacknowledged, and the server
// answers batches it already has with their original acks: each batch is
// written exactly once. The session's own goroutine resolves the futures:
// nothing has to be read for it to go on. Flush waits for every batch so
// far; CloseSend says no more come (their acks still arrive); Close
// abandons the session.
//
//	p, err := c.OpenProducerSession(ctx, "orders", client.ProducerOptions{})
//	defer p.Close()
//	f, err := p.Append([]client.Record{{Body: []byte("hello")}})
//	err = p.Flush(ctx) // or: ack, err := f.Wait(ctx)
//
// For one batch now and then, Client.Append is the same in one call (one
// request per batch, exactly once as well). AppendSession is the bare
// pipelined stream under a ProducerSession: no producer id unless given,
// no reconnect; its Acks must be read for it to go on.
//
// # Reading: Records
//
// The recommended way to read is Records, a Go iterator over a stream's
// records from a start (FromSeq, FromTimestamp, FromTail): with NoTail it
// ends at the tail, without it it follows new records as they are
// acknowledged.
//
//	for r, err := range c.Records(ctx, "orders", client.FromSeq(0), client.SessionOptions{NoTail: true}) {
//		...
//	}
//
// Under it, ReadSession gives the batches and the heartbeats (Next,
// Batch); TailSession follows a stream for as long as it takes, reopening
// however long a server is away; Client.Read is one request (at most 1000
// records or 1 MiB). A ReadSession or Records that a restart ends reopens
// right after the last record it delivered (no gap, no repeat) within the
// client's Retry budget per outage, unless NoResume.
//
// # Leaders, retries, errors
//
// Calls that name a stream go to the star that leads it: a star that does
// not lead the stream answers with where its leader is (an Unavailable
// error with a Leader detail), and the client remembers that leader and
// retries there (at most a few hops). It follows a leader only to a
// trusted host, so that its token goes nowhere else: the endpoint's host
// (on any port), or one given with WithTrustedLeaders; and never from
// https to http. An untrusted leader is not called: the call fails with
// the server's Unavailable error, wrapping ErrUntrustedLeader. A
// remembered leader that fails (Unavailable, Unknown, Internal,
// DeadlineExceeded) is forgotten, so the next call starts at the endpoint.
//
// New also takes a comma-separated list of endpoints of one scheme (a
// leader and its standbys, as STRAND_ENDPOINT may list them): calls go to
// the current one, and a call that ends as at a process not serving
// (Unavailable without a Leader detail: refused, reset, draining) moves
// the client to the next, where its retries go (endpoints.go,
// docs/adr/0050). Every listed host is trusted.
//
// Retriable errors (Retriable: Unavailable, and Aborted for exactly-once
// appends) are retried with backoff within the client's Retry budget, by
// every call but DeleteStream (its server already waits up to 30 s for
// the stream's last appends; the caller decides whether to ask again).
// Calls that are not idempotent (CreateStream, CreateToken, RevokeToken,
// an append without a producer id) are not retried after a connection
// lost mid-call, whose outcome is unknown (closed before the answer
// began, or cut mid-answer: ErrConnectionLost); no call is retried when a
// Leader detail names a host the client will not follow
// (ErrUntrustedLeader: it would be named again). A client on the default
// budget that has never reached its server does not retry a refused dial:
// at first contact that is a wrong endpoint or a stopped server, and the
// call fails at once (with several endpoints, after trying each once). A
// client given a budget (WithRetry) retries from its first call, waiting
// for a server that is starting.
//
// A response message larger than MaxResponseBytes (4 MiB) is refused with
// ResourceExhausted rather than read into memory.
//
// Errors are *connect.Error values; SeqMismatch extracts the tail from a
// match_seq_num miss, LeaderOf the leader, and connect.CodeOf gives the
// code.
//
// Plain http:// endpoints speak HTTP/2 without TLS (h2c), which the
// sessions need; https:// endpoints negotiate HTTP/2 with TLS.
package client
