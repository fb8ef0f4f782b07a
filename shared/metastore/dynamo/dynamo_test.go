package dynamo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metastoretest"
)

func TestMain(m *testing.M) { emulator.Main(m) }

func clientFor(endpoint string, maxAttempts int) *dynamodb.Client {
	return dynamodb.NewFromConfig(emulator.ConfigFor(endpoint), func(o *dynamodb.Options) {
		if maxAttempts > 0 {
			o.RetryMaxAttempts = maxAttempts
		}
	})
}

// newTable creates a fresh table on the emulator, deleted when the test ends.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	c := clientFor(emulator.DynamoDBEndpoint(t), 0)
	table := emulator.Name(t, "dynamo")
	if err := CreateTable(context.Background(), c, table); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		if _, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("cleanup: delete table %s: %v", table, err)
		}
	})
	return c, table
}

func newStore(t *testing.T) *Store {
	c, table := newTable(t)
	return New(c, table)
}

func TestConformance(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) metastore.Store { return newStore(t) })
}

func TestCreateTableIdempotentAndChecksSchema(t *testing.T) {
	c, table := newTable(t)
	ctx := context.Background()
	if err := CreateTable(ctx, c, table); err != nil {
		t.Fatalf("CreateTable on an existing table: %v", err)
	}
	other := emulator.Name(t, "wrongschema")
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("create table with another schema: %v", err)
	}
	defer c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	if err := CreateTable(ctx, c, other); !errors.Is(err, ErrNotMetastore) {
		t.Fatalf("CreateTable over a table with another key schema: %v, want %v", err, ErrNotMetastore)
	}
	// Open (the SDK's default credentials, here the environment's) finds
	// the metastore, refuses the other table and a missing one, and
	// reports the region it looked in.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	endpoint := emulator.DynamoDBEndpoint(t)
	if _, err := Open(ctx, Where{Table: table, Region: emulator.Region, Endpoint: endpoint}); err != nil {
		t.Fatalf("Open a metastore table: %v", err)
	}
	if _, err := Open(ctx, Where{Table: other, Region: emulator.Region, Endpoint: endpoint}); !errors.Is(err, ErrNotMetastore) || !strings.Contains(err.Error(), "key id (HASH)") {
		t.Fatalf("Open a table with key id: %v, want %v naming the key", err, ErrNotMetastore)
	}
	if _, err := Open(ctx, Where{Table: emulator.Name(t, "missing"), Region: emulator.Region, Endpoint: endpoint}); !errors.Is(err, ErrNoTable) || !strings.Contains(err.Error(), "region "+emulator.Region) {
		t.Fatalf("Open a missing table: %v, want %v naming the region", err, ErrNoTable)
	}
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	if _, err := Open(ctx, Where{Table: table, Endpoint: endpoint}); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("Open with no region anywhere: %v, want %v", err, ErrNoRegion)
	}
}

func sid(n int) string { return fmt.Sprintf("%032x", n) }

var chain = metastore.ChainID{Star: "star-0", Class: metastore.Express}

func ref(id string, first, last uint64) metastore.Ref {
	return metastore.Ref{StreamID: id, FirstSeq: first, LastSeq: last, FirstTsMs: 1, LastTsMs: 2, Bytes: 10,
		Locations: []metastore.Location{{Key: "chains/star-0/1/1", Offset: 60, Length: 10}}}
}

func epoch(n uint64) metastore.Epoch {
	return metastore.Epoch{Epoch: n, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 4}
}

func rawItem(t *testing.T, c *dynamodb.Client, table, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem %s/%s: %v", pk, sk, err)
	}
	return out.Item
}

// The items sit at exactly the keys of the layout in package metastore, plus
// the listing item, which lives and dies with its stream.
func TestItemLayout(t *testing.T) {
	c, table := newTable(t)
	st := New(c, table)
	ctx := context.Background()
	s := metastore.Stream{Name: "app/orders", ID: sid(7), Class: metastore.Standard, Star: "star-0", CreatedMs: 5, State: metastore.StreamActive}
	if _, err := st.CreateStream(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := st.MintEpoch(ctx, chain, 0, epoch(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 3}, metastore.Cursor{Epoch: 3, Slot: 9}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRefs(ctx, chain, metastore.Cursor{Epoch: 3, Slot: 9}, []metastore.Ref{ref(sid(7), 42, 50)}); err != nil {
		t.Fatal(err)
	}
	tok := metastore.Token{Hash: fmt.Sprintf("%064x", 1), Ops: []string{"read"}}
	if err := st.PutToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{
		{"STREAM#app/orders", "META"},
		{ListPK, "app/orders"},
		{"SID#" + sid(7), "REF#00000000000000000042"},
		{"CHAIN#star-0#express", "HEAD"},
		{"CHAIN#star-0#express", "EPOCH#00000000000000000003"},
		{"TOKEN#" + tok.Hash, "META"},
		{TokenListPK, tok.Hash},
	} {
		if rawItem(t, c, table, k[0], k[1]) == nil {
			t.Errorf("no item at %s / %s", k[0], k[1])
		}
	}
	h := rawItem(t, c, table, "CHAIN#star-0#express", "HEAD")
	if v := h["AbsorbingSlot"].(*types.AttributeValueMemberN).Value; v != "9" {
		t.Errorf("HEAD AbsorbingSlot = %s, want 9", v)
	}
	if err := st.DeleteStream(ctx, s.Name, s.ID); err != nil {
		t.Fatal(err)
	}
	if rawItem(t, c, table, ListPK, "app/orders") != nil {
		t.Errorf("listing item survived DeleteStream")
	}
	if err := st.DeleteToken(ctx, tok.Hash); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{{"TOKEN#" + tok.Hash, "META"}, {TokenListPK, tok.Hash}} {
		if rawItem(t, c, table, k[0], k[1]) != nil {
			t.Errorf("item %s / %s survived DeleteToken", k[0], k[1])
		}
	}
}

// More than one transaction's worth of refs lands whole under the lease.
func TestPutRefsManyTransactions(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	if err := st.MintEpoch(ctx, chain, 0, epoch(1)); err != nil {
		t.Fatal(err)
	}
	pass := metastore.Cursor{Epoch: 1, Slot: 5}
	if _, err := st.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 1}, pass); err != nil {
		t.Fatal(err)
	}
	var refs []metastore.Ref
	for i := range uint64(2*metastore.MaxPutRefsPerTx + 7) {
		refs = append(refs, ref(sid(1), i*2, i*2+1))
	}
	if err := st.PutRefs(ctx, chain, pass, refs); err != nil {
		t.Fatalf("PutRefs of %d refs: %v", len(refs), err)
	}
	got, err := st.QueryRefs(ctx, sid(1), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(refs) || !metastore.EqualRef(got[len(got)-1], refs[len(refs)-1]) {
		t.Fatalf("QueryRefs: %d refs, want %d", len(got), len(refs))
	}
	stale := metastore.Cursor{Epoch: 1, Slot: 4}
	if err := st.PutRefs(ctx, chain, stale, refs[:1]); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("PutRefs under another pass: %v, want ErrConflict", err)
	}
}

// ddbProxy sits between the client and the emulator and answers chosen
// requests itself.
type ddbProxy struct {
	srv    *httptest.Server
	target string
	calls  atomic.Int64
	answer func(target string, n int) (status int, body string) // status 0: forward
	// lose, when set, is asked after a forwarded request is answered:
	// true replaces the answer with a 500 (the write landed, its answer
	// is lost, and the SDK retries it).
	lose func(target string, n int) bool
}

func newDDBProxy(t *testing.T, answer func(target string, n int) (int, string)) *ddbProxy {
	p := &ddbProxy{target: emulator.DynamoDBEndpoint(t), answer: answer}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target") // DynamoDB_20120810.<Operation>
		op = op[strings.LastIndex(op, ".")+1:]
		n := int(p.calls.Add(1))
		if status, body := p.answer(op, n); status != 0 {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(status)
			io.WriteString(w, body)
			return
		}
		body, _ := io.ReadAll(r.Body)
		out, _ := http.NewRequest(r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if p.lose != nil && p.lose(op, n) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, ddbError("InternalServerError"))
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func ddbError(code string) string {
	return fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"injected"}`, code)
}

const txConflict = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled","CancellationReasons":[{"Code":"TransactionConflict","Message":"conflict"},{"Code":"None"}]}`

// A transaction cancelled by TransactionConflict wrote nothing and is
// retried; one that never clears ends in ErrUnavailable.
func TestTransactionConflictRetried(t *testing.T) {
	_, table := newTable(t)
	var conflicts atomic.Int64 // the proxy's goroutines read it
	conflicts.Store(2)
	p := newDDBProxy(t, func(op string, n int) (int, string) {
		if op == "TransactWriteItems" && conflicts.Add(-1) >= 0 {
			return 400, txConflict
		}
		return 0, ""
	})
	st := New(clientFor(p.srv.URL, 1), table)
	var waits []time.Duration
	st.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	ctx := context.Background()
	if err := st.MintEpoch(ctx, chain, 0, epoch(1)); err != nil {
		t.Fatalf("MintEpoch after 2 conflicts: %v", err)
	}
	if fmt.Sprint(waits) != fmt.Sprint([]time.Duration{TxBackoff, 2 * TxBackoff}) {
		t.Fatalf("waits %v", waits)
	}
	if h, err := st.GetHead(ctx, chain); err != nil || h.Epoch != 1 {
		t.Fatalf("head after mint: %+v, %v", h, err)
	}

	conflicts.Store(1 << 30)
	err := st.AdvanceCursor(ctx, chain, metastore.Trimmed, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 1})
	if !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("AdvanceCursor under endless conflicts: %v, want ErrUnavailable", err)
	}
}

// Throttling and 5xx answers are ErrUnavailable; a missing table is not.
func TestErrorMapping(t *testing.T) {
	_, table := newTable(t)
	type reply struct {
		status int
		body   string
	}
	var next atomic.Pointer[reply] // the proxy's goroutines read it
	next.Store(&reply{})
	p := newDDBProxy(t, func(op string, n int) (int, string) { r := next.Load(); return r.status, r.body })
	st := New(clientFor(p.srv.URL, 1), table)
	ctx := context.Background()
	for _, tc := range []struct {
		status int
		code   string
	}{
		{400, "ProvisionedThroughputExceededException"},
		{400, "RequestLimitExceeded"},
		{400, "ThrottlingException"},
		{500, "InternalServerError"},
		{503, "ServiceUnavailable"},
	} {
		next.Store(&reply{tc.status, ddbError(tc.code)})
		if _, err := st.GetStream(ctx, "s"); !errors.Is(err, metastore.ErrUnavailable) {
			t.Errorf("GetStream under %d %s: %v, want ErrUnavailable", tc.status, tc.code, err)
		}
		err := st.MintEpoch(ctx, chain, 0, epoch(1))
		if !errors.Is(err, metastore.ErrUnavailable) || errors.Is(err, metastore.ErrConflict) {
			t.Errorf("MintEpoch under %d %s: %v, want ErrUnavailable", tc.status, tc.code, err)
		}
	}
	missing := New(clientFor(emulator.DynamoDBEndpoint(t), 1), emulator.Name(t, "missing"))
	_, err := missing.GetStream(ctx, "s")
	if err == nil || errors.Is(err, metastore.ErrNotFound) || errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("GetStream on a missing table: %v, want a plain error", err)
	}
}

// CreateStream against a stream that exists returns it even when the
// service leaves the old item out of the cancellation reason.
func TestCreateStreamExistsWithoutOldItem(t *testing.T) {
	c, table := newTable(t)
	ctx := context.Background()
	a := metastore.Stream{Name: "s", ID: sid(1), Class: metastore.Standard, Star: "star-0", State: metastore.StreamActive}
	if _, err := New(c, table).CreateStream(ctx, a); err != nil {
		t.Fatal(err)
	}
	p := newDDBProxy(t, func(op string, n int) (int, string) {
		if op == "TransactWriteItems" {
			return 400, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"x","CancellationReasons":[{"Code":"ConditionalCheckFailed","Message":"c"},{"Code":"None"}]}`
		}
		return 0, ""
	})
	b := a
	b.ID = sid(2)
	got, err := New(clientFor(p.srv.URL, 1), table).CreateStream(ctx, b)
	if !errors.Is(err, metastore.ErrExists) || got != a {
		t.Fatalf("CreateStream over an existing stream: %+v, %v; want the existing stream and ErrExists", got, err)
	}
}

// Lookups of keys no write accepts are ErrNotFound (or nil) without asking
// DynamoDB, which would refuse an oversized key.
func TestMalformedKeyLookups(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	long := strings.Repeat("x", 3000)
	if _, err := st.GetStream(ctx, long); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("GetStream(3000-byte name): %v", err)
	}
	if _, err := st.GetStream(ctx, "bad\xff"); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("GetStream(invalid UTF-8): %v", err)
	}
	if err := st.DeleteStream(ctx, long, sid(1)); err != nil {
		t.Errorf("DeleteStream(3000-byte name): %v", err)
	}
	if _, err := st.LastRef(ctx, long); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("LastRef(bad id): %v", err)
	}
	if refs, err := st.QueryRefs(ctx, long, 0, 10); err != nil || len(refs) != 0 {
		t.Errorf("QueryRefs(bad id): %v, %v", refs, err)
	}
	if _, err := st.GetHead(ctx, metastore.ChainID{Star: long, Class: metastore.Standard}); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("GetHead(long star): %v", err)
	}
	if _, err := st.GetToken(ctx, long); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("GetToken(bad hash): %v", err)
	}
}

// TestHeadWithoutLaterCursors: a HEAD item stored before a cursor
// existed reads it as 0/0, the cursor moves from 0/0 (then stored), and
// a second move from 0/0 conflicts:
//   - flushed (no FlushedEpoch/FlushedSlot; design 014, level 1);
//   - merged (no MergedEpoch/MergedSlot; level 2);
//   - indexed (no IndexedEpoch/IndexedSlot, nor Flushed: a refs-mode
//     head, "Switching a live chain"), set at the checkpoint itself.
func TestHeadWithoutLaterCursors(t *testing.T) {
	at := func(slot uint64) metastore.Cursor { return metastore.Cursor{Epoch: 3, Slot: slot} }
	for _, tc := range []struct {
		kind       metastore.CursorKind
		remove     string
		zero       func(metastore.Head) bool // what the old head reads as 0/0
		to, second metastore.Cursor
	}{
		{metastore.Flushed, "FlushedEpoch, FlushedSlot", func(h metastore.Head) bool { return h.Flushed.IsZero() && h.Settled == at(0) }, at(0), at(1)},
		{metastore.Merged, "MergedEpoch, MergedSlot", func(h metastore.Head) bool { return h.Merged.IsZero() && h.Flushed == at(0) }, at(4), at(5)},
		{metastore.Indexed, "IndexedEpoch, IndexedSlot, FlushedEpoch, FlushedSlot", func(h metastore.Head) bool {
			return h.Indexed.IsZero() && h.Flushed.IsZero() && h.Checkpoint == at(0)
		}, at(0), at(0)},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			st := oldHead(t, tc.remove)
			ctx := context.Background()
			h, err := st.GetHead(ctx, chain)
			if err != nil || !tc.zero(h) {
				t.Fatalf("head without %s: %+v, %v", tc.kind, h, err)
			}
			if err := st.AdvanceCursor(ctx, chain, tc.kind, metastore.Cursor{}, tc.to); err != nil {
				t.Fatalf("%s from 0/0 on an old head: %v", tc.kind, err)
			}
			if h, err = st.GetHead(ctx, chain); err != nil || h.Cursor(tc.kind) != tc.to {
				t.Fatalf("head after: %+v, %v", h, err)
			}
			if err := st.AdvanceCursor(ctx, chain, tc.kind, metastore.Cursor{}, tc.second); !errors.Is(err, metastore.ErrConflict) {
				t.Fatalf("a second %s from 0/0: %v, want ErrConflict", tc.kind, err)
			}
		})
	}
}

// TestMoveCursorsWithoutLaterCursors: on a head stored before the
// flushed and merged cursors existed (no attributes: they read as 0/0),
// MoveCursors moves them from 0/0 with the settled cursor in one write,
// and a second move from 0/0 fails.
func TestMoveCursorsWithoutLaterCursors(t *testing.T) {
	at := func(slot uint64) metastore.Cursor { return metastore.Cursor{Epoch: 3, Slot: slot} }
	st := oldHead(t, "FlushedEpoch, FlushedSlot, MergedEpoch, MergedSlot")
	ctx := context.Background()
	moves := []metastore.CursorMove{{Kind: metastore.Settled, From: at(0), To: at(4)},
		{Kind: metastore.Flushed, To: at(2)}, {Kind: metastore.Merged, To: at(1)}}
	if err := st.MoveCursors(ctx, chain, moves); err != nil {
		t.Fatalf("moves from 0/0 on an old head: %v", err)
	}
	h, err := st.GetHead(ctx, chain)
	if err != nil || h.Settled != at(4) || h.Flushed != at(2) || h.Merged != at(1) {
		t.Fatalf("head after: %+v, %v", h, err)
	}
	moves[0].From = at(4)
	moves[0].To = at(5)
	if err := st.MoveCursors(ctx, chain, moves); !errors.Is(err, metastore.ErrConflict) {
		t.Fatalf("a second move from 0/0: %v, want ErrConflict", err)
	}
}

// oldHead is a store whose chain's head (epoch 3) lacks the attributes
// named in remove: a head stored by an earlier build.
func oldHead(t *testing.T, remove string) *Store {
	t.Helper()
	c, table := newTable(t)
	st := New(c, table)
	ctx := context.Background()
	if err := st.MintEpoch(ctx, chain, 0, epoch(3)); err != nil {
		t.Fatal(err)
	}
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("CHAIN#star-0#express", "HEAD"),
		UpdateExpression: aws.String("REMOVE " + remove)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
