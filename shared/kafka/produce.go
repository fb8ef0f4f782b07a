package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
)

// produce answers Produce once every batch in it is durable (strand's
// ack), whatever acks the client asked: acks=0 gets no answer, as Kafka
// does, but the request is still written before the next one is read.
// Partitions of one request are written concurrently; one partition's
// batches in order.
func (s *Server) produce(ctx context.Context, r *kmsg.ProduceRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	if r.TransactionID != nil {
		for _, rt := range r.Topics {
			pt := kmsg.NewProduceResponseTopic()
			pt.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				pp := kmsg.NewProduceResponseTopicPartition()
				pp.Partition, pp.ErrorCode = rp.Partition, kerr.TransactionalIDAuthorizationFailed.Code
				pt.Partitions = append(pt.Partitions, pp)
			}
			resp.Topics = append(resp.Topics, pt)
		}
		return ackOrNot(r, resp)
	}
	var wg sync.WaitGroup
	for _, rt := range r.Topics {
		pt := kmsg.NewProduceResponseTopic()
		pt.Topic = rt.Topic
		pt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			pp := &pt.Partitions[i]
			*pp = kmsg.NewProduceResponseTopicPartition()
			pp.Partition = rp.Partition
			wg.Add(1)
			go func() {
				defer wg.Done()
				base, logTs, err := s.producePartition(ctx, rt.Topic, rp.Partition, rp.Records)
				if err != nil {
					pp.ErrorCode, pp.BaseOffset = code(err), -1
					if r.Version >= 8 {
						pp.ErrorMessage = message(err)
					}
					return
				}
				pp.BaseOffset, pp.LogAppendTime = base, logTs
			}()
		}
		resp.Topics = append(resp.Topics, pt)
	}
	wg.Wait()
	return ackOrNot(r, resp)
}

func ackOrNot(r *kmsg.ProduceRequest, resp kmsg.Response) kmsg.Response {
	if r.Acks == 0 {
		return nil
	}
	return resp
}

// producePartition writes one partition's record set and returns the
// base offset of its first batch and, for a LogAppendTime topic, the
// time the log stamped (else -1).
func (s *Server) producePartition(ctx context.Context, t string, p int32, set []byte) (int64, int64, error) {
	if internalTopic(t) {
		return 0, 0, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("kafka: topic %q is internal", t))
	}
	batches, err := DecodeBatches(set, s.lim)
	if err != nil {
		return 0, 0, err
	}
	base, logTs := int64(-1), int64(-1)
	err = s.topics.call(t, p, func(stream string) error {
		for _, b := range batches {
			acks, err := s.appendBatch(ctx, stream, b)
			if err != nil {
				return err
			}
			if base < 0 {
				base = int64(acks[0].StartSeqNum)
			}
			logTs = acks[len(acks)-1].LastTimestampMs
		}
		var err error
		logTs, err = s.logAppendTs(ctx, stream, logTs)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return base, logTs, nil
}

// logAppendTs is the LogAppendTime a produce answers: the log's stamp
// (the last record's strand timestamp) for a LogAppendTime topic, -1
// (CreateTime: the producer's timestamps stand) otherwise.
func (s *Server) logAppendTs(ctx context.Context, stream string, ts int64) (int64, error) {
	la, err := s.logAppend(ctx, stream)
	if err != nil || !la {
		return -1, err
	}
	return ts, nil
}

// appendBatch appends one Kafka batch as one or more strand appends
// (chunks within strand's batch limits). An idempotent batch's chunks
// carry producer ids derived from (producer id, epoch, sequence of the
// chunk's first record) at batch sequence 0, so that a retry of the batch,
// here or on a successor star, is answered from the stream's dedupe
// window rather than written again (ADR 0052).
func (s *Server) appendBatch(ctx context.Context, stream string, b Batch) ([]*strandv1.AppendResponse, error) {
	if b.Idempotent() {
		if err := s.pids.check(stream, b); err != nil {
			return nil, err
		}
	}
	var acks []*strandv1.AppendResponse
	recs := make([]format.Record, len(b.Records))
	for i, r := range b.Records {
		recs[i] = r.toStrand(max(r.Timestamp, 0))
	}
	for start := 0; start < len(recs); {
		end := chunkEnd(recs, start)
		req := &strandv1.AppendRequest{Stream: stream, Records: appendRecords(recs[start:end])}
		if b.Idempotent() {
			id := chunkProducer(b.ProducerID, b.ProducerEpoch, int64(b.BaseSequence)+int64(start))
			zero := uint64(0)
			req.ProducerId, req.BatchSeq = id[:], &zero
		}
		resp, err := s.cfg.Core.Append(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		acks = append(acks, resp.Msg)
		start = end
	}
	if b.Idempotent() {
		s.pids.done(stream, b)
	}
	return acks, nil
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
// its sequence.
type producers struct {
	mu   sync.Mutex
	next map[pkey]int64
}

type pkey struct {
	stream string
	pid    int64
	epoch  int16
}

// maxProducerStates bounds the table; past it, it is cleared (the
// producers are then taken at their sequence, as after a restart).
const maxProducerStates = 1 << 16

func newProducers() *producers { return &producers{next: map[pkey]int64{}} }

// ErrSequence: an idempotent batch ahead of its producer's next sequence.
var ErrSequence = fmt.Errorf("kafka: producer sequence skips ahead")

func (ps *producers) check(stream string, b Batch) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	next, ok := ps.next[pkey{stream, b.ProducerID, b.ProducerEpoch}]
	if ok && int64(b.BaseSequence) > next {
		return fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d", ErrSequence, b.ProducerID, b.ProducerEpoch, b.BaseSequence, next)
	}
	return nil
}

func (ps *producers) done(stream string, b Batch) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.next) >= maxProducerStates {
		clear(ps.next)
	}
	k := pkey{stream, b.ProducerID, b.ProducerEpoch}
	end := int64(b.BaseSequence) + int64(len(b.Records))
	if end > ps.next[k] {
		ps.next[k] = end
	}
}
