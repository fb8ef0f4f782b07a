package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/star"
)

// TestCode: strand API errors map to the Kafka codes clients act on the
// same way (retriable where strand says retry).
func TestCode(t *testing.T) {
	led := connect.NewError(connect.CodeUnavailable, errors.New("stream \"t/0\" is led by star-2"))
	d, err := connect.NewErrorDetail(&strandv1.Leader{Star: "star-2"})
	if err != nil {
		t.Fatal(err)
	}
	led.AddDetail(d)
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{connect.NewError(connect.CodeNotFound, errors.New("no")), kerr.UnknownTopicOrPartition},
		{connect.NewError(connect.CodePermissionDenied, errors.New("no")), kerr.TopicAuthorizationFailed},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("no")), kerr.InvalidRecord},
		{led, kerr.NotLeaderForPartition},
		// A batch for a stream sealed for a move, as the in-process core
		// answers it (no Leader detail: that is added by an interceptor
		// the front end does not pass).
		{connect.NewError(connect.CodeUnavailable, &star.MovedError{To: "star-1"}), kerr.NotLeaderForPartition},
		{connect.NewError(connect.CodeUnavailable, errors.New("halted")), kerr.RequestTimedOut},
		{connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("x: %w", star.ErrBatchSeqGap)), kerr.OutOfOrderSequenceNumber},
		{connect.NewError(connect.CodeAborted, errors.New("outcome unknown")), kerr.RequestTimedOut},
		{connect.NewError(connect.CodeCanceled, context.Canceled), kerr.RequestTimedOut},
		{fmt.Errorf("p: %w", ErrSequence), kerr.OutOfOrderSequenceNumber},
		{fmt.Errorf("p: %w", ErrBatchTooLarge), kerr.MessageTooLarge},
		{fmt.Errorf("p: %w", ErrBatch), kerr.CorruptMessage},
		{ErrTransactional, kerr.TransactionalIDAuthorizationFailed},
		{errors.New("anything else"), kerr.UnknownServerError},
	} {
		if got := code(tc.err); got != tc.want.Code {
			t.Errorf("%v: code %d, want %s (%d)", tc.err, got, tc.want.Message, tc.want.Code)
		}
	}
	if code(nil) != 0 {
		t.Error("nil is not 0")
	}
}
