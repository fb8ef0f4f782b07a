package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
)

// A move's target must be serving when the move starts (ADR 0076): once
// the seal is durable only the new leader serves the stream, MoveStream
// included, so a move to a star that is down (stopped, retired, or never
// reachable at its Peers URL) would leave the stream with no star to
// append to and no way to move it back.

// ErrTargetDown refuses a move whose target star does not answer SERVING
// (nothing was written).
var ErrTargetDown = errors.New("server: move target not serving")

// PeerProbeTimeout bounds PeerHealth's check.
const PeerProbeTimeout = 2 * time.Second

// PeerHealth is the default Config.PeerUp: the gRPC health check
// (grpc.health.v1, served without a token) of the strand service at url,
// over client, answered SERVING within PeerProbeTimeout. An empty url is
// refused: the stream's clients could not be sent there either.
func PeerHealth(client connect.HTTPClient) func(ctx context.Context, id, url string) error {
	return func(ctx context.Context, id, url string) error {
		if url == "" {
			return fmt.Errorf("%w: star %s has no API address among this star's peers", ErrTargetDown, id)
		}
		ctx, cancel := context.WithTimeout(ctx, PeerProbeTimeout)
		defer cancel()
		res, err := grpchealth.NewClient(client, url).Check(ctx, &grpchealth.CheckRequest{Service: strandv1connect.StrandServiceName})
		if err != nil {
			return fmt.Errorf("%w: star %s at %s: health check: %w", ErrTargetDown, id, url, err)
		}
		if res.Status != grpchealth.StatusServing {
			return fmt.Errorf("%w: star %s at %s answers %v", ErrTargetDown, id, url, res.Status)
		}
		return nil
	}
}

// targetServing refuses a move to a star that does not serve now
// (failed_precondition, nothing written; ErrTargetDown).
func (s *Server) targetServing(ctx context.Context, name, to string) error {
	up := s.cfg.PeerUp
	if up == nil {
		up = PeerHealth(http.DefaultClient)
	}
	if err := up(ctx, to, s.cfg.Peers[to]); err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q stays here, unsealed, nothing written: a stream moved to a star that is down could not be appended to, nor moved back, until it serves: %w", ErrMoveRefused, name, err))
	}
	return nil
}
