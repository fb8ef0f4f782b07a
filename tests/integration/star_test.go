package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/lambdaenv"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/s3obj"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/tests/testproc"
)

const starID = "star-0"

// deployment is what localstack/deploy.sh (or the CDK stack) creates,
// named uniquely for this run.
type deployment struct {
	endpoint string
	dynamo   string   // DynamoDB's endpoint: endpoint, or moto's beside LocalStack's core
	express  []string // the Express set: three general-purpose buckets
	standard string
	settled  string
	table    string
	release  string // FIFO queue URL
	fence    string // queue URL

	s3c *s3.Client
	ddb *dynamodb.Client
	sq  *sqs.Client
}

func (d *deployment) open(name string) objstore.Bucket { return s3obj.New(d.s3c, name) }

// deploy creates the buckets, the queues and the table on the endpoint.
func deploy(ctx context.Context, t *testing.T) *deployment {
	t.Helper()
	awsCfg := emulator.Config(t)
	d := &deployment{endpoint: emulator.Endpoint(t), dynamo: emulator.DynamoDBEndpoint(t)}
	d.s3c = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(d.endpoint)
		o.UsePathStyle = true
		// Emulators send no checksums; the SDK would log each response.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	d.ddb = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(d.dynamo) })
	d.sq = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(d.endpoint) })
	bucket := func(prefix string) string {
		name := emulator.Name(t, prefix)
		if _, err := d.s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatalf("create bucket %s: %v", name, err)
		}
		return name
	}
	for i := range 3 {
		d.express = append(d.express, bucket(fmt.Sprintf("express-%d", i)))
	}
	d.standard = bucket("standard")
	d.settled = bucket("settled")
	queue := func(name string, attrs map[string]string) string {
		out, err := d.sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatalf("create queue %s: %v", name, err)
		}
		return aws.ToString(out.QueueUrl)
	}
	// A short visibility timeout: a message the handler reports failed is
	// redelivered within the test, as Lambda's retry would.
	d.release = queue(emulator.Name(t, "release")+".fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "5"})
	d.fence = queue(emulator.Name(t, "fence"), nil)
	d.table = emulator.Name(t, "meta")
	// The star creates the table too (--create-table); the test needs it
	// first, to issue a token.
	if err := dynamo.CreateTable(ctx, d.ddb, d.table); err != nil {
		t.Fatal(err)
	}
	return d
}

// starProc is one run of the star binary.
type starProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startStar runs the star with the configuration in the environment
// variables the ECS task definition sets, plus the emulator flags, and
// waits until /healthz on the admin port answers 200. extra are more
// NAME=value settings.
func startStar(ctx context.Context, t *testing.T, bin string, d *deployment, addr, admin string, run int, extra ...string) *starProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("star-%d.log", run))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--aws-endpoint", d.endpoint, "--dynamodb-endpoint", d.dynamo, "--s3-path-style", "--create-table", "--region", emulator.Region,
		"--log-level", "info")
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION="+emulator.Region,
		"STRAND_STAR_ID="+starID,
		"STRAND_TABLE="+d.table,
		"STRAND_EXPRESS_BUCKETS="+strings.Join(d.express, ","),
		"STRAND_EXPRESS_W=2",
		"STRAND_STANDARD_BUCKET="+d.standard,
		"STRAND_SETTLED_BUCKET="+d.settled,
		"STRAND_RELEASE_QUEUE_URL="+d.release,
		"STRAND_FENCE_QUEUE_URL="+d.fence,
		"STRAND_ADDR="+addr,
		"STRAND_ADMIN_ADDR="+admin,
		// Star flags through the environment too: short deadlines and
		// small budgets keep the run short.
		"STRAND_S3_FLUSH_DEADLINE=5ms",
		"STRAND_S3_MEMORY_BUFFER_MIB=16",
		"STRAND_S3_EXPRESS_MEMORY_BUFFER_MIB=8",
		"STRAND_RELEASE_EVENT_INTERVAL=20ms",
	)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &starProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("star run %d log:\n%s", run, tailOf(string(b), 6000))
		}
	})
	deadline := time.Now().Add(45 * time.Second)
	for {
		select {
		case <-p.done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the star exited before it was healthy: %v\n%s", cmd.ProcessState, tailOf(string(b), 6000))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/healthz", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the star did not answer /healthz on %s within 45 s", admin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *starProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// ledger is what the test expects each stream to hold.
type ledger struct {
	mu   sync.Mutex
	want map[string][]string // stream name -> bodies in seq order
}

func (l *ledger) add(name string, bodies ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want[name] = append(l.want[name], bodies...)
}

func (l *ledger) get(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.want[name])
}

func batch(bodies []string) []client.Record {
	rs := make([]client.Record, len(bodies))
	for i, b := range bodies {
		rs[i] = client.Record{Body: []byte(b), Headers: []client.Header{{Name: []byte("k"), Value: []byte(b[:1])}}}
	}
	return rs
}

// readAll reads a stream from seq 0 to its tail through the client.
func readAll(ctx context.Context, t *testing.T, c *client.Client, name string) ([]client.Record, uint64) {
	t.Helper()
	var out []client.Record
	for {
		res, err := c.Read(ctx, name, client.FromSeq(uint64(len(out))), client.Limits{Count: 500})
		if err != nil {
			t.Fatalf("read %s from %d: %v", name, len(out), err)
		}
		out = append(out, res.Records...)
		if len(res.Records) == 0 || uint64(len(out)) >= res.NextSeq {
			return out, res.NextSeq
		}
	}
}

// checkStream asserts that the stream reads exactly want: seqs contiguous
// from 0, bodies and headers as appended.
func checkStream(ctx context.Context, t *testing.T, c *client.Client, stage, name string, want []string) {
	t.Helper()
	recs, tail := readAll(ctx, t, c, name)
	if tail != uint64(len(want)) {
		t.Fatalf("%s: %s has tail %d, want %d", stage, name, tail, len(want))
	}
	for i, r := range recs {
		if r.Seq != uint64(i) {
			t.Fatalf("%s: %s record %d has seq %d", stage, name, i, r.Seq)
		}
		if string(r.Body) != want[i] {
			t.Fatalf("%s: %s seq %d is %q, want %q", stage, name, i, r.Body, want[i])
		}
		if len(r.Headers) != 1 || string(r.Headers[0].Value) != want[i][:1] {
			t.Fatalf("%s: %s seq %d headers %v", stage, name, i, r.Headers)
		}
	}
	if len(recs) != len(want) {
		t.Fatalf("%s: %s reads %d records, want %d", stage, name, len(recs), len(want))
	}
}

// refsCover reports whether the stream's refs cover [0, tail) contiguously.
func refsCover(ctx context.Context, meta metastore.Store, streamID string, tail uint64) (bool, error) {
	var next uint64
	for next < tail {
		refs, err := meta.QueryRefs(ctx, streamID, next, 100)
		if err != nil {
			return false, err
		}
		if len(refs) == 0 {
			return false, nil
		}
		for _, r := range refs {
			if r.FirstSeq > next {
				return false, nil
			}
			if r.LastSeq+1 > next {
				next = r.LastSeq + 1
			}
		}
	}
	return true, nil
}

// drainReleases feeds the release queue's messages to the absorb handler
// as Lambda's SQS trigger does (partial batch failures stay on the
// queue), until the refs of every stream cover its tail.
func drainReleases(ctx context.Context, t *testing.T, d *deployment, h *absorb.Handler, meta metastore.Store, tails map[string]uint64) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	messages := 0
	for {
		done := true
		for id, tail := range tails {
			ok, err := refsCover(ctx, meta, id, tail)
			if err != nil {
				t.Fatal(err)
			}
			done = done && ok
		}
		if done {
			return messages
		}
		if time.Now().After(deadline) {
			t.Fatalf("refs do not cover the tails %v after %d release events", tails, messages)
		}
		out, err := d.sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(d.release), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId}})
		if err != nil {
			t.Fatal(err)
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
			if g != starID+"/standard" && g != starID+"/express" {
				t.Fatalf("release event in message group %q, want one per chain", g)
			}
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body),
				ReceiptHandle: aws.ToString(m.ReceiptHandle), Attributes: m.Attributes})
		}
		messages += len(ev.Records)
		resp, err := h.HandleSQS(ctx, ev)
		if err != nil {
			t.Fatalf("absorb handler: %v", err)
		}
		if len(resp.BatchItemFailures) > 0 {
			t.Logf("absorb reported %d failed messages (redelivered after the visibility timeout)", len(resp.BatchItemFailures))
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range out.Messages {
			if !failed[aws.ToString(m.MessageId)] {
				_, err := d.sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.release), ReceiptHandle: m.ReceiptHandle})
				if lambdaenv.ReceiptExpired(err) {
					// Handled after its visibility timeout (a slow run): it
					// comes back and is absorbed again, as under Lambda.
					t.Logf("release event %s handled after its visibility timeout: redelivered", aws.ToString(m.MessageId))
				} else if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestStarProcess deploys the star as a process against the endpoint and
// exercises the whole system through its API: both classes, appends,
// reads, tails, absorb from real release events, settle, trim, and a
// SIGKILL with a restart that must keep every acknowledged record.
func TestStarProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	begin := time.Now()
	bin := testproc.Build(t, "./functions/star")
	d := deploy(ctx, t)
	meta := dynamo.New(d.ddb, d.table)

	token, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Issue(ctx, meta, token, "it/", []auth.Op{auth.Admin}); err != nil {
		t.Fatal(err)
	}
	addr, admin := testproc.FreeAddr(t), testproc.FreeAddr(t)
	p := startStar(ctx, t, bin, d, addr, admin, 1)
	t.Logf("star healthy %v after the start of the test", time.Since(begin).Round(time.Millisecond))

	c, err := client.New("http://"+addr, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	// Auth is on: no token, or a token for another prefix, is refused.
	anon, _ := client.New("http://" + addr)
	if _, err := anon.CreateStream(ctx, "it/anon", client.CreateOptions{}); err == nil {
		t.Fatal("CreateStream without a token succeeded")
	}
	if _, err := c.CreateStream(ctx, "other/x", client.CreateOptions{}); err == nil {
		t.Fatal("CreateStream outside the token's prefix succeeded")
	}

	names := []string{"it/std-0", "it/std-1", "it/exp-0", "it/exp-1"}
	ids := map[string]string{}
	for _, n := range names {
		class := "standard"
		if strings.Contains(n, "exp") {
			class = "express"
		}
		st, err := c.CreateStream(ctx, n, client.CreateOptions{Class: class})
		if err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
		if st.Class != class || st.Leader != starID {
			t.Fatalf("%s: class %q leader %q", n, st.Class, st.Leader)
		}
		ids[n] = st.ID
	}

	// Tailing readers on one stream of each class, opened before the
	// first append.
	const rounds = 12
	perStream := 0
	for r := range rounds {
		perStream += 1 + r%3
	}
	type tailed struct {
		bodies []string
		err    error
	}
	tails := map[string]chan tailed{}
	for _, n := range []string{"it/std-0", "it/exp-0"} {
		ch := make(chan tailed, 1)
		tails[n] = ch
		sess, err := c.OpenReadSession(ctx, n, client.FromSeq(0), client.SessionOptions{Count: uint64(perStream), Heartbeat: 200 * time.Millisecond})
		if err != nil {
			t.Fatalf("open read session on %s: %v", n, err)
		}
		go func() {
			defer sess.Close()
			var got []string
			for len(got) < perStream && sess.Next() {
				for _, r := range sess.Batch().Records {
					if r.Seq != uint64(len(got)) {
						ch <- tailed{got, fmt.Errorf("tail delivered seq %d at position %d", r.Seq, len(got))}
						return
					}
					got = append(got, string(r.Body))
				}
			}
			ch <- tailed{got, sess.Err()}
		}()
	}

	led := &ledger{want: map[string][]string{}}
	for r := range rounds {
		for _, n := range names {
			var bodies []string
			for j := range 1 + r%3 {
				bodies = append(bodies, fmt.Sprintf("%s/%d/%d", n, r, j))
			}
			ack, err := c.Append(ctx, n, batch(bodies), client.AppendOptions{})
			if err != nil {
				t.Fatalf("append to %s: %v", n, err)
			}
			if ack.StartSeq != uint64(len(led.get(n))) || ack.EndSeq != ack.StartSeq+uint64(len(bodies)) {
				t.Fatalf("%s: ack [%d,%d) after %d records", n, ack.StartSeq, ack.EndSeq, len(led.get(n)))
			}
			led.add(n, bodies...)
		}
	}
	// A match_seq_num miss rejects that batch and reports the tail.
	stale := uint64(0)
	if _, err := c.Append(ctx, "it/std-1", batch([]string{"never"}), client.AppendOptions{MatchSeq: &stale}); err == nil {
		t.Fatal("append with a stale match_seq_num succeeded")
	} else if tl, ok := client.SeqMismatch(err); !ok || tl.NextSeq != uint64(len(led.get("it/std-1"))) {
		t.Fatalf("stale match_seq_num: %v (tail %v, %v)", err, tl, ok)
	}
	for _, n := range names {
		checkStream(ctx, t, c, "after appends", n, led.get(n))
	}
	for n, ch := range tails {
		select {
		case got := <-ch:
			if got.err != nil {
				t.Fatalf("tail of %s: %v", n, got.err)
			}
			if !slices.Equal(got.bodies, led.get(n)) {
				t.Fatalf("tail of %s delivered %d records, want %d (or they differ)", n, len(got.bodies), len(led.get(n)))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tail of %s delivered nothing for 10 s", n)
		}
	}

	// Settlement, as the Lambdas run it: the same environment, the same
	// handlers.
	lambdaEnv := map[string]string{
		"STRAND_TABLE": d.table, "STRAND_STARS": starID,
		"STRAND_STANDARD_BUCKET": d.standard, "STRAND_EXPRESS_BUCKETS": strings.Join(d.express, ","),
		"STRAND_SETTLED_BUCKET": d.settled, "STRAND_S3_PATH_STYLE": "true",
	}
	lcfg, err := absorb.ConfigFromEnv(func(k string) string { return lambdaEnv[k] })
	if err != nil {
		t.Fatal(err)
	}
	sets := lcfg.Sets(d.open)
	chains := lcfg.Chains()
	if len(chains) != 2 {
		t.Fatalf("chains %v, want the star's Standard and Express chains", chains)
	}
	absorbH := &absorb.Handler{Absorber: &absorb.Absorber{Meta: meta, Sets: sets}, Chains: chains}
	streamTails := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, n := range names {
			m[ids[n]] = uint64(len(led.get(n)))
		}
		return m
	}
	if n := drainReleases(ctx, t, d, absorbH, meta, streamTails()); n == 0 {
		t.Fatal("the star published no release events")
	}
	for _, n := range names {
		checkStream(ctx, t, c, "after absorb", n, led.get(n))
	}

	scheduled := []byte(`{"detail-type":"Scheduled Event","source":"aws.events"}`)
	settleH := &settle.Handler{Settler: &settle.Settler{Meta: meta, Sets: sets, Settled: d.open(d.settled)}, Chains: chains}
	if _, err := settleH.Handle(ctx, scheduled); err != nil {
		t.Fatalf("settle: %v", err)
	}
	for _, ch := range chains {
		head, err := meta.GetHead(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if head.Settled != head.Checkpoint || head.Checkpoint == (metastore.Cursor{}) {
			t.Fatalf("%s: settled %v, checkpoint %v", ch, head.Settled, head.Checkpoint)
		}
	}
	for _, n := range names {
		refs, err := meta.QueryRefs(ctx, ids[n], 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			for _, l := range r.Locations {
				if !l.Settled {
					t.Fatalf("%s: ref %d-%d still points at transit %s after settle", n, r.FirstSeq, r.LastSeq, l.Key)
				}
			}
		}
		checkStream(ctx, t, c, "after settle", n, led.get(n))
	}

	trimH := &trim.Handler{Trimmer: &trim.Trimmer{Meta: meta, Sets: sets, Settled: d.open(d.settled), Clock: clock.Real{}}, Chains: chains}
	if _, err := trimH.Handle(ctx, scheduled); err != nil {
		t.Fatalf("trim: %v", err)
	}
	for _, ch := range chains {
		head, err := meta.GetHead(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if head.Trimmed != head.Settled {
			t.Fatalf("%s: trimmed %v, settled %v", ch, head.Trimmed, head.Settled)
		}
		set, err := sets.For(ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range set.Buckets {
			keys, err := b.List(ctx, "chains/"+starID+"/")
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if _, e, sl, ok := chain.ParseSlotKey(k); ok && (metastore.Cursor{Epoch: e, Slot: sl}).Less(head.Trimmed) {
					t.Fatalf("%s: slot %s below the trimmed cursor %v survived trim", ch, k, head.Trimmed)
				}
			}
		}
	}
	for _, n := range names {
		checkStream(ctx, t, c, "after trim", n, led.get(n))
	}

	epochs := map[metastore.ChainID]uint64{}
	for _, ch := range chains {
		head, err := meta.GetHead(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		epochs[ch] = head.Epoch
	}

	// SIGKILL in the middle of appends on both classes.
	type inflight struct {
		name   string
		bodies []string // the batch whose append did not return an ack
	}
	var wg sync.WaitGroup
	lost := make(chan inflight, 2)
	acked := make(chan int, 64)
	for _, n := range []string{"it/std-0", "it/exp-1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				bodies := []string{fmt.Sprintf("%s/kill/%d/0", n, k), fmt.Sprintf("%s/kill/%d/1", n, k)}
				actx, acancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Append(actx, n, batch(bodies), client.AppendOptions{})
				acancel()
				if err != nil {
					lost <- inflight{n, bodies}
					return
				}
				led.add(n, bodies...)
				acked <- 1
			}
		}()
	}
	for got := 0; got < 16; {
		select {
		case <-acked:
			got++
		case l := <-lost:
			t.Fatalf("append to %s failed before the kill", l.name)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d appends acked in 10 s before the kill", got)
		}
	}
	p.kill()
	wg.Wait()
	close(lost)
	maybe := map[string][]string{}
	for l := range lost {
		maybe[l.name] = l.bodies
	}
	t.Logf("killed the star with one append in flight on each of %d streams", len(maybe))

	p = startStar(ctx, t, bin, d, addr, admin, 2)
	// The takeover fenced the killed epoch and minted the next one.
	for _, ch := range chains {
		head, err := meta.GetHead(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		if head.Epoch <= epochs[ch] {
			t.Fatalf("%s: epoch %d after the restart, %d before: no new epoch", ch, head.Epoch, epochs[ch])
		}
	}
	// Every acked record is still there; an unacked batch is either whole
	// or absent; appends continue at the recovered tail.
	for _, n := range names {
		want := led.get(n)
		recs, tail := readAll(ctx, t, c, n)
		if extra := maybe[n]; tail == uint64(len(want)+len(extra)) && extra != nil {
			t.Logf("%s: the unacked batch at the kill committed", n)
			want = append(want, extra...)
			led.add(n, extra...)
		}
		if tail != uint64(len(want)) || len(recs) != len(want) {
			t.Fatalf("after restart: %s has tail %d (%d records), want %d acked (+%d unacked)", n, tail, len(recs), len(led.get(n)), len(maybe[n]))
		}
		checkStream(ctx, t, c, "after restart", n, want)
		ct, err := c.CheckTail(ctx, n)
		if err != nil || ct.NextSeq != tail {
			t.Fatalf("after restart: %s CheckTail %v, %v; reads say %d", n, ct, err, tail)
		}
		ack, err := c.Append(ctx, n, batch([]string{n + "/after/0"}), client.AppendOptions{MatchSeq: &tail})
		if err != nil {
			t.Fatalf("after restart: append to %s at %d: %v", n, tail, err)
		}
		if ack.StartSeq != tail {
			t.Fatalf("after restart: %s appended at %d, tail was %d", n, ack.StartSeq, tail)
		}
		led.add(n, n+"/after/0")
		checkStream(ctx, t, c, "after restart and append", n, led.get(n))
	}
	// The new epoch publishes releases too; the absorb takes everything.
	drainReleases(ctx, t, d, absorbH, meta, streamTails())
	for _, n := range names {
		checkStream(ctx, t, c, "after the second absorb", n, led.get(n))
	}
	p.kill()
	if el := time.Since(begin); el > 60*time.Second {
		t.Logf("warning: the run took %v (target: under 60 s)", el.Round(time.Second))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test ran out of time")
	}
}
