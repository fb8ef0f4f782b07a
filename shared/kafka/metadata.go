package kafka

import (
	"context"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// clusterID names the cluster in Metadata (one strand deployment).
const clusterID = "strand"

// metadata answers Metadata: the stars as brokers, each partition's
// leader the star leading its stream. A topic asked for and missing is
// created with one partition when Config.AutoCreateTopics is on and the
// client allows it (Kafka's auto.create.topics.enable; strand dev).
func (s *Server) metadata(ctx context.Context, r *kmsg.MetadataRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = s.brokers()
	id := clusterID
	resp.ClusterID = &id
	resp.ControllerID = nodeID(s.cfg.Star)
	var tops []*topic
	var missing []kmsg.MetadataResponseTopic
	if r.Topics == nil {
		all, err := s.allTopics(ctx)
		if err != nil {
			s.log.Warn("kafka: metadata: list topics", "err", err.Error())
		}
		for _, t := range sortedTopics(all) {
			if !internalTopic(t.name) {
				tops = append(tops, t)
			}
		}
	} else {
		for _, rt := range r.Topics {
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
			}
			t, err := s.lookupTopic(ctx, name)
			if connect.CodeOf(err) == connect.CodeNotFound && s.cfg.AutoCreateTopics && r.AllowAutoTopicCreation && !internalTopic(name) {
				t, err = s.autoCreate(ctx, name)
			}
			if err != nil || internalTopic(name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if err != nil {
					mt.ErrorCode = topicErr(err)
				}
				missing = append(missing, mt)
				continue
			}
			tops = append(tops, t)
		}
	}
	for _, t := range tops {
		mt := kmsg.NewMetadataResponseTopic()
		name := t.name
		mt.Topic = &name
		for i, p := range t.parts {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(i)
			if s.knownStar(p.leader) {
				mp.Leader = nodeID(p.leader)
				mp.Replicas = []int32{mp.Leader}
				mp.ISR = []int32{mp.Leader}
			} else {
				mp.Leader = -1
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	resp.Topics = append(resp.Topics, missing...)
	return resp
}

// autoCreate creates a topic of one partition for a Metadata request
// (with the caller's token: it needs the right to create the stream).
func (s *Server) autoCreate(ctx context.Context, name string) (*topic, error) {
	if err := ValidTopic(name); err != nil {
		return nil, err
	}
	_, err := s.cfg.Core.CreateStream(ctx, connect.NewRequest(&strandv1.CreateStreamRequest{Name: PartitionStream(name, 0)}))
	if err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
		return nil, err
	}
	return s.lookupTopic(ctx, name)
}
