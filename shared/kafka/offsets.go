package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
)

// internalPrefix starts the front end's own streams. They are not topics:
// Metadata hides them and Produce and Fetch refuse them.
const internalPrefix = "__strand_kafka"

// OffsetsStream holds committed offsets (ADR 0052): one record per
// OffsetCommit, replayed at the first group request after a start.
const OffsetsStream = internalPrefix + "/offsets"

// ErrCommit: a commit record that does not decode.
var ErrCommit = errors.New("kafka: malformed offset commit record")

// commitRecord is one OffsetCommit as stored: a record body in
// OffsetsStream. Part of the stored format: fields are only added.
type commitRecord struct {
	Group   string         `json:"g"`
	Offsets []commitOffset `json:"o"`
}

type commitOffset struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"n"`
	Epoch     int32  `json:"e"`
	Metadata  string `json:"m,omitempty"`
}

// DecodeCommit decodes a commit record's body: a group, and offsets not
// below -1 for valid topic names.
func DecodeCommit(b []byte) (commitRecord, error) {
	var c commitRecord
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrCommit, err)
	}
	if c.Group == "" {
		return c, fmt.Errorf("%w: no group", ErrCommit)
	}
	for _, o := range c.Offsets {
		if ValidTopic(o.Topic) != nil || o.Partition < 0 || o.Offset < -1 {
			return c, fmt.Errorf("%w: topic %q partition %d offset %d", ErrCommit, o.Topic, o.Partition, o.Offset)
		}
	}
	return c, nil
}

type okey struct {
	group, topic string
	partition    int32
}

// offsetStore is the committed offsets: the replayed OffsetsStream in
// memory, written through to it (a commit is answered once durable).
type offsetStore struct {
	core Core
	max  int        // records past which the stream is compacted
	mu   sync.Mutex // held across load and each commit's append: commits apply in stream order
	done bool
	m    map[okey]commitOffset
	n    int // records from the stream's first to its last
}

// internalCtx acts as the front end itself, whatever the client's token:
// the offsets stream is the front end's, and the client's permissions
// were checked on the topics.
func internalCtx(ctx context.Context) context.Context {
	return auth.WithGrant(ctx, auth.Grant{Ops: []auth.Op{auth.Admin}})
}

// load replays the offsets stream once, creating it if it is missing.
// Called with mu held.
func (o *offsetStore) load(ctx context.Context) error {
	if o.done {
		return nil
	}
	ctx = internalCtx(ctx)
	_, err := o.core.CreateStream(ctx, connect.NewRequest(&strandv1.CreateStreamRequest{Name: OffsetsStream}))
	if err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
		return fmt.Errorf("kafka: create %s: %w", OffsetsStream, err)
	}
	m := map[okey]commitOffset{}
	var from uint64
	n := 0
	for {
		r, err := o.core.Read(ctx, connect.NewRequest(&strandv1.ReadRequest{Stream: OffsetsStream, Start: &strandv1.ReadRequest_SeqNum{SeqNum: from}}))
		if err != nil {
			return fmt.Errorf("kafka: replay %s from %d: %w", OffsetsStream, from, err)
		}
		for _, rec := range r.Msg.Records {
			from = rec.SeqNum + 1
			if isCommand(rec.Headers) {
				continue // the compaction's trim
			}
			c, err := DecodeCommit(rec.Body)
			if err != nil {
				return fmt.Errorf("kafka: replay %s at %d: %w", OffsetsStream, rec.SeqNum, err)
			}
			apply(m, c)
			n++
		}
		if len(r.Msg.Records) == 0 || from >= r.Msg.NextSeqNum {
			break
		}
	}
	o.m, o.done, o.n = m, true, n
	return nil
}

func apply(m map[okey]commitOffset, c commitRecord) {
	for _, off := range c.Offsets {
		m[okey{c.Group, off.Topic, off.Partition}] = off
	}
}

// commit makes c durable in the offsets stream, then visible.
func (o *offsetStore) commit(ctx context.Context, c commitRecord) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.load(ctx); err != nil {
		return err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("kafka: encode commit: %w", err)
	}
	req := &strandv1.AppendRequest{Stream: OffsetsStream, Records: []*strandv1.AppendRecord{{Body: body}}}
	if _, err := o.core.Append(internalCtx(ctx), connect.NewRequest(req)); err != nil {
		return fmt.Errorf("kafka: commit offsets of group %q: %w", c.Group, err)
	}
	apply(o.m, c)
	o.n++
	if o.n > o.max {
		if err := o.compact(ctx); err != nil {
			return fmt.Errorf("kafka: compact %s: %w", OffsetsStream, err)
		}
	}
	return nil
}

// compactChunk bounds the offsets of one compaction record (well inside
// strand's 1 MiB record).
const compactChunk = 2000

// compact writes every live offset again, group by group, and trims the
// stream below the first of those records: a replay then reads the live
// offsets and the commits since. A compaction that fails part way leaves
// the stream longer, never wrong. Called with mu held.
func (o *offsetStore) compact(ctx context.Context) error {
	byGroup := map[string][]commitOffset{}
	for k, c := range o.m {
		if c.Offset >= 0 {
			byGroup[k.group] = append(byGroup[k.group], c)
		}
	}
	ictx := internalCtx(ctx)
	first, written := int64(-1), 0
	for g, offs := range byGroup {
		for len(offs) > 0 {
			n := min(len(offs), compactChunk)
			body, err := json.Marshal(commitRecord{Group: g, Offsets: offs[:n]})
			if err != nil {
				return err
			}
			r, err := o.core.Append(ictx, connect.NewRequest(&strandv1.AppendRequest{Stream: OffsetsStream, Records: []*strandv1.AppendRecord{{Body: body}}}))
			if err != nil {
				return err
			}
			if first < 0 {
				first = int64(r.Msg.StartSeqNum)
			}
			written++
			offs = offs[n:]
		}
	}
	if first < 0 {
		r, err := o.core.CheckTail(ictx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: OffsetsStream}))
		if err != nil {
			return err
		}
		first = int64(r.Msg.NextSeqNum)
	}
	if _, err := o.core.Trim(ictx, connect.NewRequest(&strandv1.TrimRequest{Stream: OffsetsStream, TrimSeqNum: uint64(first)})); err != nil {
		return err
	}
	o.n = written
	return nil
}

// get returns a committed offset (false: none).
func (o *offsetStore) get(ctx context.Context, k okey) (commitOffset, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.load(ctx); err != nil {
		return commitOffset{}, false, err
	}
	c, ok := o.m[k]
	return c, ok && c.Offset >= 0, nil
}

// group returns every committed offset of a group.
func (o *offsetStore) group(ctx context.Context, g string) ([]okey, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.load(ctx); err != nil {
		return nil, err
	}
	var out []okey
	for k, c := range o.m {
		if k.group == g && c.Offset >= 0 {
			out = append(out, k)
		}
	}
	return out, nil
}

// groups lists the groups with committed offsets.
func (o *offsetStore) groups(ctx context.Context) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.load(ctx); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for k := range o.m {
		if !seen[k.group] {
			seen[k.group] = true
			out = append(out, k.group)
		}
	}
	return out, nil
}
