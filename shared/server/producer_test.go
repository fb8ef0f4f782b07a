package server

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
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
