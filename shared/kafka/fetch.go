package kafka

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
)

// pollEvery is how often a long-polling Fetch looks for new records.
const pollEvery = 10 * time.Millisecond

// maxReadBytes is one strand Read's byte bound (the API's maximum).
const maxReadBytes = 1 << 20

// ErrOffset: a fetch or commit offset outside the partition's records.
var ErrOffset = fmt.Errorf("kafka: offset out of range")

type fetchPart struct {
	topic  string
	offset int64
	max    int
	bytes  int
	resp   *kmsg.FetchResponseTopicPartition
	stop   bool // an error, or the partition's byte bound reached
	// logAppend: the topic's timestamps are the log's (LogAppendTime);
	// typed: logAppend was looked up.
	logAppend, typed bool
	stream           string // the partition's stream, once read
}

// fetchBudget is the most a Fetch's answer holds: its MaxBytes (0:
// Kafka's consumer default, 50 MiB), at most maxFetch (Limits).
func fetchBudget(r *kmsg.FetchRequest, maxFetch int) int {
	budget := int(r.MaxBytes)
	if budget <= 0 {
		budget = 52428800 // Kafka's fetch.max.bytes default
	}
	return min(budget, maxFetch)
}

// fetchedBytes is the record bytes a Fetch's answer holds.
func fetchedBytes(resp kmsg.Response) int64 {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	var n int64
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.RecordBatches))
		}
	}
	return n
}

// fetch answers Fetch: records from each partition's offset, at most its
// max bytes (but at least one batch), the whole at most MaxBytes; with
// fewer than MinBytes it waits for more up to MaxWaitMillis (capped by
// Limits.MaxWait). Fetch sessions are not kept: SessionID 0 tells clients
// to send full requests.
func (s *Server) fetch(ctx context.Context, r *kmsg.FetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	if r.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	var parts []*fetchPart
	for _, rt := range r.Topics {
		ft := kmsg.NewFetchResponseTopic()
		ft.Topic = rt.Topic
		ft.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			fp := &ft.Partitions[i]
			*fp = kmsg.NewFetchResponseTopicPartition()
			fp.Partition, fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = rp.Partition, -1, -1, -1
			fp.RecordBatches = []byte{} // not null: librdkafka refuses a null record set
			parts = append(parts, &fetchPart{topic: rt.Topic, offset: rp.FetchOffset, max: int(max(rp.PartitionMaxBytes, 1)), resp: fp})
		}
		resp.Topics = append(resp.Topics, ft)
	}
	wait := min(time.Duration(max(r.MaxWaitMillis, 0))*time.Millisecond, s.lim.MaxWait)
	deadline := s.clk.Now().Add(wait)
	budget := fetchBudget(r, s.lim.MaxFetchBytes)
	total, first := 0, true
	for {
		for _, p := range parts {
			if p.stop || total >= budget || !first && !s.grew(ctx, p) {
				continue
			}
			total += s.fetchPart(ctx, p, min(p.max-p.bytes, budget-total), first)
		}
		first = false
		if total >= int(r.MinBytes) || !s.clk.Now().Before(deadline) || ctx.Err() != nil || total >= budget {
			return resp
		}
		select {
		case <-s.clk.After(min(pollEvery, deadline.Sub(s.clk.Now()))):
		case <-ctx.Done():
			return resp
		}
	}
}

// grew reports whether a partition a long poll waits on may have records
// past its offset: its tail moved (CheckTail, the star's memory), so
// that waiting polls cost no reads.
func (s *Server) grew(ctx context.Context, p *fetchPart) bool {
	if p.stream == "" || p.offset < p.resp.HighWatermark {
		return true
	}
	r, err := s.cfg.Core.CheckTail(ctx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: p.stream}))
	return err != nil || int64(r.Msg.NextSeqNum) > p.offset
}

// fetchPart reads what is new in one partition into its response, at
// most max bytes (at least one batch when the partition has sent none
// yet), and returns the bytes added.
func (s *Server) fetchPart(ctx context.Context, p *fetchPart, room int, first bool) int {
	if internalTopic(p.topic) {
		p.resp.ErrorCode, p.stop = kerr.UnknownTopicOrPartition.Code, true
		return 0
	}
	added := 0
	for room > 0 || p.bytes == 0 {
		var res *strandv1.ReadResponse
		var stream string
		err := s.topics.call(p.topic, p.resp.Partition, func(name string) error {
			req := &strandv1.ReadRequest{Stream: name, Start: &strandv1.ReadRequest_SeqNum{SeqNum: uint64(p.offset)},
				Bytes: uint64(min(max(room, 1), maxReadBytes))}
			if p.offset < 0 {
				return ErrOffset
			}
			r, err := s.cfg.Core.Read(ctx, connect.NewRequest(req))
			if err == nil {
				res, stream = r.Msg, name
			}
			return err
		})
		if err != nil {
			p.fail(err)
			return added
		}
		p.stream = stream
		if !p.typed {
			la, err := s.logAppend(ctx, stream)
			if err != nil {
				p.fail(err)
				return added
			}
			p.logAppend, p.typed = la, true
		}
		tail := int64(res.NextSeqNum)
		p.resp.HighWatermark, p.resp.LastStableOffset = tail, tail
		if p.offset > tail {
			p.fail(fmt.Errorf("%w: offset %d is past the end %d", ErrOffset, p.offset, tail))
			return added
		}
		if first && (len(res.Records) == 0 && p.offset < tail || len(res.Records) > 0 && int64(res.Records[0].SeqNum) > p.offset) {
			// A gap at the offset: trimmed, or command records (which
			// take seqs and are not served). Trimmed is out of range.
			low, err := s.earliest(ctx, stream)
			if err != nil {
				p.fail(err)
				return added
			}
			p.resp.LogStartOffset = low
			if p.offset < low {
				p.fail(fmt.Errorf("%w: offset %d is below the first record %d (trimmed or retention)", ErrOffset, p.offset, low))
				return added
			}
		}
		first = false
		if len(res.Records) == 0 {
			return added
		}
		recs := make([]Fetched, 0, len(res.Records))
		for _, m := range res.Records {
			if !isCommand(m.Headers) { // commands take an offset and are not served
				recs = append(recs, Fetched{Offset: int64(m.SeqNum), LogTs: m.TimestampMs, Record: fromStrand(m.TimestampMs, headersOf(m.Headers), m.Body)})
			}
		}
		if len(recs) == 0 {
			p.offset = int64(res.Records[len(res.Records)-1].SeqNum) + 1
			if p.offset >= tail {
				return added
			}
			continue
		}
		before := len(p.resp.RecordBatches)
		p.resp.RecordBatches = EncodeBatch(p.resp.RecordBatches, recs, p.logAppend)
		n := len(p.resp.RecordBatches) - before
		p.bytes += n
		added += n
		room -= n
		p.offset = recs[len(recs)-1].Offset + 1
		if p.offset >= tail {
			return added
		}
	}
	if room <= 0 {
		p.stop = true
	}
	return added
}

func (p *fetchPart) fail(err error) {
	p.stop = true
	if len(p.resp.RecordBatches) > 0 {
		return // answer what was read; the error shows on the next fetch
	}
	p.resp.ErrorCode = code(err)
	if errorsIsOffset(err) {
		p.resp.ErrorCode = kerr.OffsetOutOfRange.Code
	}
}

func headersOf(hs []*strandv1.Header) []format.Header {
	out := make([]format.Header, len(hs))
	for i, h := range hs {
		out[i] = format.Header{Name: h.Name, Value: h.Value}
	}
	return out
}

// earliest is the stream's first readable record's offset (its tail when
// it holds none): the log start offset.
func (s *Server) earliest(ctx context.Context, stream string) (int64, error) {
	r, err := s.cfg.Core.Read(ctx, connect.NewRequest(&strandv1.ReadRequest{Stream: stream, Count: 1}))
	if err != nil {
		return 0, err
	}
	if len(r.Msg.Records) == 0 {
		return int64(r.Msg.NextSeqNum), nil
	}
	return int64(r.Msg.Records[0].SeqNum), nil
}

// listOffsets answers ListOffsets: -2 the earliest offset, -1 the latest
// (the tail), a timestamp the first record stamped at or after it (-1
// when none), answered with that record's timestamp as a fetch serves it.
// Max timestamp (-3) is not served (version 6 at most).
func (s *Server) listOffsets(ctx context.Context, r *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		lt := kmsg.NewListOffsetsResponseTopic()
		lt.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			lp := kmsg.NewListOffsetsResponseTopicPartition()
			lp.Partition, lp.Timestamp, lp.Offset = rp.Partition, -1, -1
			var err error
			if internalTopic(rt.Topic) {
				err = connect.NewError(connect.CodeNotFound, fmt.Errorf("kafka: topic %q is internal", rt.Topic))
			} else {
				err = s.topics.call(rt.Topic, rp.Partition, func(stream string) error {
					return s.offsetFor(ctx, stream, rp.Timestamp, &lp)
				})
			}
			if err != nil {
				lp.ErrorCode = code(err)
			}
			lt.Partitions = append(lt.Partitions, lp)
		}
		resp.Topics = append(resp.Topics, lt)
	}
	return resp
}

func (s *Server) offsetFor(ctx context.Context, stream string, ts int64, lp *kmsg.ListOffsetsResponseTopicPartition) error {
	switch {
	case ts == -1:
		r, err := s.cfg.Core.CheckTail(ctx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: stream}))
		if err != nil {
			return err
		}
		lp.Offset = int64(r.Msg.NextSeqNum)
	case ts == -2:
		low, err := s.earliest(ctx, stream)
		if err != nil {
			return err
		}
		lp.Offset = low
	case ts >= 0:
		r, err := s.cfg.Core.Read(ctx, connect.NewRequest(&strandv1.ReadRequest{Stream: stream, Count: 1,
			Start: &strandv1.ReadRequest_TimestampMs{TimestampMs: ts}}))
		if err != nil {
			return err
		}
		if len(r.Msg.Records) > 0 {
			m := r.Msg.Records[0]
			// The record's timestamp as a fetch serves it: the log's on a
			// LogAppendTime topic, else the producer's.
			la, err := s.logAppend(ctx, stream)
			if err != nil {
				return err
			}
			lp.Offset, lp.Timestamp = int64(m.SeqNum), fromStrand(m.TimestampMs, headersOf(m.Headers), m.Body).Timestamp
			if la {
				lp.Timestamp = m.TimestampMs
			}
		}
	default:
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("kafka: list offsets timestamp %d is not served (-1, -2 or a time)", ts))
	}
	return nil
}

// logAppend reports whether the stream's timestamps are the log's (a
// LogAppendTime topic: strand's arrival timestamping).
func (s *Server) logAppend(ctx context.Context, stream string) (bool, error) {
	r, err := s.cfg.Core.GetStream(ctx, connect.NewRequest(&strandv1.GetStreamRequest{Name: stream}))
	if err != nil {
		return false, err
	}
	return r.Msg.Stream.GetTimestamping().GetMode() == strandv1.TimestampingMode_TIMESTAMPING_MODE_ARRIVAL, nil
}

// isCommand reports whether a record is a strand command record (fence,
// trim, config: one header with an empty name, ADR 0042). The API refuses
// empty header names in appends, so no other record has one.
func isCommand(hs []*strandv1.Header) bool {
	return len(hs) == 1 && len(hs[0].Name) == 0
}
