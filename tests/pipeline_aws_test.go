package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/s3obj"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/shared/wake"
)

// TestPipelineOnEmulator runs the whole pipeline on the AWS emulator (S3,
// DynamoDB and SQS): appends through the star, release events on an SQS
// FIFO queue, the absorb handler invoked on those real messages, then the
// settle and trim handlers; reads return identical records before, during
// and after each stage.
func TestPipelineOnEmulator(t *testing.T) {
	ctx := context.Background()
	endpoint := emulator.Endpoint(t)
	awsCfg := emulator.Config(t)

	s3c, err := s3obj.NewClient(ctx, s3obj.Options{Region: emulator.Region, Endpoint: endpoint, PathStyle: true, Credentials: awsCfg.Credentials})
	if err != nil {
		t.Fatal(err)
	}
	var express []objstore.Bucket
	mk := func(name string) objstore.Bucket {
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatalf("create bucket %s: %v", name, err)
		}
		return s3obj.New(s3c, name)
	}
	for i := 0; i < 3; i++ {
		express = append(express, mk(emulator.Name(t, fmt.Sprintf("x%d", i))))
	}
	settled := mk(emulator.Name(t, "settled"))
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(emulator.DynamoDBEndpoint(t)) })
	table := emulator.Name(t, "meta")
	if err := dynamo.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	meta := dynamo.New(ddb, table)
	sq := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(emulator.Name(t, "release") + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}

	set := chain.Set{Star: "star-0", Buckets: express, W: 2, Backoff: 10 * time.Millisecond}
	sets := absorb.Sets{Express: set}
	cfg := star.Defaults()
	cfg.Standard = star.ClassConfig{}
	cfg.Express = star.ClassConfig{Buckets: express, W: 2, MemoryBufferMiB: 8, ParallelUploads: 8,
		FlushDeadline: 5 * time.Millisecond, FlightKiB: 16, CommitDeadline: 10 * time.Second}
	cfg.ReleaseEventInterval = 20 * time.Millisecond
	abs := &absorb.Absorber{Meta: meta, Sets: sets}
	s, err := star.New(cfg, meta, star.Options{
		Waker: &wake.SQS{Client: sq, QueueURL: *q.QueueUrl},
		NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W}
		},
		Absorber: abs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chainID := metastore.ChainID{Star: "star-0", Class: metastore.Express}

	// Streams, appends.
	var streams []metastore.Stream
	want := map[string][]string{}
	for i := 0; i < 3; i++ {
		var id format.StreamID
		id[0], id[15] = 0xee, byte(i)
		st, err := meta.CreateStream(ctx, metastore.Stream{Name: fmt.Sprintf("orders-%d", i), ID: id.String(), Class: metastore.Express, Star: "star-0", State: metastore.StreamActive})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
		if err := s.Open(star.StreamInfo{ID: id, Class: metastore.Express}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 30; n++ {
		st := streams[n%3]
		id, _ := format.ParseStreamID(st.ID)
		var rs []format.Record
		for j := 0; j < 1+n%4; j++ {
			b := fmt.Sprintf("%s/%d/%d", st.Name, n, j)
			rs = append(rs, format.Record{Body: []byte(b), Headers: []format.Header{{Name: []byte("n"), Value: []byte(fmt.Sprint(n))}}})
			want[st.ID] = append(want[st.ID], b)
		}
		if _, err := s.Append(ctx, id, rs, star.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reader := &read.Reader{Star: s, Meta: meta, Sets: map[metastore.Class]chain.Set{metastore.Express: set}, Settled: settled}
	check := func(stage string) {
		t.Helper()
		for _, st := range streams {
			res, err := reader.Read(ctx, st, read.Start{Kind: read.FromSeq, Seq: 0}, read.Limits{Count: 1000})
			if err != nil {
				t.Fatalf("%s: read %s: %v", stage, st.Name, err)
			}
			var got []string
			for i, r := range res.Records {
				if r.Seq != uint64(i) {
					t.Fatalf("%s: %s record %d has seq %d", stage, st.Name, i, r.Seq)
				}
				got = append(got, string(r.Body))
			}
			if !slices.Equal(got, want[st.ID]) {
				t.Fatalf("%s: %s reads %d records, want %d (or they differ)", stage, st.Name, len(got), len(want[st.ID]))
			}
		}
	}
	check("before absorb (flight index)")

	// The release events are on the queue: feed them to the absorb handler
	// as Lambda's SQS trigger would.
	h := &absorb.Handler{Absorber: abs, Chains: []metastore.ChainID{chainID}}
	released := s.Released(chainID)
	deadline := time.Now().Add(20 * time.Second)
	messages := 0
	for {
		head, err := meta.GetHead(ctx, chainID)
		if err != nil {
			t.Fatal(err)
		}
		if !head.Checkpoint.Less(released) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %s never reached the released head %s from %d events", head.Checkpoint, released, messages)
		}
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId}})
		if err != nil {
			t.Fatal(err)
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle,
				Attributes: m.Attributes})
			if g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; g != "star-0/express" {
				t.Fatalf("release event in message group %q", g)
			}
		}
		messages += len(ev.Records)
		resp, err := h.HandleSQS(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("absorb handler: %v, failures %v", err, resp.BatchItemFailures)
		}
		for _, m := range out.Messages {
			sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
		}
		check("during absorb")
	}
	if messages == 0 {
		t.Fatal("the star published no release events")
	}
	head, _ := meta.GetHead(ctx, chainID)
	s.Absorbed(chainID, head.Checkpoint)
	for _, st := range streams {
		id, _ := format.ParseStreamID(st.ID)
		if _, low, _ := s.ReadIndex(id, 0, 1, 1); low == 0 {
			t.Fatalf("%s: the flight index still holds seq 0 after the checkpoint passed it", st.Name)
		}
	}
	check("after absorb (refs, transit)")

	sh := &settle.Handler{Settler: &settle.Settler{Meta: meta, Sets: sets, Settled: settled}, Chains: []metastore.ChainID{chainID}}
	if _, err := sh.Handle(ctx, []byte(`{"detail-type":"Scheduled Event","source":"aws.events"}`)); err != nil {
		t.Fatal(err)
	}
	head, _ = meta.GetHead(ctx, chainID)
	if head.Settled != head.Checkpoint {
		t.Fatalf("settled cursor %s, checkpoint %s", head.Settled, head.Checkpoint)
	}
	for _, st := range streams {
		refs, _ := meta.QueryRefs(ctx, st.ID, 0, 100)
		for _, r := range refs {
			for _, l := range r.Locations {
				if !l.Settled {
					t.Fatalf("%s: ref %d-%d still points at transit %s after settle", st.Name, r.FirstSeq, r.LastSeq, l.Key)
				}
			}
		}
	}
	check("after settle")

	th := &trim.Handler{Trimmer: &trim.Trimmer{Meta: meta, Sets: sets, Settled: settled}, Chains: []metastore.ChainID{chainID}}
	if _, err := th.Handle(ctx, []byte(`{"detail-type":"Scheduled Event","source":"aws.events"}`)); err != nil {
		t.Fatal(err)
	}
	head, _ = meta.GetHead(ctx, chainID)
	if head.Trimmed != head.Settled {
		t.Fatalf("trimmed cursor %s, settled %s", head.Trimmed, head.Settled)
	}
	for _, b := range express {
		keys, err := b.List(ctx, "chains/")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k < format.SlotKey("star-0", head.Trimmed.Epoch, head.Trimmed.Slot) && !strings.HasPrefix(k, "chains/star-0/") {
				t.Fatalf("unexpected key %s", k)
			}
			if _, e, sl, ok := chain.ParseSlotKey(k); ok && (metastore.Cursor{Epoch: e, Slot: sl}).Less(head.Trimmed) {
				t.Fatalf("slot %s below the trimmed cursor %s survived trim", k, head.Trimmed)
			}
		}
	}
	check("after trim")
}
