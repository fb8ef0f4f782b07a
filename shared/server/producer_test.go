package server

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/star"
)

func FuzzParseAppendProducer(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), uint64(3), true)
	f.Add([]byte{}, uint64(0), true)
	f.Add(make([]byte, 16), uint64(1), true)
	f.Add([]byte("short"), uint64(1), false)
	f.Fuzz(func(t *testing.T, id []byte, seq uint64, withSeq bool) {
		m := &strandv1.AppendRequest{Stream: "s", Records: []*strandv1.AppendRecord{{Body: []byte("x")}}, ProducerId: id}
		if withSeq {
			m.BatchSeq = &seq
		}
		a, err := ParseAppend(m)
		if err != nil {
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("refusal %v is not invalid_argument", err)
			}
			return
		}
		if len(id) == 0 {
			if !a.Producer.IsZero() || withSeq {
				t.Fatalf("no producer id accepted as %+v (batch_seq given: %v)", a, withSeq)
			}
			return
		}
		if len(id) != 16 || a.Producer.IsZero() || string(a.Producer[:]) != string(id) || !withSeq || a.BatchSeq != seq {
			t.Fatalf("accepted producer %x seq %d from %x/%d/%v", a.Producer, a.BatchSeq, id, seq, withSeq)
		}
		if o := a.options(); o.Producer != a.Producer || o.BatchSeq != seq {
			t.Fatalf("options %+v", o)
		}
	})
}

func TestProducerErrorsAreFailedPrecondition(t *testing.T) {
	for _, err := range []error{star.ErrBatchSeqGap, star.ErrBatchSeqTooOld} {
		if c := connect.CodeOf(toConnect(errors.Join(errors.New("stream x"), err))); c != connect.CodeFailedPrecondition {
			t.Errorf("%v maps to %v", err, c)
		}
	}
}

// TestAppendTenantIsTheToken: with authentication, an append's tenant (whose
// fair share of the star's pool it uses) is its token's tenant (its root's
// hash; TestPoolShareIsTenant), and its other options are kept; without
// authentication every caller is one tenant.
func TestAppendTenantIsTheToken(t *testing.T) {
	seq := uint64(4)
	a := AppendArgs{MatchSeq: &seq, Producer: [16]byte{1}, BatchSeq: 7}
	authed := &Server{cfg: Config{Auth: &auth.Checker{}}}
	for _, hash := range []string{"aa11", "bb22"} {
		o := authed.appendOptions(auth.WithGrant(context.Background(), auth.Grant{Hash: hash, Tenant: hash}), a)
		if o.Tenant != hash || o.MatchSeq != &seq || o.Producer != ScopeProducer(hash, a.Producer) || o.BatchSeq != 7 {
			t.Fatalf("options %+v for token %s", o, hash)
		}
	}
	if o := (&Server{}).appendOptions(context.Background(), a); o.Tenant != "" {
		t.Fatalf("without authentication the tenant is %q", o.Tenant)
	}
}

// TestScopeProducer: scoped ids differ between tokens and between ids, are
// the same for the same pair (a successor star recovers them), never zero,
// and without authentication are the client's own.
func TestScopeProducer(t *testing.T) {
	id, other := format.ProducerID{1}, format.ProducerID{2}
	a, b := auth.Hash("a"), auth.Hash("b")
	if ScopeProducer(a, id) == ScopeProducer(b, id) || ScopeProducer(a, id) == ScopeProducer(a, other) {
		t.Error("two principals or two ids share a scoped producer id")
	}
	if ScopeProducer(a, id) != ScopeProducer(a, id) || ScopeProducer(a, id).IsZero() {
		t.Error("the scoped id is not a pure non-zero function of token and id")
	}
	if ScopeProducer("", id) != id {
		t.Error("without authentication the id changed")
	}
}
