package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/clock"
)

// Naming (see doc.go, "Topics"): partition p of topic T is the stream
// "T/p" (p in decimal, no leading zeros). '/' is not allowed in Kafka
// topic names, so the mapping is one to one. A stream whose name is a
// valid topic name and is not of that form reads as a topic of one
// partition (a "bare" topic): the strand streams that existed before.

// PartitionStream is the stream that holds partition p of topic.
func PartitionStream(topic string, p int32) string {
	return topic + "/" + strconv.Itoa(int(p))
}

// ErrTopicName: a name that is not a valid Kafka topic name.
var ErrTopicName = errors.New("kafka: invalid topic name")

// ValidTopic checks a Kafka topic name: 1 to 249 of [a-zA-Z0-9._-], not
// "." or "..".
func ValidTopic(t string) error {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("%w: %q", ErrTopicName, t)
	}
	for _, c := range []byte(t) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q holds %q (Kafka allows a-z, A-Z, 0-9, '.', '_' and '-')", ErrTopicName, t, c)
		}
	}
	return nil
}

// splitStream reads a stream name as (topic, partition): "T/p" is
// partition p of T, a valid topic name alone is the bare topic's
// partition 0 (bare true); anything else is no topic (ok false).
func splitStream(name string) (topic string, p int32, bare, ok bool) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		t, num := name[:i], name[i+1:]
		n, err := strconv.ParseInt(num, 10, 32)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != num || ValidTopic(t) != nil {
			return "", 0, false, false
		}
		return t, int32(n), false, true
	}
	if ValidTopic(name) != nil {
		return "", 0, false, false
	}
	return name, 0, true, true
}

// partition is one partition's stream.
type partition struct {
	stream string
	leader string
	info   *strandv1.Stream
}

// topic is a topic's partitions, 0 to n-1.
type topic struct {
	name  string
	bare  bool
	parts []partition
}

// topicCache resolves topics to streams. Which topics are bare is cached
// briefly, so a produce or fetch to a bare topic costs no failed lookup.
type topicCache struct {
	core Core
	clk  clock.Clock
	mu   sync.Mutex
	bare map[string]time.Time // topic -> cached until
}

const bareTTL = 30 * time.Second

// stream is the stream holding partition p of t.
func (tc *topicCache) stream(t string, p int32) string {
	tc.mu.Lock()
	until, ok := tc.bare[t]
	tc.mu.Unlock()
	if ok && p == 0 && tc.clk.Now().Before(until) {
		return t
	}
	return PartitionStream(t, p)
}

func (tc *topicCache) setBare(t string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.bare == nil {
		tc.bare = map[string]time.Time{}
	}
	tc.bare[t] = tc.clk.Now().Add(bareTTL)
}

// call runs fn on the stream holding partition p of t; a partition 0 not
// found as "t/0" is tried as the bare stream t (and remembered).
func (tc *topicCache) call(t string, p int32, fn func(stream string) error) error {
	name := tc.stream(t, p)
	err := fn(name)
	if p == 0 && name != t && connect.CodeOf(err) == connect.CodeNotFound {
		if err2 := fn(t); connect.CodeOf(err2) != connect.CodeNotFound {
			if err2 == nil {
				tc.setBare(t)
			}
			return err2
		}
	}
	return err
}

// listStreams lists every stream under prefix the caller's token sees.
func listStreams(ctx context.Context, core Core, prefix string) ([]*strandv1.Stream, error) {
	var out []*strandv1.Stream
	after := ""
	for {
		resp, err := core.ListStreams(ctx, connect.NewRequest(&strandv1.ListStreamsRequest{Prefix: prefix, StartAfter: after, Limit: 1000}))
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Msg.Streams...)
		if resp.Msg.NextStartAfter == "" || len(resp.Msg.Streams) == 0 {
			return out, nil
		}
		after = resp.Msg.NextStartAfter
	}
}

// topicsOf groups streams into topics: a topic's partitions are its
// "T/p" streams from 0 while contiguous; a bare stream is a topic only
// when no "T/p" stream exists.
func topicsOf(streams []*strandv1.Stream) map[string]*topic {
	parts := map[string]map[int32]*strandv1.Stream{}
	bare := map[string]*strandv1.Stream{}
	for _, st := range streams {
		if st.Deleting {
			continue
		}
		t, p, isBare, ok := splitStream(st.Name)
		switch {
		case !ok:
		case isBare:
			bare[t] = st
		default:
			if parts[t] == nil {
				parts[t] = map[int32]*strandv1.Stream{}
			}
			parts[t][p] = st
		}
	}
	out := map[string]*topic{}
	for t, ps := range parts {
		tp := &topic{name: t}
		for p := int32(0); ; p++ {
			st, ok := ps[p]
			if !ok {
				break
			}
			tp.parts = append(tp.parts, partition{stream: st.Name, leader: st.Leader, info: st})
		}
		if len(tp.parts) > 0 {
			out[t] = tp
		}
	}
	for t, st := range bare {
		if _, ok := out[t]; !ok {
			out[t] = &topic{name: t, bare: true, parts: []partition{{stream: st.Name, leader: st.Leader, info: st}}}
		}
	}
	return out
}

// lookupTopic finds one topic's partitions.
func (s *Server) lookupTopic(ctx context.Context, t string) (*topic, error) {
	if err := ValidTopic(t); err != nil {
		return nil, err
	}
	sts, err := listStreams(ctx, s.cfg.Core, t+"/")
	if err != nil {
		return nil, err
	}
	if got := topicsOf(sts)[t]; got != nil {
		return got, nil
	}
	resp, err := s.cfg.Core.GetStream(ctx, connect.NewRequest(&strandv1.GetStreamRequest{Name: t}))
	if err != nil {
		return nil, err
	}
	if resp.Msg.Stream.Deleting {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("kafka: topic %q is being deleted", t))
	}
	s.topics.setBare(t)
	return &topic{name: t, bare: true, parts: []partition{{stream: t, leader: resp.Msg.Stream.Leader, info: resp.Msg.Stream}}}, nil
}

// allTopics lists every topic the caller sees.
func (s *Server) allTopics(ctx context.Context) (map[string]*topic, error) {
	sts, err := listStreams(ctx, s.cfg.Core, "")
	if err != nil {
		return nil, err
	}
	return topicsOf(sts), nil
}

func sortedTopics(m map[string]*topic) []*topic {
	out := make([]*topic, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// internalTopic reports whether t is hidden from clients (the front
// end's own streams).
func internalTopic(t string) bool { return strings.HasPrefix(t, internalPrefix) }

// topicErr is the Kafka code for a topic lookup's failure.
func topicErr(err error) int16 {
	if errors.Is(err, ErrTopicName) {
		return kerr.InvalidTopicException.Code
	}
	return code(err)
}
