package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// Topic configs the front end maps onto stream configuration (doc.go,
// "Configs"); every other name is refused on create and alter.
const (
	cfgRetention = "retention.ms"
	cfgTimestamp = "message.timestamp.type"
)

// ErrConfig: a topic config the front end does not map, or a bad value.
var ErrConfig = errors.New("kafka: unsupported topic config")

// streamConfig is the stream configuration a set of topic configs asks
// for (nil fields: unset).
type streamConfig struct {
	retentionMs *int64
	mode        *strandv1.TimestampingMode
}

func (c *streamConfig) set(name string, value *string) error {
	v := ""
	if value != nil {
		v = *value
	}
	switch name {
	case cfgRetention:
		if value == nil {
			c.retentionMs = new(int64) // deleted: strand's default, forever
			return nil
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < -1 {
			return fmt.Errorf("%w: %s=%q: want milliseconds, or -1 for forever", ErrConfig, name, v)
		}
		ms = max(ms, 0) // -1, Kafka's forever, is strand's 0
		c.retentionMs = &ms
	case cfgTimestamp:
		m := strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_PREFER
		switch v {
		case "", "CreateTime":
		case "LogAppendTime":
			m = strandv1.TimestampingMode_TIMESTAMPING_MODE_ARRIVAL
		default:
			return fmt.Errorf("%w: %s=%q: want CreateTime or LogAppendTime", ErrConfig, name, v)
		}
		c.mode = &m
	default:
		return fmt.Errorf("%w: %q (strand maps %s and %s)", ErrConfig, name, cfgRetention, cfgTimestamp)
	}
	return nil
}

func (c streamConfig) create(name string) *strandv1.CreateStreamRequest {
	req := &strandv1.CreateStreamRequest{Name: name}
	if c.retentionMs != nil {
		req.RetentionMs = *c.retentionMs
	}
	if c.mode != nil {
		req.Timestamping = &strandv1.Timestamping{Mode: *c.mode}
	}
	return req
}

// createTopics creates each topic's partitions as streams "T/0".."T/n-1".
// A topic whose first stream exists already fails TOPIC_ALREADY_EXISTS;
// one that fails half way keeps the streams made (CreatePartitions or
// DeleteTopics finishes the job).
func (s *Server) createTopics(ctx context.Context, r *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		n := rt.NumPartitions
		if n == -1 {
			n = 1
		}
		st.NumPartitions, st.ReplicationFactor = n, 1
		fail := func(code int16, err error) {
			st.ErrorCode, st.ErrorMessage = code, message(err)
		}
		var cfg streamConfig
		var err error
		for _, c := range rt.Configs {
			if err = cfg.set(c.Name, c.Value); err != nil {
				break
			}
		}
		// The topic's configs as created (not null: the Java admin
		// client reads them).
		st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		asked := cfg.create(rt.Topic)
		for _, kv := range topicConfigs(asked.RetentionMs, asked.GetTimestamping().GetMode()) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			v := kv[1]
			c.Name, c.Value, c.Source = kv[0], &v, int8(kmsg.ConfigSourceDynamicTopicConfig)
			st.Configs = append(st.Configs, c)
		}
		switch {
		case err != nil:
			fail(kerr.InvalidConfig.Code, err)
		case ValidTopic(rt.Topic) != nil || internalTopic(rt.Topic):
			fail(kerr.InvalidTopicException.Code, fmt.Errorf("%w: %q", ErrTopicName, rt.Topic))
		case n < 1 || n > maxPartitions:
			fail(kerr.InvalidPartitions.Code, fmt.Errorf("kafka: %d partitions (1 to %d)", n, maxPartitions))
		case len(rt.ReplicaAssignment) > 0:
			fail(kerr.InvalidReplicaAssignment.Code, errors.New("kafka: strand places partitions itself (replica assignments are not taken)"))
		case r.ValidateOnly:
		default:
			if _, err := s.lookupTopic(ctx, rt.Topic); err == nil {
				fail(kerr.TopicAlreadyExists.Code, fmt.Errorf("kafka: topic %q exists", rt.Topic))
				break
			}
			for p := range n {
				if _, err := s.cfg.Core.CreateStream(ctx, connect.NewRequest(cfg.create(PartitionStream(rt.Topic, p)))); err != nil {
					fail(code(err), err)
					break
				}
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// maxPartitions bounds a topic's partitions (each is a stream).
const maxPartitions = 10_000

// deleteTopics deletes every stream of each topic.
func (s *Server) deleteTopics(ctx context.Context, r *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := r.TopicNames
	for _, t := range r.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		dt := kmsg.NewDeleteTopicsResponseTopic()
		dt.Topic = &name
		t, err := s.lookupTopic(ctx, name)
		if err == nil && internalTopic(name) {
			err = connect.NewError(connect.CodeNotFound, fmt.Errorf("kafka: topic %q is internal", name))
		}
		if err != nil {
			dt.ErrorCode, dt.ErrorMessage = topicErr(err), message(err)
		}
		for _, p := range partsOf(t) {
			if _, err := s.cfg.Core.DeleteStream(ctx, connect.NewRequest(&strandv1.DeleteStreamRequest{Name: p.stream})); err != nil {
				dt.ErrorCode, dt.ErrorMessage = code(err), message(err)
				break
			}
		}
		resp.Topics = append(resp.Topics, dt)
	}
	return resp
}

func partsOf(t *topic) []partition {
	if t == nil {
		return nil
	}
	return t.parts
}

// createPartitions grows topics to Count partitions, the new streams
// configured as partition 0 is.
func (s *Server) createPartitions(ctx context.Context, r *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range r.Topics {
		ct := kmsg.NewCreatePartitionsResponseTopic()
		ct.Topic = rt.Topic
		fail := func(code int16, err error) { ct.ErrorCode, ct.ErrorMessage = code, message(err) }
		t, err := s.lookupTopic(ctx, rt.Topic)
		switch {
		case err != nil:
			fail(topicErr(err), err)
		case t.bare:
			fail(kerr.InvalidPartitions.Code, fmt.Errorf("kafka: topic %q is the stream of that name: it has one partition (create a topic to have several)", rt.Topic))
		case int(rt.Count) <= len(t.parts) || rt.Count > maxPartitions:
			fail(kerr.InvalidPartitions.Code, fmt.Errorf("kafka: topic %q has %d partitions; asked for %d", rt.Topic, len(t.parts), rt.Count))
		case r.ValidateOnly:
		default:
			base := t.parts[0].info
			for p := int32(len(t.parts)); p < rt.Count; p++ {
				req := &strandv1.CreateStreamRequest{Name: PartitionStream(rt.Topic, p), StorageClass: base.StorageClass,
					RetentionMs: base.RetentionMs, Timestamping: base.Timestamping}
				if _, err := s.cfg.Core.CreateStream(ctx, connect.NewRequest(req)); err != nil {
					fail(code(err), err)
					break
				}
			}
		}
		resp.Topics = append(resp.Topics, ct)
	}
	return resp
}

// describeConfigs answers for topics: retention.ms and
// message.timestamp.type, read from partition 0's stream.
func (s *Server) describeConfigs(ctx context.Context, r *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		dr := kmsg.NewDescribeConfigsResponseResource()
		dr.ResourceType, dr.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			// Brokers have no configs to show: an empty list.
			resp.Resources = append(resp.Resources, dr)
			continue
		}
		t, err := s.lookupTopic(ctx, rr.ResourceName)
		if err != nil {
			dr.ErrorCode, dr.ErrorMessage = topicErr(err), message(err)
			resp.Resources = append(resp.Resources, dr)
			continue
		}
		st := t.parts[0].info
		for _, kv := range topicConfigs(st.RetentionMs, st.GetTimestamping().GetMode()) {
			if rr.ConfigNames != nil && !contains(rr.ConfigNames, kv[0]) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			v := kv[1]
			c.Name, c.Value, c.Source = kv[0], &v, kmsg.ConfigSourceDynamicTopicConfig
			dr.Configs = append(dr.Configs, c)
		}
		resp.Resources = append(resp.Resources, dr)
	}
	return resp
}

// topicConfigs are the mapped configs of a stream with this retention
// and timestamping mode, as Kafka names and spells them.
func topicConfigs(retentionMs int64, mode strandv1.TimestampingMode) [][2]string {
	ret := strconv.FormatInt(retentionMs, 10)
	if retentionMs == 0 {
		ret = "-1"
	}
	ts := "CreateTime"
	if mode == strandv1.TimestampingMode_TIMESTAMPING_MODE_ARRIVAL {
		ts = "LogAppendTime"
	}
	return [][2]string{{cfgRetention, ret}, {cfgTimestamp, ts}}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// alterConfigs applies SET and DELETE of the mapped configs to every
// partition's stream (ReconfigureStream: a config command record each).
func (s *Server) alterConfigs(ctx context.Context, r *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		ar := kmsg.NewIncrementalAlterConfigsResponseResource()
		ar.ResourceType, ar.ResourceName = rr.ResourceType, rr.ResourceName
		fail := func(code int16, err error) { ar.ErrorCode, ar.ErrorMessage = code, message(err) }
		var cfg streamConfig
		var err error
		for _, c := range rr.Configs {
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				err = cfg.set(c.Name, c.Value)
			case kmsg.IncrementalAlterConfigOpDelete:
				err = cfg.set(c.Name, nil)
			default:
				err = fmt.Errorf("%w: operation %v on %q (SET and DELETE only)", ErrConfig, c.Op, c.Name)
			}
			if err != nil {
				break
			}
		}
		var t *topic
		switch {
		case rr.ResourceType != kmsg.ConfigResourceTypeTopic:
			fail(kerr.InvalidRequest.Code, fmt.Errorf("%w: only topic configs are mapped", ErrConfig))
		case err != nil:
			fail(kerr.InvalidConfig.Code, err)
		default:
			if t, err = s.lookupTopic(ctx, rr.ResourceName); err != nil {
				fail(topicErr(err), err)
				break
			}
			if r.ValidateOnly {
				break
			}
			for _, p := range t.parts {
				req := &strandv1.ReconfigureStreamRequest{Name: p.stream, RetentionMs: cfg.retentionMs, TimestampingMode: cfg.mode}
				if _, err := s.cfg.Core.ReconfigureStream(ctx, connect.NewRequest(req)); err != nil {
					fail(code(err), err)
					break
				}
			}
		}
		resp.Resources = append(resp.Resources, ar)
	}
	return resp
}

// initProducerID hands out a random producer id at epoch 0 (see doc.go,
// "Idempotent producers"); a transactional id is refused.
func (s *Server) initProducerID(r *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	if r.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp
	}
	var b [8]byte
	if _, err := s.cfg.Rand.Read(b[:]); err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	resp.ProducerID = int64(binary.BigEndian.Uint64(b[:]) >> 1) // non-negative
	return resp
}
