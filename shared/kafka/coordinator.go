package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
)

// Groups live on the star that leads the offsets stream (ADR 0052): that
// star coordinates every group, and its coordinator's commits are appends
// it leads. When the stream moves (a takeover), the coordinator moves
// with it: the other stars answer NOT_COORDINATOR and FindCoordinator
// names the new leader.

// coordCacheTTL is how long the offsets stream's leader is remembered.
const coordCacheTTL = 2 * time.Second

type coordCache struct {
	mu    sync.Mutex
	star  string
	until time.Time
}

// coordinatorStar is the star leading the offsets stream, creating the
// stream (led by this star) when it does not exist yet.
func (s *Server) coordinatorStar(ctx context.Context) (string, error) {
	now := s.clk.Now()
	s.coord.mu.Lock()
	if now.Before(s.coord.until) {
		star := s.coord.star
		s.coord.mu.Unlock()
		return star, nil
	}
	s.coord.mu.Unlock()
	ictx := internalCtx(ctx)
	r, err := s.cfg.Core.GetStream(ictx, connect.NewRequest(&strandv1.GetStreamRequest{Name: OffsetsStream}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		_, err = s.cfg.Core.CreateStream(ictx, connect.NewRequest(&strandv1.CreateStreamRequest{Name: OffsetsStream}))
		if err == nil || connect.CodeOf(err) == connect.CodeAlreadyExists {
			r, err = s.cfg.Core.GetStream(ictx, connect.NewRequest(&strandv1.GetStreamRequest{Name: OffsetsStream}))
		}
	}
	if err != nil {
		return "", fmt.Errorf("kafka: find the leader of %s: %w", OffsetsStream, err)
	}
	star := r.Msg.Stream.Leader
	s.coord.mu.Lock()
	s.coord.star, s.coord.until = star, now.Add(coordCacheTTL)
	s.coord.mu.Unlock()
	return star, nil
}

// findCoordinator answers FindCoordinator with the star leading the
// offsets stream. Transaction coordinators do not exist.
func (s *Server) findCoordinator(ctx context.Context, r *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	var code int16
	var msg *string
	var node int32 = -1
	var host string
	var port int32 = -1
	star, err := s.coordinatorStar(ctx)
	switch {
	case r.CoordinatorType != 0:
		code, msg = kerr.TransactionalIDAuthorizationFailed.Code, message(ErrTransactional)
	case err != nil:
		code, msg = kerr.CoordinatorNotAvailable.Code, message(err)
	default:
		code, msg = kerr.CoordinatorNotAvailable.Code, message(fmt.Errorf("kafka: the coordinator, star %q, has no Kafka address here", star))
		for _, b := range s.brokers() {
			if b.NodeID == nodeID(star) && s.knownStar(star) {
				code, msg, node, host, port = 0, nil, b.NodeID, b.Host, b.Port
			}
		}
	}
	if r.Version <= 3 {
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = code, msg, node, host, port
		return resp
	}
	for _, k := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = k, code, msg, node, host, port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// notCoordinator is a group request's answer from a star that does not
// coordinate groups (nil: this one does).
func (s *Server) notCoordinator(ctx context.Context, req kmsg.Request) kmsg.Response {
	star, err := s.coordinatorStar(ctx)
	if err == nil && star == s.cfg.Star {
		return nil
	}
	code := kerr.NotCoordinator.Code
	if err != nil {
		code = kerr.CoordinatorNotAvailable.Code
	}
	return groupError(req, code)
}

// groupDenied is a group request's answer when the caller's token does
// not cover its group (nil: it does, or there is no authentication): a
// token with prefix P and the read operation may use the groups whose
// names start with P, as it may read the topics whose streams do.
// DescribeGroups and ListGroups filter group by group instead.
func groupDenied(ctx context.Context, req kmsg.Request) kmsg.Response {
	var group string
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.LeaveGroupRequest:
		group = r.Group
	case *kmsg.OffsetCommitRequest:
		group = r.Group
	case *kmsg.OffsetFetchRequest:
		group = r.Group
	default:
		return nil
	}
	if groupAllowed(ctx, group) {
		return nil
	}
	return groupError(req, kerr.GroupAuthorizationFailed.Code)
}

// groupAllowed reports whether the caller may use the group.
func groupAllowed(ctx context.Context, group string) bool {
	g, ok := auth.FromContext(ctx)
	return !ok || g.Can(auth.Read) && g.Covers(group)
}

// groupError is a group request's answer with code everywhere.
func groupError(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = code, -1
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
	case *kmsg.DescribeGroupsResponse:
		for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, code
			r.Groups = append(r.Groups, dg)
		}
	case *kmsg.OffsetCommitResponse:
		for _, rt := range req.(*kmsg.OffsetCommitRequest).Topics {
			ct := kmsg.NewOffsetCommitResponseTopic()
			ct.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				cp := kmsg.NewOffsetCommitResponseTopicPartition()
				cp.Partition, cp.ErrorCode = rp.Partition, code
				ct.Partitions = append(ct.Partitions, cp)
			}
			r.Topics = append(r.Topics, ct)
		}
	}
	return resp
}
