package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/chain"
)

// TestInternalErrorsRedacted (issue 31): an Internal or DataLoss answer
// carries neither object keys nor other internal text, only the code, a
// sentinel and a log id; the log holds the full error under that id. Other
// codes pass unchanged.
func TestInternalErrorsRedacted(t *testing.T) {
	var log bytes.Buffer
	s := &Server{cfg: Config{Rand: bytes.NewReader(bytes.Repeat([]byte{0xab}, 64))}, log: slog.New(slog.NewTextHandler(&log, nil))}
	const key = "express-0/7f3a/segment-000042"
	for _, err := range []error{
		toConnect(fmt.Errorf("read object %s: boom", key)),
		toConnect(fmt.Errorf("read object %s: %w", key, chain.ErrNoCopy)),
	} {
		got := s.redact("/strand.v1.StrandService/Read", err)
		if connect.CodeOf(got) != connect.CodeOf(err) || strings.Contains(got.Error(), key) || !strings.Contains(got.Error(), "log id abababababab") {
			t.Errorf("%v answered as %v", err, got)
		}
	}
	if !strings.Contains(log.String(), key) || !strings.Contains(log.String(), "log_id=abababababab") {
		t.Errorf("the log lacks the full error: %s", log.String())
	}
	nf := connect.NewError(connect.CodeNotFound, fmt.Errorf("stream %q does not exist", "x"))
	if got := s.redact("/p", nf); got != nf {
		t.Errorf("not_found changed: %v", got)
	}
}
