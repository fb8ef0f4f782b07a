package server

import (
	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
)

// answerOpen answers a tailing read session's open at once with a
// heartbeat carrying the stream's tail, so that the response headers and
// a first message reach the client before anything is appended: an open
// at the tail of an idle stream would otherwise wait for the first
// heartbeat (seconds), and a client opening with a shorter deadline would
// fail.
func (s *Server) answerOpen(ss *connect.ServerStream[strandv1.ReadSessionResponse], id format.StreamID) error {
	next, ts, err := s.cfg.Star.Tail(id)
	if err != nil {
		return toConnect(err)
	}
	return ss.Send(&strandv1.ReadSessionResponse{NextSeqNum: next, LastTimestampMs: ts, Heartbeat: true})
}
