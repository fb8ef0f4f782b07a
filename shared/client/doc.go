// Package client is the Go client of the strand API.
//
//	c, err := client.New("http://127.0.0.1:4780", client.WithToken(os.Getenv("STRAND_TOKEN")))
//	_, err = c.CreateStream(ctx, "orders", client.CreateOptions{})
//	ack, err := c.Append(ctx, "orders", []client.Record{{Body: []byte("hello")}}, client.AppendOptions{})
//	res, err := c.Read(ctx, "orders", client.FromSeq(0), client.Limits{})
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
// A response message larger than MaxResponseBytes (4 MiB) is refused with
// ResourceExhausted rather than read into memory.
//
// AppendSession pipelines appends over one HTTP/2 stream, acks in order;
// ReadSession reads history and then tails. Both open at the stream's
// leader (found with CheckTail). A star draining for a restart ends its
// sessions with unavailable (Retriable): a ReadSession reopens by itself
// after the last record it delivered, within the client's Retry budget
// per outage (unless NoResume), and a TailSession does the same for as
// long as it takes (until its ctx ends), with one piece of code for both
// (resumer); a ProducerSession resends what is unacknowledged with its
// batch seqs, and a bare AppendSession is reopened by the caller.
//
// Errors are *connect.Error values; SeqMismatch extracts the tail from a
// match_seq_num miss, and connect.CodeOf gives the code.
//
// Plain http:// endpoints speak HTTP/2 without TLS (h2c), which the
// sessions need; https:// endpoints negotiate HTTP/2 with TLS.
package client
