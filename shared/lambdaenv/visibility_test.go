package lambdaenv_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/lambdaenv"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

func TestMain(m *testing.M) { emulator.Main(m) }

// down makes the metastore unavailable while set.
type down struct {
	metastore.Store
	on atomic.Bool
}

func (d *down) GetHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	if d.on.Load() {
		return metastore.Head{}, metastore.ErrUnavailable
	}
	return d.Store.GetHead(ctx, c)
}

// TestFailedChainRedeliveredEarlyOnEmulator: a release event on a real SQS
// FIFO queue (the emulator) whose chain's absorb fails (the metastore
// unavailable through the in-invocation retries) is reported failed and
// made visible again by ChangeMessageVisibility, so SQS redelivers it long
// before the queue's 360 s visibility timeout; the redelivered message then
// absorbs the chain. Regression test: it failed before the fix (the
// message stayed invisible for 360 s and the receive below got nothing).
func TestFailedChainRedeliveredEarlyOnEmulator(t *testing.T) {
	ctx := t.Context()
	endpoint := emulator.Endpoint(t)
	sq := sqs.NewFromConfig(emulator.Config(t), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(emulator.Name(t, "release") + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "360"}})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]

	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	meta := &down{Store: metastore.NewMem()}
	set := chain.Set{Star: c.Star, W: 2, Buckets: []objstore.Bucket{objstore.NewMem("a"), objstore.NewMem("b"), objstore.NewMem("c")}}
	fs, err := absorbtest.NewStar(ctx, meta, c, set)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := fs.Flight(ctx, absorbtest.StreamIDs(2), []int{1, 2}, int64(i), 16, 3); err != nil {
			t.Fatal(err)
		}
	}
	ev := absorb.NewEvent(c, fs.Released())
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(string(ev.Marshal())),
		MessageGroupId: aws.String(ev.GroupID())}); err != nil {
		t.Fatal(err)
	}
	receive := func(wait int32) []events.SQSMessage {
		t.Helper()
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: wait,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		var ms []events.SQSMessage
		for _, m := range out.Messages {
			ms = append(ms, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body,
				Attributes: m.Attributes, EventSourceARN: arn})
		}
		return ms
	}
	first := receive(1)
	if len(first) != 1 {
		t.Fatalf("received %d messages, want the one release event", len(first))
	}

	h := &absorb.Handler{Absorber: &absorb.Absorber{Meta: meta, Sets: absorb.Sets{Express: set}},
		Retry: absorb.Retry{Attempts: 2, Backoff: time.Millisecond}, Redeliver: time.Second,
		Visibility: &lambdaenv.Visibility{Client: sq}}
	meta.on.Store(true)
	resp, err := h.HandleSQS(ctx, events.SQSEvent{Records: first})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != first[0].MessageId {
		t.Fatalf("failing run: %+v, %v; want the message reported failed", resp, err)
	}
	meta.on.Store(false)

	// Redelivered within a long poll's 20 s, not after 360 s.
	var again []events.SQSMessage
	for range 2 {
		if again = receive(20); len(again) > 0 {
			break
		}
	}
	if len(again) != 1 || again[0].MessageId != first[0].MessageId {
		t.Fatalf("redelivered %+v, want message %s again before the visibility timeout", again, first[0].MessageId)
	}
	if n := again[0].Attributes["ApproximateReceiveCount"]; n != "2" {
		t.Fatalf("ApproximateReceiveCount %q, want 2", n)
	}
	resp, err = h.HandleSQS(ctx, events.SQSEvent{Records: again})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivered run: %+v, %v", resp, err)
	}
	head, err := meta.GetHead(ctx, c)
	if err != nil || head.Checkpoint != fs.Released() {
		t.Fatalf("checkpoint %s (%v), want %s", head.Checkpoint, err, fs.Released())
	}
}

func TestQueueURL(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:sqs:eu-west-1:123456789012:strand-release.fifo": "https://sqs.eu-west-1.amazonaws.com/123456789012/strand-release.fifo",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q":               "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
		"arn:aws:sqs:eu-west-1:123456789012":                     "",
		"arn:aws:s3:eu-west-1:123456789012:q":                    "",
		"":                                                       "",
	} {
		got, err := lambdaenv.QueueURL(arn)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("QueueURL(%q) = %q, %v; want %q", arn, got, err, want)
		}
	}
}

func TestReceiptExpired(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value AQEB for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."}, true},
		{fmt.Errorf("delete: %w", &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Reason: The receipt handle has expired."}), true},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value 99999 for parameter VisibilityTimeout is invalid."}, false},
		{&smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Message: "The input receipt handle is not a valid receipt handle."}, false},
		{errors.New("the receipt handle has expired"), false},
		{nil, false},
	} {
		if got := lambdaenv.ReceiptExpired(tc.err); got != tc.want {
			t.Errorf("ReceiptExpired(%v) = %v", tc.err, got)
		}
	}
}

// TestExpiredReceiptOnEmulator: a FIFO message deleted after its
// visibility timeout. AWS (and LocalStack) refuse the handle, which
// ReceiptExpired recognises; moto accepts it (docs/localstack.md,
// "Differences").
func TestExpiredReceiptOnEmulator(t *testing.T) {
	ctx := context.Background()
	endpoint := emulator.Endpoint(t)
	sq := sqs.NewFromConfig(emulator.Config(t), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(emulator.Name(t, "expired") + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m"), MessageGroupId: aws.String("g")}); err != nil {
		t.Fatal(err)
	}
	out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 2})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
	}
	time.Sleep(1500 * time.Millisecond)
	_, err = sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: out.Messages[0].ReceiptHandle})
	switch {
	case err == nil:
		t.Logf("%s accepts an expired FIFO receipt handle (moto does; AWS refuses it)", endpoint)
	case !lambdaenv.ReceiptExpired(err):
		t.Fatalf("delete with an expired handle: %v, which ReceiptExpired does not recognise", err)
	default:
		t.Logf("%s refuses an expired FIFO receipt handle, as AWS: %v", endpoint, err)
	}
}
