package server

// StreamsHeld is how many entries the server holds in its per-stream sets
// (led, opened, opening, draining): for tests that check deleted streams
// leave nothing behind.
func StreamsHeld(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.led) + len(s.opened) + len(s.opening) + len(s.draining)
}

// SetLimits replaces s's limits: Handler builds its bounds from them.
func SetLimits(s *Server, l Limits) { s.cfg.Limits = l }

// FirstStream is the stream an encoded append's prefix names first (JSON
// or protobuf; sniff.go).
func FirstStream(isJSON bool, b []byte) (string, error) {
	if isJSON {
		return jsonFirstStream(b)
	}
	return protoFirstStream(b)
}
