package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/kafka"
)

func strandClient(t *testing.T, endpoint string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(endpoint, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fetchAt(t *testing.T, cl *kgo.Client, topic string, p int32, off int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(topic, off, 0, 0, 1<<20)
	req.Topics[0].Partitions[0].Partition = p
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestListOffsetsAndTrim: earliest, latest and by-timestamp offsets;
// after a strand Trim the earliest offset is the trim point, a fetch
// below it or past the end answers OFFSET_OUT_OF_RANGE, and one at it
// reads (the trim's command record takes an offset no fetch returns).
func TestListOffsetsAndTrim(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "logs", 1, nil)
	cl := newClient(t, addr)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "logs", Value: []byte{byte(i)}, Timestamp: t0.Add(time.Duration(i) * time.Second)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	check := func(what string, got kadm.ListedOffsets, err error, want int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		o, ok := got.Lookup("logs", 0)
		if !ok || o.Err != nil || o.Offset != want {
			t.Errorf("%s: %+v, want offset %d", what, o, want)
		}
	}
	got, err := adm.ListStartOffsets(ctx, "logs")
	check("earliest", got, err, 0)
	got, err = adm.ListEndOffsets(ctx, "logs")
	check("latest", got, err, 10)
	got, err = adm.ListOffsetsAfterMilli(ctx, t0.Add(3500*time.Millisecond).UnixMilli(), "logs")
	check("by timestamp", got, err, 4)

	if _, err := strandClient(t, n.Endpoint()).Trim(ctx, "logs/0", 5, client.TrimOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = adm.ListStartOffsets(ctx, "logs")
	check("earliest after the trim", got, err, 5)
	if p := fetchAt(t, cl, "logs", 0, 2); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch below the trim point: error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
	if p := fetchAt(t, cl, "logs", 0, 12); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch past the end (11): error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
	p := fetchAt(t, cl, "logs", 0, 5)
	if p.ErrorCode != 0 || p.HighWatermark != 11 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch at the trim point: error %d, high watermark %d, %d bytes; want 0, 11, records", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}
	// The trim's command record (offset 10) is not served.
	if p := fetchAt(t, cl, "logs", 0, 10); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Errorf("fetch at the trim's command record: error %d, %d bytes of records; want none", p.ErrorCode, len(p.RecordBatches))
	}
	// kgo resets to the start when its offset is out of range.
	read := consume(t, addr, "logs", 5)
	if read[0].Offset != 5 || read[0].Value[0] != 5 || read[4].Offset != 9 {
		t.Errorf("read after the trim from offset %d (value %d) to %d, want 5 (5) to 9", read[0].Offset, read[0].Value[0], read[4].Offset)
	}
}

// TestStreamIsTopic: a stream made through the strand API appears as a
// topic of one partition: its records read with a null key, their
// headers and body; a Kafka produce to it reads back through the strand
// API with the frame header first.
func TestStreamIsTopic(t *testing.T) {
	n, _ := startNode(t)
	ctx := context.Background()
	sc := strandClient(t, n.Endpoint())
	if _, err := sc.CreateStream(ctx, "legacy", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Append(ctx, "legacy", []client.Record{{Headers: []client.Header{{Name: []byte("h"), Value: []byte("v")}}, Body: []byte("from strand")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := n.KafkaAddr()
	cl := newClient(t, addr)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "legacy", Key: []byte("k"), Value: []byte("from kafka")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, addr, "legacy", 2)
	if got[0].Key != nil || string(got[0].Value) != "from strand" || len(got[0].Headers) != 1 || got[0].Headers[0].Key != "h" {
		t.Errorf("strand record read as key %q value %q headers %v", got[0].Key, got[0].Value, got[0].Headers)
	}
	if string(got[1].Key) != "k" || string(got[1].Value) != "from kafka" {
		t.Errorf("kafka record read as key %q value %q", got[1].Key, got[1].Value)
	}
	res, err := sc.Read(ctx, "legacy", client.FromSeq(1), client.Limits{})
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Headers[0].Name) != "\x00" || string(res.Records[0].Body) != "from kafka" {
		t.Errorf("the kafka record through the strand API: %+v %v", res.Records, err)
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, "legacy")
	if err != nil || len(md.Topics["legacy"].Partitions) != 1 {
		t.Errorf("metadata of the stream: %+v %v", md.Topics["legacy"], err)
	}
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil || !topics.Has("legacy") || topics.Has("__strand_kafka") {
		t.Errorf("topics listed: %v %v", topics.Names(), err)
	}
}

// TestTopicAdmin: CreatePartitions grows a topic (the new partition takes
// records), DescribeConfigs shows the mapped configs,
// IncrementalAlterConfigs sets retention on every partition's stream,
// an unmapped config is refused, and DeleteTopics removes the streams.
func TestTopicAdmin(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	ctx := context.Background()
	ret := "3600000"
	lat := "LogAppendTime"
	createTopic(t, addr, "cfg", 2, map[string]*string{"retention.ms": &ret, "message.timestamp.type": &lat})
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreatePartitions(ctx, 1, "cfg"); err != nil {
		t.Fatal(err)
	}
	old := time.UnixMilli(1_000_000_000_000)
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "cfg", Partition: 2, Value: []byte("p2"), Timestamp: old})
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce to the new partition: %v", err)
	}
	// LogAppendTime: the produce answers the log's time, and a fetch
	// serves it, not the producer's.
	raw := produceRaw(t, cl, "cfg", kafka.RawBatch(0, 3, kafka.EncodeRecords(kafka.SampleRecords()), -1, -1))
	if raw.ErrorCode != 0 || raw.LogAppendTime < time.Now().Add(-time.Minute).UnixMilli() {
		t.Errorf("LogAppendTime topic: the produce answered error %d, log append time %d; want the log's time (now)", raw.ErrorCode, raw.LogAppendTime)
	}
	p := fetchAt(t, cl, "cfg", 2, 0)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(p.RecordBatches); err != nil || rb.Attributes&0x08 == 0 || rb.FirstTimestamp < time.Now().Add(-time.Minute).UnixMilli() {
		t.Errorf("LogAppendTime topic: fetched batch attributes %#x, first timestamp %d (%v); want the LogAppendTime bit and the log's time", rb.Attributes, rb.FirstTimestamp, err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"}
	for _, c := range rc[0].Configs {
		if w, ok := want[c.Key]; ok && c.MaybeValue() == w {
			delete(want, c.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("configs not described: %v (got %+v)", want, rc[0].Configs)
	}
	// CreateTopics answers the configs it created the topic with (the
	// Java admin client refuses a null list).
	cr, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &ret}, "cfg-answer")
	if c, ok := cr.Configs["retention.ms"]; err != nil || cr.Err != nil || !ok || c.MaybeValue() != ret {
		t.Errorf("CreateTopics answered configs %+v (%v %v), want retention.ms=%s", cr.Configs, err, cr.Err, ret)
	}
	v := "1000"
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter retention: %v %+v", err, ar)
	}
	sc := strandClient(t, n.Endpoint())
	for _, s := range []string{"cfg/0", "cfg/1", "cfg/2"} {
		st, err := sc.GetStream(ctx, s)
		if err != nil || st.RetentionMs != 1000 {
			t.Errorf("stream %s after the alter: %+v %v, want retention 1000", s, st, err)
		}
	}
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &v}}, "cfg")
	if err == nil && (len(ar) == 0 || ar[0].Err == nil) {
		t.Errorf("cleanup.policy accepted: %+v", ar)
	}
	if _, err := adm.DeleteTopics(ctx, "cfg"); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.GetStream(ctx, "cfg/1"); err == nil {
		t.Error("cfg/1 still exists after DeleteTopics")
	}
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, set []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = set
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestTransactionsRefused: a transactional producer is refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (at FindCoordinator, which kgo
// asks first, or at InitProducerId), and nothing is written.
func TestTransactionsRefused(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "tx", 1, nil)
	cl := newClient(t, addr)
	req := kmsg.NewPtrInitProducerIDRequest()
	id := "tx"
	req.TransactionalID = &id
	resp, err := req.RequestWith(context.Background(), cl)
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) && (err != nil || resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code) {
		t.Errorf("InitProducerId with a transactional id: %v %+v", err, resp)
	}
	txn := newClient(t, addr, kgo.TransactionalID("tx-1"))
	if err := txn.BeginTransaction(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("x")}).FirstErr(); err == nil {
			t.Error("a transactional produce succeeded")
		}
	}
	got, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "tx")
	if o, _ := got.Lookup("tx", 0); err != nil || o.Offset != 0 {
		t.Errorf("the topic's end after the refused transaction: %+v %v, want 0", o, err)
	}
}
