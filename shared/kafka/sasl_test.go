package kafka_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/node"
)

func issue(t *testing.T, s *stores, prefix string, ops ...auth.Op) string {
	t.Helper()
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Issue(context.Background(), s.meta, tok, prefix, ops); err != nil {
		t.Fatal(err)
	}
	return tok
}

func saslClient(t *testing.T, addr, token string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{kgo.SASL(plain.Auth{User: "me", Pass: token}.AsMechanism()),
		kgo.RequestRetries(1), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
}

// TestSASLTokens: with authentication on and loopback not trusted, a
// client needs SASL/PLAIN with a strand token; the token's prefix and
// operations are the topic permissions; a bad token fails
// authentication; no SASL, no service.
func TestSASLTokens(t *testing.T) {
	s := newStores()
	n := s.start(t, false, func(kc *node.KafkaConfig) { kc.AnonymousLoopback = false })
	t.Cleanup(n.Close)
	addr := n.KafkaAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	admin := saslClient(t, addr, issue(t, s, "", auth.Admin))
	for _, topic := range []string{"team-a.orders", "team-b.orders"} {
		if r, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("admin creates %s: %v %v", topic, err, r.Err)
		}
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "team-a.orders", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reader := saslClient(t, addr, issue(t, s, "team-a.", auth.Read), kgo.DisableIdempotentWrite())
	err := reader.ProduceSync(ctx, &kgo.Record{Topic: "team-a.orders", Value: []byte("y")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("a read token produced: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	got := consume(t, addr, "team-a.orders", 1, kgo.SASL(plain.Auth{User: "me", Pass: issue(t, s, "team-a.", auth.Read)}.AsMechanism()))
	if string(got[0].Value) != "x" {
		t.Errorf("the read token read %q", got[0].Value)
	}
	// Groups: the token's prefix covers the groups it may use.
	readTok := issue(t, s, "team-a.", auth.Read)
	grouped := consume(t, addr, "team-a.orders", 1, kgo.SASL(plain.Auth{User: "me", Pass: readTok}.AsMechanism()), kgo.ConsumerGroup("team-a.readers"))
	if string(grouped[0].Value) != "x" {
		t.Errorf("the group team-a.readers read %q", grouped[0].Value)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "team-b.readers"
	if resp, err := of.RequestWith(ctx, reader); err != nil || resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("the team-a token fetching team-b.readers' offsets: %v %+v, want GROUP_AUTHORIZATION_FAILED", err, resp)
	}
	// An admin made a team-b group; the team-a token lists its own only.
	var offs kadm.Offsets
	offs.AddOffset("team-b.orders", 0, 0, -1)
	if _, err := kadm.NewClient(admin).CommitOffsets(ctx, "team-b.readers", offs); err != nil {
		t.Fatal(err)
	}
	lg, err := kadm.NewClient(saslClient(t, addr, readTok)).ListGroups(ctx)
	if _, ok := lg["team-a.readers"]; err != nil || !ok || len(lg) != 1 {
		t.Errorf("groups the team-a token lists: %v %v, want team-a.readers only", lg.Groups(), err)
	}
	topics, err := kadm.NewClient(reader).ListTopics(ctx)
	if err != nil || !topics.Has("team-a.orders") || topics.Has("team-b.orders") {
		t.Errorf("topics the team-a token sees: %v %v", topics.Names(), err)
	}

	bad := saslClient(t, addr, "strand_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	if _, err := kadm.NewClient(bad).ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("an unknown token: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	anon := newClient(t, addr, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if _, err := kadm.NewClient(anon).ListTopics(ctx); err == nil {
		t.Error("a client without SASL listed topics")
	}
}

// TestLoopbackAnonymous: with authentication on and loopback trusted
// (strand dev), a loopback client needs no SASL and acts as an admin.
func TestLoopbackAnonymous(t *testing.T) {
	s := newStores()
	n := s.start(t, false)
	t.Cleanup(n.Close)
	createTopic(t, n.KafkaAddr(), "dev", 1, nil)
	cl := newClient(t, n.KafkaAddr())
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "dev", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("an anonymous loopback produce: %v", err)
	}
}
