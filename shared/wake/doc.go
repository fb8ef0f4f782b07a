// Package wake connects a star's releases to the absorb, and the absorb's
// checkpoint back to the star.
//
//   - Local (strand dev, tests): each release event runs the absorb
//     in-process for that chain (coalesced: one run at a time per chain,
//     always toward the latest released head), then tells the star the
//     checkpoint it reached, which frees backlog tokens and drops absorbed
//     flights from the flight index.
//   - SQS (AWS): each release event is one message on a FIFO queue, message
//     group = the chain, body = absorb.Event; the absorb Lambda consumes
//     it. Each send is bounded (DefaultSendTimeout): a hung connection
//     fails the send, which is logged and counted
//     (strand_release_event_stalls_total), and the star retries with its
//     latest head. Poller then reads each chain head periodically (a few reads per
//     second per star, off the write path) and tells the star the
//     checkpoint.
//
// Both report AbsorbHealth for the star's stall diagnosis: a metastore that
// is throttling, failing or slow makes a full backlog a metastore_slow
// stall rather than absorb_lagging.
package wake
