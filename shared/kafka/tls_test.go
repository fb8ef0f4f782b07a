package kafka_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/star"
)

// testCert writes net/http/httptest's certificate for 127.0.0.1 and its
// key to files and returns their paths and a pool trusting it.
func testCert(t *testing.T) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	c := ts.TLS.Certificates[0]
	kb, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return certPath, keyPath, pool
}

// TestKafkaTLS: a star started with a certificate serves Kafka over TLS
// with it (SASL_SSL): a client trusting it produces and reads back with a
// token; a plaintext client gets nothing.
func TestKafkaTLS(t *testing.T) {
	s := newStores()
	certPath, keyPath, pool := testCert(t)
	cfg := star.Defaults()
	cfg.Express.Buckets, cfg.Standard.Buckets = s.exp, s.std
	cfg.Standard.FlushDeadline = time.Millisecond
	n, err := node.Start(context.Background(), node.Config{Star: cfg, Meta: s.meta, Settled: s.settled, Addr: "127.0.0.1:0",
		TLSCert: certPath, TLSKey: keyPath, Kafka: node.KafkaConfig{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	tok := issue(t, s, "", auth.Admin)
	opts := []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(plain.Auth{User: "me", Pass: tok}.AsMechanism())}
	createTopic(t, n.KafkaAddr(), "secure", 1, nil, opts...)
	cl := newClient(t, n.KafkaAddr(), opts...)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "secure", Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, n.KafkaAddr(), "secure", 1, opts...); string(got[0].Value) != "over tls" {
		t.Errorf("read %q", got[0].Value)
	}
	plainClient := newClient(t, n.KafkaAddr(), kgo.SASL(plain.Auth{User: "me", Pass: tok}.AsMechanism()), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(plainClient).ListTopics(ctx); err == nil {
		t.Error("a plaintext client was served by the TLS listener")
	}
}
