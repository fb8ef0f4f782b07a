package server

import (
	"context"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
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

// Fence implements the API: a fence command record (append permission).
func (s *Server) Fence(ctx context.Context, req *connect.Request[strandv1.FenceRequest]) (*connect.Response[strandv1.FenceResponse], error) {
	a, err := ParseFence(req.Msg)
	if err != nil {
		return nil, err
	}
	_, id, err := s.leading(ctx, auth.Append, a.Stream)
	if err != nil {
		return nil, err
	}
	ack, err := s.cfg.Star.Fence(ctx, id, a.Token, a.CurrentToken, a.MatchSeq)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&strandv1.FenceResponse{SeqNum: ack.FirstSeq, NextSeqNum: ack.Tail}), nil
}

// Trim implements the API: a trim command record (append permission).
func (s *Server) Trim(ctx context.Context, req *connect.Request[strandv1.TrimRequest]) (*connect.Response[strandv1.TrimResponse], error) {
	a, err := ParseTrim(req.Msg)
	if err != nil {
		return nil, err
	}
	_, id, err := s.leading(ctx, auth.Append, a.Stream)
	if err != nil {
		return nil, err
	}
	ack, point, err := s.cfg.Star.Trim(ctx, id, a.TrimSeq, a.Options)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&strandv1.TrimResponse{SeqNum: ack.FirstSeq, NextSeqNum: ack.Tail, TrimSeqNum: point}), nil
}
