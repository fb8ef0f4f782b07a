// Package kafka is strand's Kafka front end: the Kafka wire protocol
// (franz-go's kmsg for the codec) translated onto the strand API, served
// in process (Core; server.Server implements it). The user's guide is
// docs/kafka.md; the decisions are ADR 0052.
//
// # Translation, not a second core
//
// Every Kafka request becomes strand API calls made with the client's
// grant (SASL/PLAIN with a strand token as the password, or an admin
// grant for anonymous loopback clients in strand dev), so the API's
// guarantees hold unchanged: a produce is answered only after its appends
// are acknowledged (durable in object storage), an idempotent batch is an
// exactly-once append, a token's prefix and operations bound what a
// client may touch, and every request is bounded before work is spent on
// it (Limits): the bytes of requests read and not yet answered are taken
// from one budget across connections, half of it at most per tenant, and
// a connection whose request does not fit is not read until answers free
// room (held.go). Connections are bounded in all, per source address while
// they have not authenticated, then per tenant (so a standby relaying its
// clients is not held to one address's share), strangers shed first for a
// new one (conns.go).
//
// # Topics
//
// Partition p of topic T is the stream "T/p" (PartitionStream). A stream
// named as a valid topic and not of that form is a topic of one
// partition. Offsets are seq numbers. Streams under "__strand_kafka" are
// the front end's own (OffsetsStream) and are not topics.
//
// # Records
//
// A Kafka record is stored as a strand record whose body is the value and
// whose headers are the Kafka headers after one frame header named
// FrameHeader ("\x00"). The frame's value, part of the stored format:
//
//	byte      version (1)
//	byte      flags: 1 key present, 2 value null
//	varint    the producer's timestamp (zigzag)
//	[uvarint  key length, key bytes]       if flags&1
//	uvarint   n, then n uvarint indexes    headers whose value is null
//	uvarint   m, then m uvarint indexes    headers whose name is empty
//
// Indexes count the headers after the frame, strictly increasing. A first
// header that is not a well-formed frame is an ordinary header: such a
// record (written through the strand API) reads with a null key.
//
// # Idempotent producers
//
// An idempotent batch is appended in chunks within strand's batch limits;
// each chunk carries the strand producer id derived from (Kafka producer
// id, epoch, sequence of the chunk's first record) at batch sequence 0, so
// a retry of the batch is answered from the stream's dedupe window, on
// this star or on one that took the stream over (ADR 0052). Producer ids
// are the client's to send: the sequence table is kept per principal
// (pkey) and the core scopes the dedupe to the token (ScopeProducer).
//
// A produce is authorized on its partition's stream (mayAppend) before
// its record set is decompressed or decoded, and needs the append
// operation only: the stream's timestamping is read as the front end,
// before anything is written.
//
// # Connections
//
// A connection's requests are read, bounded and admitted in order; a
// produce's appends are admitted when it is read (Core.Submit) and its
// answer waits for their acks in the connection's writer, which answers
// in request order (conn.go). SASL/PLAIN or, for strand dev, anonymous
// loopback; TLS with the star's certificate when it has one (node).
//
// During a drain (the strand server refusing appends for a shutdown) a
// produce refused whole gets no answer: its connection closes, with no
// response, when the front end closes, and a fetch that Close cut short
// is not answered either; a partition refused inside a produce otherwise
// admitted is answered REQUEST_TIMED_OUT. Clients then retry on a new
// connection, to the successor, without the metadata refresh that
// NOT_LEADER_FOR_PARTITION would cost them (ADR 0071).
//
// # Groups
//
// The star leading OffsetsStream coordinates every group: the classic
// protocol runs in memory there (coordinator, group); committed offsets
// are records of OffsetsStream, replayed at the first group request after
// a start and compacted past Limits.MaxOffsetRecords, and a commit is
// answered once durable. Groups and members are bounded in all and per
// tenant (shares.go); a group left empty is forgotten.
package kafka
