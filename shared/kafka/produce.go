package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
)

// produce admits a Produce's batches (in request order: one partition's
// batches are sequenced as they come) and returns its answer to come,
// which waits until every batch is durable (strand's acks), whatever acks
// the client asked; acks=0 gets no answer, as on Kafka.
func (s *Server) produce(ctx context.Context, r *kmsg.ProduceRequest) func() kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	type part struct {
		pp    *kmsg.ProduceResponseTopicPartition
		err   error
		sub   submitted
		topic string
	}
	var parts []part
	for _, rt := range r.Topics {
		pt := kmsg.NewProduceResponseTopic()
		pt.Topic = rt.Topic
		pt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			pt.Partitions[i] = kmsg.NewProduceResponseTopicPartition()
			pt.Partitions[i].Partition = rp.Partition
		}
		resp.Topics = append(resp.Topics, pt)
	}
	for ti, rt := range r.Topics {
		for i, rp := range rt.Partitions {
			p := part{pp: &resp.Topics[ti].Partitions[i], topic: rt.Topic}
			if r.TransactionID != nil {
				p.err = ErrTransactional
			} else {
				p.sub, p.err = s.submitPartition(ctx, rt.Topic, rp.Partition, rp.Records)
			}
			parts = append(parts, p)
		}
	}
	refused := len(parts) > 0
	for _, p := range parts {
		refused = refused && len(p.sub.waits) == 0 && s.drained(p.err)
	}
	return func() kmsg.Response {
		if refused {
			// The drain refused every batch: nothing was written, so a
			// retry cannot duplicate. No answer until the front end closes
			// (ADR 0071): NOT_LEADER_FOR_PARTITION would send the client
			// to a metadata refresh (kgo: at most one per 5 s), which this
			// star answers naming itself; a connection closed once, when
			// the successor is about to serve, is retried after the
			// client's reconnect backoff, on any client.
			<-ctx.Done()
			return hangUp
		}
		for _, p := range parts {
			base, logTs, err := p.sub.wait(ctx, p.err)
			if err != nil {
				p.pp.ErrorCode, p.pp.BaseOffset = code(err), -1
				if s.drained(err) {
					// Refused by the drain, other partitions admitted:
					// retriable after the client's backoff, without a
					// metadata refresh (kgo, the Java client, librdkafka),
					// so the retry comes whole to the draining star (held
					// above) or to its successor (ADR 0071).
					p.pp.ErrorCode = kerr.RequestTimedOut.Code
				}
				if r.Version >= 8 {
					p.pp.ErrorMessage = message(err)
				}
				continue
			}
			p.pp.BaseOffset, p.pp.LogAppendTime = base, logTs
		}
		if r.Acks == 0 {
			return nil
		}
		return resp
	}
}

// submitted is one partition's admitted appends, in order.
type submitted struct {
	waits     []func(context.Context) (*strandv1.AppendResponse, error)
	logAppend bool
}

// wait returns the partition's base offset and, for a LogAppendTime
// topic, the log's time (else -1), once every append is acknowledged;
// err is the submission's failure, if any.
func (sb submitted) wait(ctx context.Context, err error) (int64, int64, error) {
	if err != nil {
		return 0, 0, err
	}
	base, logTs := int64(-1), int64(-1)
	for _, w := range sb.waits {
		a, err := w(ctx)
		if err != nil {
			return 0, 0, err
		}
		if base < 0 {
			base = int64(a.StartSeqNum)
		}
		if sb.logAppend {
			logTs = a.LastTimestampMs
		}
	}
	return base, logTs, nil
}

// submitPartition decodes one partition's record set and admits its
// batches to the partition's stream.
func (s *Server) submitPartition(ctx context.Context, t string, p int32, set []byte) (submitted, error) {
	var sb submitted
	if internalTopic(t) {
		return sb, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("kafka: topic %q is internal", t))
	}
	if err := s.mayAppend(ctx, t, p); err != nil {
		return sb, err // before the record set is decompressed and decoded
	}
	batches, err := DecodeBatches(set, s.lim)
	if err != nil {
		return sb, err
	}
	err = s.topics.call(t, p, func(stream string) error {
		sb = submitted{}
		// The stream's timestamping, before anything is written (a
		// failure after the appends would answer an error for records
		// written), read as the front end: a produce needs append only,
		// checked here and again by the core.
		if err := allowAppend(ctx, stream); err != nil {
			return err
		}
		var err error
		if sb.logAppend, err = s.logAppend(internalCtx(ctx), stream); err != nil {
			return err
		}
		for _, b := range batches {
			if err := s.submitBatch(ctx, stream, b, &sb); err != nil {
				return err
			}
		}
		return nil
	})
	return sb, err
}

// mayAppend refuses, before a partition's record set is decoded, a
// caller whose token may append to none of the streams the partition can
// be (its stream, or for partition 0 the bare topic: topicCache.call);
// the core authorizes the stream again when it admits the appends. A
// connection without a grant is left to the core (no authentication
// here, tests).
func (s *Server) mayAppend(ctx context.Context, t string, p int32) error {
	err := allowAppend(ctx, s.topics.stream(t, p))
	if err != nil && p == 0 && allowAppend(ctx, t) == nil {
		return nil
	}
	return err
}

// allowAppend checks the caller's append permission on stream (nil
// without a grant: left to the core).
func allowAppend(ctx context.Context, stream string) error {
	g, ok := auth.FromContext(ctx)
	if !ok {
		return nil
	}
	if err := g.Allow(auth.Append, stream); err != nil {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("kafka: produce to stream %q: %w", stream, err))
	}
	return nil
}

// submitBatch admits one Kafka batch as one or more strand appends
// (chunks within strand's batch limits). An idempotent batch's chunks
// carry producer ids derived from (producer id, epoch, sequence of the
// chunk's first record) at batch sequence 0, so that a retry of the batch,
// here or on a successor star, is answered from the stream's dedupe
// window rather than written again (ADR 0052).
func (s *Server) submitBatch(ctx context.Context, stream string, b Batch, sb *submitted) error {
	if b.Idempotent() {
		g, _ := auth.FromContext(ctx)
		if err := s.pids.admit(g.Hash, stream, b); err != nil {
			return err
		}
	}
	recs := make([]format.Record, len(b.Records))
	for i, r := range b.Records {
		recs[i] = r.toStrand(max(r.Timestamp, 0))
	}
	// A batch's chunks are admitted back to back under the stream's
	// stripe, so that no other Kafka batch lands between them and the
	// batch's offsets are its base offset plus the record's index.
	mu := &s.stripes[stripe(stream)]
	mu.Lock()
	defer mu.Unlock()
	for start := 0; start < len(recs); {
		end := chunkEnd(recs, start)
		req := &strandv1.AppendRequest{Stream: stream, Records: appendRecords(recs[start:end])}
		if b.Idempotent() {
			id := chunkProducer(b.ProducerID, b.ProducerEpoch, int64(b.BaseSequence)+int64(start))
			zero := uint64(0)
			req.ProducerId, req.BatchSeq = id[:], &zero
		}
		w, err := s.cfg.Core.Submit(ctx, req)
		if err != nil {
			return err
		}
		sb.waits = append(sb.waits, w)
		start = end
	}
	return nil
}

// stripes serialize the admission of a batch's chunks per stream.
const stripes = 256

func stripe(stream string) int {
	h := fnv.New32a()
	h.Write([]byte(stream))
	return int(h.Sum32() % stripes)
}

// chunkEnd is the end of the chunk from start: at most
// format.MaxBatchRecords records and format.MaxBatchMeteredBytes metered.
func chunkEnd(recs []format.Record, start int) int {
	end, bytes := start, 0
	for end < len(recs) && end-start < format.MaxBatchRecords {
		n := format.MeteredSize(recs[end])
		if end > start && bytes+n > format.MaxBatchMeteredBytes {
			break
		}
		bytes += n
		end++
	}
	return end
}

func appendRecords(recs []format.Record) []*strandv1.AppendRecord {
	out := make([]*strandv1.AppendRecord, len(recs))
	for i, r := range recs {
		m := &strandv1.AppendRecord{TimestampMs: r.TimestampMs, Body: r.Body}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, &strandv1.Header{Name: h.Name, Value: h.Value})
		}
		out[i] = m
	}
	return out
}

// chunkProducer is the strand producer id of an idempotent Kafka chunk.
// Part of the stored dedupe state: do not change.
func chunkProducer(pid int64, epoch int16, seq int64) format.ProducerID {
	var in [8 + 2 + 8 + 6]byte
	copy(in[:6], "kafka1")
	binary.BigEndian.PutUint64(in[6:], uint64(pid))
	binary.BigEndian.PutUint16(in[14:], uint16(epoch))
	binary.BigEndian.PutUint64(in[16:], uint64(seq))
	sum := sha256.Sum256(in[:])
	var id format.ProducerID
	copy(id[:], sum[:])
	return id
}

// producers tracks each idempotent producer's next sequence per stream,
// in memory: a batch that skips ahead of a known producer's next is
// refused OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka does. A producer not
// known (new, or known by another star before a takeover) is taken at
// its sequence. The states are kept per principal, so that the bound
// costs the principal holding the most of them, not the others.
type producers struct {
	mu    sync.Mutex
	next  map[string]map[pkey]int64 // by principal
	total int                       // states in next
}

// pkey is a producer's key: its id and epoch on a stream, as sent by one
// principal (its token's hash). Kafka producer ids are the client's to
// send, so another principal sending the same id has a state of its own
// and cannot move this one's sequence (its appends are deduplicated
// apart too: server.ScopeProducer).
type pkey struct {
	principal string
	stream    string
	pid       int64
	epoch     int16
}

// maxProducerStates bounds the states of all principals together; a new
// state past it first drops every state of the principal that holds the
// most (its producers are then taken at their sequence, as after a
// restart), so that a principal flooding producer ids gives up its own
// states, never another's (review3).
const maxProducerStates = 1 << 16

func newProducers() *producers { return &producers{next: map[string]map[pkey]int64{}} }

// size is the number of producer states kept.
func (ps *producers) size() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.total
}

// ErrSequence: an idempotent batch ahead of its producer's next sequence.
var ErrSequence = fmt.Errorf("kafka: producer sequence skips ahead")

// admit checks a batch's sequence against its producer's next and, if
// it may go, advances the next past it (at admission: batches pipelined
// behind it are checked against it).
func (ps *producers) admit(principal, stream string, b Batch) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := pkey{principal, stream, b.ProducerID, b.ProducerEpoch}
	next, ok := ps.next[principal][k]
	if ok && int64(b.BaseSequence) > next {
		return fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d", ErrSequence, b.ProducerID, b.ProducerEpoch, b.BaseSequence, next)
	}
	end := int64(b.BaseSequence) + int64(len(b.Records))
	if ok && end <= next {
		return nil
	}
	if !ok && ps.total >= maxProducerStates {
		ps.dropLargest()
	}
	m := ps.next[principal]
	if m == nil {
		m = map[pkey]int64{}
		ps.next[principal] = m
	}
	if !ok {
		ps.total++
	}
	m[k] = max(end, next)
	return nil
}

// dropLargest drops every state of the principal that holds the most.
// Called with ps.mu.
func (ps *producers) dropLargest() {
	var top string
	n := -1
	for p, m := range ps.next {
		if len(m) > n {
			top, n = p, len(m)
		}
	}
	if n >= 0 {
		ps.total -= n
		delete(ps.next, top)
	}
}
