package server

import (
	"context"
	"fmt"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/star"
)

// checkToken validates a fencing token field: at most
// format.MaxFenceTokenBytes of UTF-8 (tokens travel in JSON and on command
// lines).
func checkToken(field, t string) error {
	if len(t) > format.MaxFenceTokenBytes {
		return invalid("%s is %d bytes (at most %d)", field, len(t), format.MaxFenceTokenBytes)
	}
	if !utf8.ValidString(t) {
		return invalid("%s is not valid UTF-8", field)
	}
	return nil
}

// FenceArgs is a validated Fence request.
type FenceArgs struct {
	Stream       string
	Token        string
	CurrentToken *string
	MatchSeq     *uint64
}

// ParseFence validates a Fence request: a valid stream name, token and
// current_token (if set) of at most 36 bytes of UTF-8. Failures are
// CodeInvalidArgument with the reason.
func ParseFence(m *strandv1.FenceRequest) (FenceArgs, error) {
	if err := checkName(m.GetStream()); err != nil {
		return FenceArgs{}, err
	}
	if err := checkToken("token", m.Token); err != nil {
		return FenceArgs{}, err
	}
	if _, reserved := star.MoveTarget(m.Token); reserved {
		return FenceArgs{}, invalid("token starts with the reserved move prefix %q (a stream move's seal, ADR 0065)", star.MovePrefix)
	}
	a := FenceArgs{Stream: m.Stream, Token: m.Token, MatchSeq: m.MatchSeqNum}
	if m.CurrentToken != nil {
		if err := checkToken("current_token", *m.CurrentToken); err != nil {
			return FenceArgs{}, err
		}
		a.CurrentToken = m.CurrentToken
	}
	return a, nil
}

// TrimArgs is a validated Trim request.
type TrimArgs struct {
	Stream   string
	TrimSeq  uint64
	Options  star.AppendOptions
	MatchSeq *uint64
}

// ParseTrim validates a Trim request: a valid stream name and a fencing
// token of at most 36 bytes of UTF-8. Failures are CodeInvalidArgument.
func ParseTrim(m *strandv1.TrimRequest) (TrimArgs, error) {
	if err := checkName(m.GetStream()); err != nil {
		return TrimArgs{}, err
	}
	if err := checkToken("fencing_token", m.FencingToken); err != nil {
		return TrimArgs{}, err
	}
	return TrimArgs{Stream: m.Stream, TrimSeq: m.TrimSeqNum, Options: star.AppendOptions{MatchSeq: m.MatchSeqNum, FenceToken: m.FencingToken}}, nil
}

// Fence implements the API: a fence command record (the fence operation).
func (s *Server) Fence(ctx context.Context, req *connect.Request[strandv1.FenceRequest]) (*connect.Response[strandv1.FenceResponse], error) {
	if err := s.authorize(ctx, auth.Fence, req.Msg.GetStream()); err != nil {
		return nil, err
	}
	a, err := ParseFence(req.Msg)
	if err != nil {
		return nil, err
	}
	_, id, err := s.leading(ctx, auth.Fence, a.Stream)
	if err != nil {
		return nil, err
	}
	ack, err := s.cfg.Star.Fence(ctx, id, a.Token, a.CurrentToken, a.MatchSeq)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&strandv1.FenceResponse{SeqNum: ack.FirstSeq, NextSeqNum: ack.Tail}), nil
}

// Trim implements the API: a trim command record (the trim operation).
func (s *Server) Trim(ctx context.Context, req *connect.Request[strandv1.TrimRequest]) (*connect.Response[strandv1.TrimResponse], error) {
	if err := s.authorize(ctx, auth.Trim, req.Msg.GetStream()); err != nil {
		return nil, err
	}
	a, err := ParseTrim(req.Msg)
	if err != nil {
		return nil, err
	}
	_, id, err := s.leading(ctx, auth.Trim, a.Stream)
	if err != nil {
		return nil, err
	}
	ack, point, err := s.cfg.Star.Trim(ctx, id, a.TrimSeq, a.Options)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&strandv1.TrimResponse{SeqNum: ack.FirstSeq, NextSeqNum: ack.Tail, TrimSeqNum: point}), nil
}

// ReconfigureArgs is a validated ReconfigureStream request.
type ReconfigureArgs struct {
	Name  string
	Patch star.ConfigPatch
}

// ParseReconfigure validates a ReconfigureStream request: a valid name,
// retention_ms (if set) not negative, a known timestamping mode (if set),
// and something to change. Failures are CodeInvalidArgument.
func ParseReconfigure(m *strandv1.ReconfigureStreamRequest) (ReconfigureArgs, error) {
	if err := checkName(m.GetName()); err != nil {
		return ReconfigureArgs{}, err
	}
	a := ReconfigureArgs{Name: m.Name}
	if m.RetentionMs != nil {
		if *m.RetentionMs < 0 {
			return ReconfigureArgs{}, invalid("retention_ms %d is negative (0 keeps data forever)", *m.RetentionMs)
		}
		a.Patch.RetentionMs = m.RetentionMs
	}
	if m.TimestampingMode != nil {
		ts, err := timestampingOf(&strandv1.Timestamping{Mode: *m.TimestampingMode})
		if err != nil {
			return ReconfigureArgs{}, err
		}
		mode := uint8(ts.Mode)
		a.Patch.TimestampMode = &mode
	}
	a.Patch.Uncapped = m.Uncapped
	if a.Patch == (star.ConfigPatch{}) {
		return ReconfigureArgs{}, invalid("nothing to change: give retention_ms, timestamping_mode or uncapped")
	}
	return a, nil
}

// ReconfigureStream implements the API (admin): a config command record
// sequenced with the appends, then the stream's metadata (GetStream,
// ListStreams, trim's retention) follows it.
func (s *Server) ReconfigureStream(ctx context.Context, req *connect.Request[strandv1.ReconfigureStreamRequest]) (*connect.Response[strandv1.ReconfigureStreamResponse], error) {
	if err := s.authorize(ctx, auth.Admin, req.Msg.GetName()); err != nil {
		return nil, err
	}
	a, err := ParseReconfigure(req.Msg)
	if err != nil {
		return nil, err
	}
	st, id, err := s.leading(ctx, auth.Admin, a.Name)
	if err != nil {
		return nil, err
	}
	// One at a time per stream: the metadata mirrors the config command
	// sequenced last only if the writes land in the commands' order
	// (review3; trim applies the longer of the two retentions).
	if !s.startOne(s.configuring, id) {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("stream %q: another ReconfigureStream of it is in progress on this star; retry", a.Name))
	}
	defer s.endOne(s.configuring, id)
	ack, cfg, err := s.cfg.Star.Reconfigure(ctx, id, a.Patch)
	if err != nil {
		return nil, toConnect(err)
	}
	st.RetentionMs = cfg.RetentionMs
	st.Timestamping = metastore.Timestamping{Mode: metastore.TimestampMode(cfg.TimestampMode), Uncapped: cfg.Uncapped}
	if err := s.cfg.Meta.SetStreamConfig(ctx, st.Name, st.ID, st.RetentionMs, st.Timestamping); err != nil {
		return nil, toConnect(fmt.Errorf("stream %q: the new configuration applies from seq %d, but recording it in the stream's metadata failed (the same request again completes it): %w", st.Name, ack.FirstSeq, err))
	}
	s.mu.Lock()
	if cur, ok := s.led[st.Name]; ok && cur.ID == st.ID {
		s.led[st.Name] = st
	}
	s.mu.Unlock()
	return connect.NewResponse(&strandv1.ReconfigureStreamResponse{Stream: streamMsg(st), SeqNum: ack.FirstSeq}), nil
}
