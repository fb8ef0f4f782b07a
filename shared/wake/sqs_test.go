package wake

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metrics"
)

// TestSQSSendHungConnectionTimesOutAndCounts: an SQS endpoint that
// accepts the request and never answers does not stall the notifier: the
// send ends with an error at its per-call timeout, is counted in
// strand_release_event_stalls_total and logged. Regression test: it failed
// before the fix (the send waited for the caller's context, here 10 s, and
// nothing counted it).
func TestSQSSendHungConnectionTimesOutAndCounts(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(hung.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	reg := metrics.NewRegistry()
	q := &SQS{Client: client, QueueURL: hung.URL + "/123456789012/release.fifo", Timeout: 50 * time.Millisecond, Metrics: reg}
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := q.Released(ctx, c, metastore.Cursor{Epoch: 1, Slot: 7})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send to a hung endpoint: %v, want a deadline error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the send waited for the caller's context, not its own timeout")
	}
	if n := reg.Counter("strand_release_event_stalls_total", "", "chain", c.String()).Value(); n != 1 {
		t.Fatalf("stalls counted %d, want 1", n)
	}
}
