package kafka

import (
	"context"
	"sort"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// OffsetCommit and OffsetFetch: the group's committed offsets, durable in
// the offsets stream (offsets.go), checked against the group's state.

// allowTopic checks that the caller may read the topic (committing and
// fetching offsets need read, as Kafka's consumer does): its partition 0
// stream is looked up with the caller's token.
func (s *Server) allowTopic(ctx context.Context, t string) error {
	return s.topics.call(t, 0, func(name string) error {
		_, err := s.cfg.Core.GetStream(ctx, connect.NewRequest(&strandv1.GetStreamRequest{Name: name}))
		return err
	})
}

func (c *coordinator) offsetCommit(ctx context.Context, r *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	setAll := func(code func(t string) int16) {
		for _, rt := range r.Topics {
			ct := kmsg.NewOffsetCommitResponseTopic()
			ct.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				cp := kmsg.NewOffsetCommitResponseTopicPartition()
				cp.Partition, cp.ErrorCode = rp.Partition, code(rt.Topic)
				ct.Partitions = append(ct.Partitions, cp)
			}
			resp.Topics = append(resp.Topics, ct)
		}
	}
	var gcode int16
	c.mu.Lock()
	if r.Generation != -1 || r.MemberID != "" {
		g, _, code := c.member(r.Group, r.MemberID, r.Generation)
		switch {
		case code != 0:
			gcode = code
		case g.state == statePreparing:
			gcode = kerr.RebalanceInProgress.Code
		}
	} else if g := c.groups[r.Group]; g != nil && g.state != stateEmpty {
		gcode = kerr.UnknownMemberID.Code // a simple commit into a live group
	}
	c.mu.Unlock()
	if r.Group == "" {
		gcode = kerr.InvalidGroupID.Code
	}
	if gcode != 0 {
		setAll(func(string) int16 { return gcode })
		return resp
	}
	rec := commitRecord{Group: r.Group}
	denied := map[string]int16{}
	for _, rt := range r.Topics {
		if err := c.s.allowTopic(ctx, rt.Topic); err != nil {
			denied[rt.Topic] = topicErr(err)
			continue
		}
		for _, rp := range rt.Partitions {
			md := ""
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			rec.Offsets = append(rec.Offsets, commitOffset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, Epoch: rp.LeaderEpoch, Metadata: md})
		}
	}
	var err error
	if len(rec.Offsets) > 0 {
		err = c.offsets.commit(ctx, rec)
	}
	setAll(func(t string) int16 {
		if code, ok := denied[t]; ok {
			return code
		}
		if err != nil {
			c.s.log.Warn("kafka: offset commit failed", "group", r.Group, "err", err.Error())
			return kerr.CoordinatorNotAvailable.Code
		}
		return 0
	})
	return resp
}

func (c *coordinator) offsetFetch(ctx context.Context, r *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	type tp struct {
		topic string
		parts []int32
	}
	var want []tp
	if r.Topics == nil {
		keys, err := c.offsets.group(ctx, r.Group)
		if err != nil {
			c.s.log.Warn("kafka: offset fetch failed", "group", r.Group, "err", err.Error())
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp
		}
		byTopic := map[string][]int32{}
		for _, k := range keys {
			byTopic[k.topic] = append(byTopic[k.topic], k.partition)
		}
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			want = append(want, tp{t, ps})
		}
		sort.Slice(want, func(i, j int) bool { return want[i].topic < want[j].topic })
	} else {
		for _, rt := range r.Topics {
			want = append(want, tp{rt.Topic, rt.Partitions})
		}
	}
	for _, w := range want {
		ft := kmsg.NewOffsetFetchResponseTopic()
		ft.Topic = w.topic
		aerr := c.s.allowTopic(ctx, w.topic)
		if aerr != nil && r.Topics == nil {
			continue // not the caller's to see
		}
		for _, p := range w.parts {
			fp := kmsg.NewOffsetFetchResponseTopicPartition()
			fp.Partition, fp.Offset, fp.LeaderEpoch = p, -1, -1
			switch {
			case aerr != nil:
				fp.ErrorCode = topicErr(aerr)
			default:
				got, ok, err := c.offsets.get(ctx, okey{r.Group, w.topic, p})
				switch {
				case err != nil:
					c.s.log.Warn("kafka: offset fetch failed", "group", r.Group, "err", err.Error())
					fp.ErrorCode = kerr.CoordinatorNotAvailable.Code
				case ok:
					md := got.Metadata
					fp.Offset, fp.LeaderEpoch, fp.Metadata = got.Offset, got.Epoch, &md
				}
			}
			ft.Partitions = append(ft.Partitions, fp)
		}
		resp.Topics = append(resp.Topics, ft)
	}
	return resp
}
