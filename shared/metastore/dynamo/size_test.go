package dynamo

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/strandlog/strand/shared/metastore"
)

// The metastore's size estimates, which the memory and bolt stores enforce,
// are never below what DynamoDB counts for the items this package writes:
// a write the fakes accept is one DynamoDB accepts.
func TestSizeEstimatesBoundItems(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := func() uint64 { return rng.Uint64() }
	for i := range 300 {
		r := metastore.Ref{StreamID: fmt.Sprintf("%032x", rng.Uint64()), FirstSeq: big(), LastSeq: big(),
			FirstTsMs: rng.Int64(), LastTsMs: -rng.Int64(), Bytes: math.MaxInt64}
		for j := range 1 + rng.IntN(40) {
			r.Locations = append(r.Locations, metastore.Location{Settled: j%2 == 0, Key: strings.Repeat("k", rng.IntN(300)),
				Offset: rng.Int64(), Length: math.MaxInt64, FirstSeq: big()})
		}
		if got, est := itemSize(refAttrs(r)), metastore.RefSize(r); got > est {
			t.Fatalf("ref %d: DynamoDB size %d over the estimate %d", i, got, est)
		}
		c := metastore.ChainID{Star: strings.Repeat("s", 1+rng.IntN(metastore.MaxStarLen)), Class: metastore.Express}
		e := metastore.Epoch{Epoch: big(), State: metastore.EpochFenced, K: 1 + rng.IntN(50), W: 1, Window: math.MaxInt32, Cut: big()}
		for range e.K {
			e.Buckets = append(e.Buckets, strings.Repeat("b", 1+rng.IntN(63)))
		}
		if got, est := itemSize(epochAttrs(c, e)), metastore.EpochSize(c, e); got > est {
			t.Fatalf("epoch %d: DynamoDB size %d over the estimate %d", i, got, est)
		}
		tk := metastore.Token{Hash: strings.Repeat("a", 64), Prefix: strings.Repeat("p", rng.IntN(512)),
			Description: strings.Repeat("d", rng.IntN(256)), Ops: make([]string, rng.IntN(20))}
		for j := range tk.Ops {
			tk.Ops[j] = strings.Repeat("o", 1+rng.IntN(30))
		}
		for _, m := range []map[string]types.AttributeValue{tokenAttrs(metastore.TokenPK(tk.Hash), metastore.MetaSK, tk), tokenAttrs(TokenListPK, tk.Hash, tk)} {
			if got, est := itemSize(m), metastore.TokenSize(tk); got > est {
				t.Fatalf("token %d: DynamoDB size %d over the estimate %d", i, got, est)
			}
		}
	}
}

func TestNumberSize(t *testing.T) {
	for _, tc := range []struct {
		n    string
		want int
	}{{"0", 1}, {"7", 2}, {"10", 2}, {"12", 2}, {"123", 3}, {"-1234", 3}, {"18446744073709551615", 11}} {
		if got := numberSize(tc.n); got != tc.want {
			t.Errorf("numberSize(%s) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// DynamoDB's own size refusals map to the same ErrTooLarge the adapter's
// checks return; other validation errors stay ErrInvalid.
func TestTranslateSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want error
	}{
		{"Item size has exceeded the maximum allowed size", metastore.ErrTooLarge},
		{"Transaction request cannot exceed the aggregate size limit of 4 MB", metastore.ErrTooLarge},
		{"One or more parameter values were invalid: Missing the key PK", metastore.ErrInvalid},
	} {
		err := translate(&smithy.GenericAPIError{Code: "ValidationException", Message: tc.msg})
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: %v, want %v", tc.msg, err, tc.want)
		}
	}
	items := make([]types.TransactWriteItem, metastore.MaxTxItems+1)
	if err := checkTx(items); !errors.Is(err, metastore.ErrTooLarge) {
		t.Errorf("101 actions: %v", err)
	}
	huge := map[string]types.AttributeValue{"PK": s("p"), "SK": s("s"), "X": s(strings.Repeat("x", metastore.MaxItemBytes))}
	if err := checkTx([]types.TransactWriteItem{{Put: &types.Put{Item: huge}}}); !errors.Is(err, metastore.ErrTooLarge) {
		t.Errorf("item over 400 KB: %v", err)
	}
}
