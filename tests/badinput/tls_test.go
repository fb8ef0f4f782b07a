package badinput

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/sim"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool trusting it.
func selfSigned(t *testing.T) (certPath, keyPath string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strand test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// TestTLS: a star process (shared/node) started with a certificate serves
// the API over TLS with bearer tokens; the Go client appends, reads and
// runs an append session over it (HTTP/2); plain HTTP to that port is not
// served, and a client that does not trust the certificate is refused.
func TestTLS(t *testing.T) {
	w, err := sim.NewWorld(3, sim.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, pool := selfSigned(t)
	ctx := context.Background()
	tok, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Issue(ctx, w.Meta, tok, "", []auth.Op{auth.Admin}); err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(ctx, node.Config{Star: w.StarConfig(), Meta: w.Meta, Settled: w.SettledMem, Addr: "127.0.0.1:0",
		TLSCert: certPath, TLSKey: keyPath, Logger: w.Log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !strings.HasPrefix(n.Endpoint(), "https://") {
		t.Fatalf("endpoint %s is not https", n.Endpoint())
	}
	var p http.Protocols
	p.SetHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: &p, ForceAttemptHTTP2: true}}
	c, err := client.New(n.Endpoint(), client.WithToken(tok), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "tls", client.CreateOptions{Class: "express"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Append(ctx, "tls", []client.Record{{Body: []byte("over tls")}}, client.AppendOptions{})
	if err != nil || a.StartSeq != 0 {
		t.Fatal(a, err)
	}
	sess, err := c.OpenAppendSession(ctx, "tls")
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Submit([]client.Record{{Body: []byte("session")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if ack := <-sess.Acks(); ack.Err != nil || ack.StartSeq != 1 {
		t.Fatalf("session ack %+v", ack)
	}
	sess.Close()
	res, err := c.Read(ctx, "tls", client.FromSeq(0), client.Limits{})
	if err != nil || len(res.Records) != 2 || string(res.Records[0].Body) != "over tls" {
		t.Fatal(res, err)
	}
	// Without a token: refused over TLS too.
	anon, _ := client.New(n.Endpoint(), client.WithHTTPClient(hc))
	if _, err := anon.CheckTail(ctx, "tls"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("no token over TLS: %v", err)
	}
	// Plain HTTP to the TLS port: no answer from the API.
	plain, _ := client.New(strings.Replace(n.Endpoint(), "https://", "http://", 1), client.WithToken(tok))
	if _, err := plain.CheckTail(ctx, "tls"); err == nil {
		t.Fatal("the TLS port answered plain HTTP")
	}
	// A client that does not trust the certificate.
	untrusted, _ := client.New(n.Endpoint(), client.WithToken(tok))
	_, err = untrusted.CheckTail(ctx, "tls")
	var uerr x509.UnknownAuthorityError
	if err == nil || !(errors.As(err, &uerr) || strings.Contains(err.Error(), "certificate")) {
		t.Fatalf("an untrusting client: %v", err)
	}
}

// TestBadStoredObjects: slot copies in one zone with an unknown format
// version, a footer length field pointing past the object, and a record
// length field that overruns its segment. Each is refused by the decoder
// with its own error, classified as junk (a missing copy), and never served:
// reads fall through to a good copy.
func TestBadStoredObjects(t *testing.T) {
	w, err := sim.NewWorld(4, sim.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := w.StartNode(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	want := map[uint64]string{}
	for i := range 9 {
		body := []byte(strings.Repeat("r", 10) + string(rune('a'+i)))
		a, err := n.Star.Append(ctx, w.IDs[0], []format.Record{{Body: body}}, star.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[a.FirstSeq] = string(body)
	}
	if err := w.Absorber().AbsorbTo(ctx, sim.Chain, n.Star.Released(sim.Chain)); err != nil {
		t.Fatal(err)
	}
	rel := n.Star.Released(sim.Chain)
	damage := []struct {
		name string
		fn   func(b []byte)
		want error
	}{
		{"unknown format version", func(b []byte) {
			binary.BigEndian.PutUint16(b[4:6], 9) // 1 and 2 are known (2: flights with a batch table)
			binary.BigEndian.PutUint32(b[56:60], format.CRC(b[0:56]))
		}, format.ErrVersion},
		{"footer length past the object", func(b []byte) {
			binary.BigEndian.PutUint32(b[52:56], binary.BigEndian.Uint32(b[52:56])+1000)
			binary.BigEndian.PutUint32(b[56:60], format.CRC(b[0:56]))
		}, format.ErrBounds},
		{"record length overruns its segment", func(b []byte) {
			binary.BigEndian.PutUint32(b[format.EnvelopeSize+32:], 1<<30) // first record's length field
		}, format.ErrCRC},
	}
	set := w.RawSet()
	for slot := range rel.Slot {
		key := format.SlotKey(sim.StarID, rel.Epoch, slot)
		d := damage[int(slot)%len(damage)]
		body, err := w.Mems[0].Get(ctx, key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		d.fn(body)
		if _, err := format.ParseFlight(body); !errors.Is(err, d.want) {
			t.Fatalf("%s: ParseFlight = %v, want %v", d.name, err, d.want)
		}
		if err := w.Mems[0].Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := w.Mems[0].PutIfAbsent(ctx, key, body); err != nil {
			t.Fatal(err)
		}
		if d.want != format.ErrCRC { // the envelope itself is bad
			c, err := set.ReadEnvelope(ctx, 0, key)
			if err != nil || c.State != chain.Junk {
				t.Fatalf("%s: classified %v (%v), want junk", d.name, c.State, err)
			}
		}
	}
	// Zone 0 is read first: every read must fall through to a good copy.
	r := w.Reader(n.Star, false)
	recs, _, err := sim.ReadAll(ctx, r, w.Streams[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("read %d records, want %d", len(recs), len(want))
	}
	for _, rec := range recs {
		if want[rec.Seq] != string(rec.Body) {
			t.Fatalf("seq %d served %q, want %q", rec.Seq, rec.Body, want[rec.Seq])
		}
	}
	// Settle builds its objects from good copies too.
	if _, err := w.Settler().Run(ctx, sim.Chain); err != nil {
		t.Fatalf("settle over bad copies: %v", err)
	}
	recs, _, err = sim.ReadAll(ctx, r, w.Streams[0])
	if err != nil || len(recs) != len(want) {
		t.Fatalf("after settle: %d records, %v", len(recs), err)
	}
	for _, rec := range recs {
		if want[rec.Seq] != string(rec.Body) {
			t.Fatalf("after settle seq %d served %q", rec.Seq, rec.Body)
		}
	}
}
