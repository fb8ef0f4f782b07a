package dynamo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// This file holds a FROZEN COPY of what a build before the head fence
// reads from and sends to a chain's HEAD item (doc.go, "The head's
// layouts"): its head decoders and the requests of its head writes, with
// their attribute names and condition expressions as literals. Do not
// update them with the store: they stand for binaries already deployed.
// Sources (git show <commit>:shared/metastore/dynamo/codec.go, chains.go,
// refs.go):
//   - earlierDecodeHeadFirst: decodeHead at c4d3178, the first DynamoDB
//     store (every cursor required);
//   - earlierDecodeHead: decodeHead at 87b98de, the last build before the
//     fence (Flushed, Merged and Indexed optional, the rest required);
//     every decoder in between (git log -p codec.go) requires the same
//     numbers: Epoch, CheckpointEpoch/Slot, SettledEpoch/Slot,
//     TrimmedEpoch/Slot, AbsorbingEpoch/Slot;
//   - earlierBuild's writes: AdvanceCursor, BeginAbsorb, MintEpoch,
//     PutRefs's lease check and SettleRef's settled check at 87b98de
//     (the cursor conditions are c4d3178's, plus the from-0/0 forms of
//     Flushed, Merged and Indexed added since).

// earlierItem is the frozen item decoder (c4d3178 to 87b98de).
type earlierItem struct {
	m   map[string]types.AttributeValue
	err error
}

func (it *earlierItem) fail(name, want string) {
	if it.err == nil {
		pk, _ := it.m["PK"].(*types.AttributeValueMemberS)
		sk, _ := it.m["SK"].(*types.AttributeValueMemberS)
		var p, q string
		if pk != nil {
			p = pk.Value
		}
		if sk != nil {
			q = sk.Value
		}
		it.err = fmt.Errorf("dynamo: item %s/%s: attribute %s: want %s", p, q, name, want)
	}
}

func (it *earlierItem) u64(name string) uint64 {
	v, ok := it.m[name].(*types.AttributeValueMemberN)
	if !ok {
		it.fail(name, "a number")
		return 0
	}
	n, err := strconv.ParseUint(v.Value, 10, 64)
	if err != nil {
		it.fail(name, "an unsigned 64-bit integer")
	}
	return n
}

// earlierDecodeHeadFirst is decodeHead at c4d3178.
func earlierDecodeHeadFirst(m map[string]types.AttributeValue) (metastore.Head, error) {
	it := &earlierItem{m: m}
	h := metastore.Head{Epoch: it.u64("Epoch")}
	h.Checkpoint = metastore.Cursor{Epoch: it.u64("CheckpointEpoch"), Slot: it.u64("CheckpointSlot")}
	h.Settled = metastore.Cursor{Epoch: it.u64("SettledEpoch"), Slot: it.u64("SettledSlot")}
	h.Trimmed = metastore.Cursor{Epoch: it.u64("TrimmedEpoch"), Slot: it.u64("TrimmedSlot")}
	h.Absorbing = metastore.Cursor{Epoch: it.u64("AbsorbingEpoch"), Slot: it.u64("AbsorbingSlot")}
	return h, it.err
}

// earlierDecodeHead is decodeHead at 87b98de.
func earlierDecodeHead(m map[string]types.AttributeValue) (metastore.Head, error) {
	it := &earlierItem{m: m}
	h := metastore.Head{Epoch: it.u64("Epoch")}
	h.Checkpoint = metastore.Cursor{Epoch: it.u64("CheckpointEpoch"), Slot: it.u64("CheckpointSlot")}
	h.Settled = metastore.Cursor{Epoch: it.u64("SettledEpoch"), Slot: it.u64("SettledSlot")}
	h.Trimmed = metastore.Cursor{Epoch: it.u64("TrimmedEpoch"), Slot: it.u64("TrimmedSlot")}
	if m["FlushedEpoch"] != nil {
		h.Flushed = metastore.Cursor{Epoch: it.u64("FlushedEpoch"), Slot: it.u64("FlushedSlot")}
	}
	if m["MergedEpoch"] != nil {
		h.Merged = metastore.Cursor{Epoch: it.u64("MergedEpoch"), Slot: it.u64("MergedSlot")}
	}
	if m["IndexedEpoch"] != nil {
		h.Indexed = metastore.Cursor{Epoch: it.u64("IndexedEpoch"), Slot: it.u64("IndexedSlot")}
	}
	h.Absorbing = metastore.Cursor{Epoch: it.u64("AbsorbingEpoch"), Slot: it.u64("AbsorbingSlot")}
	return h, it.err
}

// earlierBuild sends the frozen requests of a build before the fence to
// one table, straight through the client. A refused write returns the
// error the earlier build returns: the decode error of the old item when
// it cannot decode it, else errEarlierConflict.
type earlierBuild struct {
	c     *dynamodb.Client
	table string
}

var errEarlierConflict = errors.New("earlier build: condition failed")

func (eb earlierBuild) headKey(c metastore.ChainID) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": s("CHAIN#" + c.Star + "#" + c.Class.String()), "SK": s("HEAD")}
}

func (eb earlierBuild) getHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	out, err := eb.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(eb.table), Key: eb.headKey(c), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return metastore.Head{}, err
	}
	return earlierDecodeHead(out.Item)
}

// refused maps a transaction's cancellation to the earlier build's error.
func (eb earlierBuild) refused(err error) error {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return err
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		if r.Item != nil {
			if _, derr := earlierDecodeHead(r.Item); derr != nil {
				return derr
			}
		}
		return errEarlierConflict
	}
	return err
}

// advance is AdvanceCursor at 87b98de (cursor names <Kind>Epoch/Slot).
func (eb earlierBuild) advance(ctx context.Context, c metastore.ChainID, kind string, from, to metastore.Cursor) error {
	names := map[string]string{"#pk": "PK", "#e": kind + "Epoch", "#s": kind + "Slot"}
	vals := map[string]types.AttributeValue{":fe": nu(from.Epoch), ":fs": nu(from.Slot), ":te": nu(to.Epoch), ":ts": nu(to.Slot)}
	update := "SET #e = :te, #s = :ts"
	cond := "attribute_exists(#pk) AND #e = :fe AND #s = :fs"
	if (kind == "Flushed" || kind == "Merged") && from.IsZero() {
		cond = "attribute_exists(#pk) AND ((#e = :fe AND #s = :fs) OR attribute_not_exists(#e))"
	}
	if kind == "Indexed" {
		names["#ae"], names["#as"], names["#ce"], names["#cs"] = "AbsorbingEpoch", "AbsorbingSlot", "CheckpointEpoch", "CheckpointSlot"
		vals[":zero"] = nu(0)
		cond = "attribute_exists(#pk) AND ((#e = :fe AND #s = :fs) OR attribute_not_exists(#e))" +
			" AND #ae = :zero AND #as = :zero AND #ce = :te AND #cs = :ts"
	}
	if kind == "Checkpoint" {
		names["#ae"], names["#as"] = "AbsorbingEpoch", "AbsorbingSlot"
		vals[":zero"] = nu(0)
		update += ", #ae = :zero, #as = :zero"
		cond += " AND ((#ae = :zero AND #as = :zero) OR (#ae = :te AND #as = :ts))"
	}
	_, err := eb.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(eb.table), Key: eb.headKey(c),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}})
	return eb.refused(err)
}

// beginAbsorb is BeginAbsorb at 87b98de.
func (eb earlierBuild) beginAbsorb(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	out, err := eb.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(eb.table), Key: eb.headKey(c),
		UpdateExpression:    aws.String("SET #ae = :te, #as = :ts"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND #ce = :fe AND #cs = :fs AND ((#ae = :zero AND #as = :zero) OR (#ae = :te AND #as = :ts))"),
		ExpressionAttributeNames: map[string]string{
			"#pk": "PK", "#ce": "CheckpointEpoch", "#cs": "CheckpointSlot", "#ae": "AbsorbingEpoch", "#as": "AbsorbingSlot",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":fe": nu(from.Epoch), ":fs": nu(from.Slot), ":te": nu(to.Epoch), ":ts": nu(to.Slot), ":zero": nu(0),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return earlierDecodeHead(out.Attributes)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if _, derr := earlierDecodeHead(ccf.Item); derr != nil {
			return metastore.Head{}, derr
		}
		return metastore.Head{}, errEarlierConflict
	}
	return metastore.Head{}, err
}

// mintEpoch is MintEpoch at 87b98de (epochAttrs: the EPOCH item, which
// the fence does not change).
func (eb earlierBuild) mintEpoch(ctx context.Context, c metastore.ChainID, prev uint64, e metastore.Epoch) error {
	var head types.TransactWriteItem
	if prev == 0 {
		item := eb.headKey(c)
		item["Epoch"] = nu(e.Epoch)
		for _, k := range []string{"Checkpoint", "Settled", "Trimmed", "Flushed", "Merged", "Indexed"} {
			item[k+"Epoch"], item[k+"Slot"] = nu(e.Epoch), nu(0)
		}
		item["MergedEpoch"], item["IndexedEpoch"] = nu(0), nu(0)
		item["AbsorbingEpoch"], item["AbsorbingSlot"] = nu(0), nu(0)
		head = types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(eb.table), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": "PK"},
		}}
	} else {
		head = types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(eb.table), Key: eb.headKey(c),
			UpdateExpression:          aws.String("SET #e = :e"),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND #e = :prev"),
			ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#e": "Epoch"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": nu(e.Epoch), ":prev": nu(prev)},
		}}
	}
	_, err := eb.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{head, {Put: &types.Put{
		TableName: aws.String(eb.table), Item: epochAttrs(c, e),
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": "PK"},
	}}}})
	return eb.refused(err)
}

// putRefs is PutRefs at 87b98de: the lease check and the refs' Puts
// (refAttrs: the ref item, which the fence does not change).
func (eb earlierBuild) putRefs(ctx context.Context, c metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	items := []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(eb.table), Key: eb.headKey(c),
		ConditionExpression:                 aws.String("attribute_exists(#pk) AND #ae = :pe AND #as = :ps"),
		ExpressionAttributeNames:            map[string]string{"#pk": "PK", "#ae": "AbsorbingEpoch", "#as": "AbsorbingSlot"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":pe": nu(pass.Epoch), ":ps": nu(pass.Slot)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	for _, r := range refs {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(eb.table), Item: refAttrs(r)}})
	}
	_, err := eb.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return eb.refused(err)
}

// settleRef is SettleRef at 87b98de for a new ref (no old refs): the
// settled cursor check and the Put.
func (eb earlierBuild) settleRef(ctx context.Context, c metastore.ChainID, settled metastore.Cursor, repl metastore.Ref) error {
	_, err := eb.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(eb.table), Key: eb.headKey(c),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND #se = :se AND #ss = :ss"),
			ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#se": "SettledEpoch", "#ss": "SettledSlot"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":se": nu(settled.Epoch), ":ss": nu(settled.Slot)},
		}},
		{Put: &types.Put{
			TableName: aws.String(eb.table), Item: refAttrs(repl),
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #sum = :sum"),
			ExpressionAttributeNames:  map[string]string{"#pk": "PK", "#sum": "Sum"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":sum": s(refSum(repl))},
		}},
	}})
	return eb.refused(err)
}

// settleStep is one step of an earlier build's settle loop, reduced to
// its metastore effect on a chain whose window holds no refs to settle:
// read the head again (each step does), settle the refs of [settled,
// checkpoint) (an indexed pass has none: an earlier build finds nothing
// to write for it) and move the settled cursor to the checkpoint. On a
// chain whose window holds indexed passes, a step that succeeds has
// moved the settled cursor over records no ref holds, and trim deletes
// their slots next: the hazard the fence closes.
func (eb earlierBuild) settleStep(ctx context.Context, c metastore.ChainID) error {
	h, err := eb.getHead(ctx, c)
	if err != nil {
		return err
	}
	if !h.Settled.Less(h.Checkpoint) {
		return nil
	}
	return eb.advance(ctx, c, "Settled", h.Settled, h.Checkpoint)
}

// fencedErr is what an earlier build's decoder says of a layout-2 head.
const fencedErr = "attribute Epoch: want a number"

func cur(e, slot uint64) metastore.Cursor { return metastore.Cursor{Epoch: e, Slot: slot} }

// TestHeadFenceEarlierBuild: before the switch, the frozen earlier build
// reads the head and advances its cursors; the switch (this build's
// AdvanceCursor(Indexed)) moves the head to layout 2, after which every
// frozen read fails to decode it (attribute Epoch: want a number) and
// every frozen write is refused by its condition, none changing the
// head (nor writing an epoch or a ref); this build goes on reading and
// writing it.
func TestHeadFenceEarlierBuild(t *testing.T) {
	c, table := newTable(t)
	st := New(c, table)
	eb := earlierBuild{c: c, table: table}
	ctx := context.Background()
	must := func(err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must(st.MintEpoch(ctx, chain, 0, epoch(3)), "mint")
	_, err := st.BeginAbsorb(ctx, chain, cur(3, 0), cur(3, 5))
	must(err, "begin absorb")
	must(st.PutRefs(ctx, chain, cur(3, 5), []metastore.Ref{ref(sid(1), 0, 9)}), "put refs")
	must(st.AdvanceCursor(ctx, chain, metastore.Checkpoint, cur(3, 0), cur(3, 5)), "checkpoint")

	// Before the switch: the earlier build reads and advances the head.
	for name, dec := range map[string]func(map[string]types.AttributeValue) (metastore.Head, error){"c4d3178": earlierDecodeHeadFirst, "87b98de": earlierDecodeHead} {
		h, err := dec(rawItem(t, c, table, "CHAIN#star-0#express", "HEAD"))
		if err != nil || h.Checkpoint != cur(3, 5) || h.Epoch != 3 {
			t.Fatalf("earlier decoder %s before the switch: %+v, %v", name, h, err)
		}
	}
	must(eb.advance(ctx, chain, "Settled", cur(3, 0), cur(3, 2)), "earlier settle CAS before the switch")
	must(eb.advance(ctx, chain, "Flushed", cur(3, 0), cur(3, 2)), "earlier flushed CAS before the switch")
	_, err = eb.beginAbsorb(ctx, chain, cur(3, 5), cur(3, 7))
	must(err, "earlier begin absorb before the switch")
	must(eb.putRefs(ctx, chain, cur(3, 7), []metastore.Ref{ref(sid(2), 0, 9)}), "earlier put refs before the switch")
	must(eb.advance(ctx, chain, "Checkpoint", cur(3, 5), cur(3, 7)), "earlier checkpoint before the switch")
	must(eb.settleRef(ctx, chain, cur(3, 2), ref(sid(3), 0, 9)), "earlier settle ref before the switch")
	if h, err := st.GetHead(ctx, chain); err != nil || h.Settled != cur(3, 2) || h.Checkpoint != cur(3, 7) {
		t.Fatalf("this build's head after the earlier build's writes: %+v, %v", h, err)
	}

	// The switch.
	must(st.AdvanceCursor(ctx, chain, metastore.Indexed, metastore.Cursor{}, cur(3, 7)), "switch")
	// A lease held by this build, so that an unfenced PutRefs check of the
	// earlier build would hold.
	_, err = st.BeginAbsorb(ctx, chain, cur(3, 7), cur(3, 9))
	must(err, "begin an indexed pass")
	want := metastore.Head{Epoch: 3, Checkpoint: cur(3, 7), Settled: cur(3, 2), Trimmed: cur(3, 0), Flushed: cur(3, 2), Indexed: cur(3, 7), Absorbing: cur(3, 9)}
	if h, err := st.GetHead(ctx, chain); err != nil || h != want {
		t.Fatalf("head after the switch: %+v, %v, want %+v", h, err, want)
	}
	raw := rawItem(t, c, table, "CHAIN#star-0#express", "HEAD")

	// After it: every read fails, every write is refused, nothing changes.
	for name, dec := range map[string]func(map[string]types.AttributeValue) (metastore.Head, error){"c4d3178": earlierDecodeHeadFirst, "87b98de": earlierDecodeHead} {
		if _, err := dec(raw); err == nil || !strings.Contains(err.Error(), fencedErr) {
			t.Errorf("earlier decoder %s after the switch: %v, want %q", name, err, fencedErr)
		}
	}
	_, err = eb.getHead(ctx, chain)
	t.Logf("an earlier build's GetHead of a switched head: %v", err)
	stale := cur(3, 2) // the settled cursor every earlier copy last read
	for _, w := range []struct {
		what string
		err  error
	}{
		{"GetHead", err},
		{"settle CAS from the settled cursor", eb.advance(ctx, chain, "Settled", stale, cur(3, 7))},
		{"settle CAS over the indexed pass", eb.advance(ctx, chain, "Settled", stale, cur(3, 9))},
		{"flushed CAS", eb.advance(ctx, chain, "Flushed", stale, cur(3, 7))},
		{"flushed CAS from 0/0", eb.advance(ctx, chain, "Flushed", metastore.Cursor{}, cur(3, 7))},
		{"merged CAS from 0/0", eb.advance(ctx, chain, "Merged", metastore.Cursor{}, cur(3, 7))},
		{"trimmed CAS", eb.advance(ctx, chain, "Trimmed", cur(3, 0), cur(3, 2))},
		{"checkpoint CAS", eb.advance(ctx, chain, "Checkpoint", cur(3, 7), cur(3, 9))},
		{"indexed set", eb.advance(ctx, chain, "Indexed", metastore.Cursor{}, cur(3, 7))},
		{"begin absorb", func() error { _, err := eb.beginAbsorb(ctx, chain, cur(3, 7), cur(3, 9)); return err }()},
	} {
		if w.err == nil || !strings.Contains(w.err.Error(), fencedErr) {
			t.Errorf("earlier build's %s after the switch: %v, want %q", w.what, w.err, fencedErr)
		}
	}
	// A settled check, a lease check and a mint fail their conditions
	// (their requests ask no ALL_OLD of the head, or the build does not
	// decode it).
	for _, w := range []struct {
		what string
		err  error
	}{
		{"settle ref", eb.settleRef(ctx, chain, stale, ref(sid(4), 0, 9))},
		{"put refs under this build's lease", eb.putRefs(ctx, chain, cur(3, 9), []metastore.Ref{ref(sid(5), 0, 9)})},
		{"mint (takeover)", eb.mintEpoch(ctx, chain, 3, epoch(4))},
		{"first mint (recreate the head)", eb.mintEpoch(ctx, chain, 0, epoch(4))},
	} {
		if w.err == nil || !(errors.Is(w.err, errEarlierConflict) || strings.Contains(w.err.Error(), fencedErr)) {
			t.Errorf("earlier build's %s after the switch: %v, want refused", w.what, w.err)
		}
	}
	if got := rawItem(t, c, table, "CHAIN#star-0#express", "HEAD"); !reflect.DeepEqual(got, raw) {
		t.Errorf("the earlier build changed the switched head:\n got  %v\n want %v", got, raw)
	}
	if rawItem(t, c, table, "CHAIN#star-0#express", "EPOCH#00000000000000000004") != nil {
		t.Errorf("the earlier build minted epoch 4")
	}
	for _, id := range []string{sid(4), sid(5)} {
		if rs, err := st.QueryRefs(ctx, id, 0, 10); err != nil || len(rs) != 0 {
			t.Errorf("refs of %s written by the earlier build: %v, %v", id, rs, err)
		}
	}

	// This build goes on: the indexed pass, settle over it, takeover.
	must(st.AdvanceCursor(ctx, chain, metastore.Checkpoint, cur(3, 7), cur(3, 9)), "checkpoint after the switch")
	must(st.SettleRef(ctx, chain, cur(3, 2), nil, ref(sid(6), 0, 9)), "settle ref after the switch")
	must(st.AdvanceCursor(ctx, chain, metastore.Settled, cur(3, 2), cur(3, 9)), "settled after the switch")
	must(st.MintEpoch(ctx, chain, 3, epoch(4)), "takeover after the switch")
	want = metastore.Head{Epoch: 4, Checkpoint: cur(3, 9), Settled: cur(3, 9), Trimmed: cur(3, 0), Flushed: cur(3, 2), Indexed: cur(3, 7)}
	if h, err := st.GetHead(ctx, chain); err != nil || h != want {
		t.Fatalf("head at the end: %+v, %v, want %+v", h, err, want)
	}
	if _, err := earlierDecodeHead(rawItem(t, c, table, "CHAIN#star-0#express", "HEAD")); err == nil {
		t.Fatal("an earlier build decodes the head after this build's writes")
	}
}

// TestEarlierSettleCannotPassIndexedPass: the hazard, at the level of a
// settle step of an earlier build (earlierBuild.settleStep, which reads
// the head again each step). Switched the way builds before the fence
// switch a chain (IndexedEpoch/IndexedSlot set in place) and with an
// indexed pass absorbed after it, the earlier step moves the settled
// cursor over the indexed pass (the records lost: this half shows the
// simulation reproduces the hazard). Switched by this build, or switched
// the earlier way and then absorbed by this build (BeginAbsorb moves the
// head to layout 2), the step fails with the decode error and the
// settled cursor stays below the indexed pass.
func TestEarlierSettleCannotPassIndexedPass(t *testing.T) {
	for _, tc := range []struct {
		name        string
		switchHead  func(t *testing.T, st *Store, eb earlierBuild)
		thisAbsorbs bool
		fenced      bool
	}{
		{"switched and absorbed before the fence", switchInPlace, false, false},
		{"switched before the fence, absorbed by this build", switchInPlace, true, true},
		{"switched by this build", func(t *testing.T, st *Store, _ earlierBuild) {
			if err := st.AdvanceCursor(context.Background(), chain, metastore.Indexed, metastore.Cursor{}, cur(3, 5)); err != nil {
				t.Fatal(err)
			}
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, table := newTable(t)
			st := New(c, table)
			eb := earlierBuild{c: c, table: table}
			ctx := context.Background()
			if err := st.MintEpoch(ctx, chain, 0, epoch(3)); err != nil {
				t.Fatal(err)
			}
			// A refs pass [3/0, 3/5), settled by the earlier build.
			if _, err := st.BeginAbsorb(ctx, chain, cur(3, 0), cur(3, 5)); err != nil {
				t.Fatal(err)
			}
			if err := st.PutRefs(ctx, chain, cur(3, 5), []metastore.Ref{ref(sid(1), 0, 9)}); err != nil {
				t.Fatal(err)
			}
			if err := st.AdvanceCursor(ctx, chain, metastore.Checkpoint, cur(3, 0), cur(3, 5)); err != nil {
				t.Fatal(err)
			}
			if err := eb.settleStep(ctx, chain); err != nil {
				t.Fatalf("earlier settle step over a refs pass: %v", err)
			}
			tc.switchHead(t, st, eb)
			// An indexed pass [3/5, 3/9): no refs.
			if tc.thisAbsorbs {
				if _, err := st.BeginAbsorb(ctx, chain, cur(3, 5), cur(3, 9)); err != nil {
					t.Fatal(err)
				}
				if err := st.AdvanceCursor(ctx, chain, metastore.Checkpoint, cur(3, 5), cur(3, 9)); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := eb.beginAbsorb(ctx, chain, cur(3, 5), cur(3, 9)); err != nil {
					t.Fatal(err)
				}
				if err := eb.advance(ctx, chain, "Checkpoint", cur(3, 5), cur(3, 9)); err != nil {
					t.Fatal(err)
				}
			}
			err := eb.settleStep(ctx, chain)
			h, herr := st.GetHead(ctx, chain)
			if herr != nil {
				t.Fatal(herr)
			}
			if !tc.fenced {
				if err != nil || h.Settled != cur(3, 9) {
					t.Fatalf("unfenced: step %v, settled %s: the simulation does not reproduce the hazard", err, h.Settled)
				}
				t.Logf("unfenced: the earlier settle step moved settled to %s, over the indexed pass from %s", h.Settled, h.Indexed)
				return
			}
			if err == nil || !strings.Contains(err.Error(), fencedErr) {
				t.Fatalf("earlier settle step on a fenced head: %v, want %q", err, fencedErr)
			}
			if h.Settled != cur(3, 5) || h.Indexed != cur(3, 5) {
				t.Fatalf("settled %s, indexed %s after the fenced step, want both 3/5", h.Settled, h.Indexed)
			}
		})
	}
}

// switchInPlace switches the chain the way every build before the fence
// did: IndexedEpoch/IndexedSlot set in place at the checkpoint, the head
// left in layout 1 (the frozen AdvanceCursor of kind Indexed).
func switchInPlace(t *testing.T, _ *Store, eb earlierBuild) {
	t.Helper()
	if err := eb.advance(context.Background(), chain, "Indexed", metastore.Cursor{}, cur(3, 5)); err != nil {
		t.Fatal(err)
	}
}

// TestSwitchedHeadFreshStore: a store that has not seen a chain's head
// (a new process: it tries layout 1 first) reads and writes a switched
// head: each write whose layout-1 condition fails on the layout-2 head
// is sent again in layout 2 (one refused write per process and chain),
// and a failed condition still says why.
func TestSwitchedHeadFreshStore(t *testing.T) {
	c, table := newTable(t)
	ctx := context.Background()
	st := New(c, table)
	if err := st.MintEpoch(ctx, chain, 0, epoch(3)); err != nil {
		t.Fatal(err)
	}
	if err := st.AdvanceCursor(ctx, chain, metastore.Indexed, metastore.Cursor{}, cur(3, 0)); err != nil {
		t.Fatal(err)
	}
	fresh := func() *Store { return New(c, table) }
	steps := []struct {
		what string
		do   func(st *Store) error
	}{
		{"begin absorb", func(st *Store) error { _, err := st.BeginAbsorb(ctx, chain, cur(3, 0), cur(3, 4)); return err }},
		{"put refs", func(st *Store) error {
			return st.PutRefs(ctx, chain, cur(3, 4), []metastore.Ref{ref(sid(1), 0, 9)})
		}},
		{"checkpoint", func(st *Store) error { return st.AdvanceCursor(ctx, chain, metastore.Checkpoint, cur(3, 0), cur(3, 4)) }},
		{"settle ref", func(st *Store) error { return st.SettleRef(ctx, chain, cur(3, 0), nil, ref(sid(2), 0, 9)) }},
		{"settled", func(st *Store) error { return st.AdvanceCursor(ctx, chain, metastore.Settled, cur(3, 0), cur(3, 4)) }},
		{"flushed", func(st *Store) error { return st.AdvanceCursor(ctx, chain, metastore.Flushed, cur(3, 0), cur(3, 2)) }},
		{"merged", func(st *Store) error {
			return st.AdvanceCursor(ctx, chain, metastore.Merged, metastore.Cursor{}, cur(3, 2))
		}},
		{"trimmed", func(st *Store) error { return st.AdvanceCursor(ctx, chain, metastore.Trimmed, cur(3, 0), cur(3, 1)) }},
		{"mint", func(st *Store) error { return st.MintEpoch(ctx, chain, 3, epoch(4)) }},
	}
	for _, s := range steps {
		if err := s.do(fresh()); err != nil {
			t.Fatalf("%s by a fresh store: %v", s.what, err)
		}
	}
	want := metastore.Head{Epoch: 4, Checkpoint: cur(3, 4), Settled: cur(3, 4), Trimmed: cur(3, 1), Flushed: cur(3, 2), Merged: cur(3, 2), Indexed: cur(3, 0)}
	if h, err := fresh().GetHead(ctx, chain); err != nil || h != want {
		t.Fatalf("head: %+v, %v, want %+v", h, err, want)
	}
	// Refusals still say why, from a fresh store.
	for _, w := range []struct {
		what string
		err  error
	}{
		{"settled from a stale cursor", fresh().AdvanceCursor(ctx, chain, metastore.Settled, cur(3, 0), cur(3, 9))},
		{"indexed again", fresh().AdvanceCursor(ctx, chain, metastore.Indexed, metastore.Cursor{}, cur(3, 4))},
		{"mint after a stale epoch", fresh().MintEpoch(ctx, chain, 3, epoch(5))},
		{"first mint", fresh().MintEpoch(ctx, chain, 0, epoch(5))},
		{"begin absorb from a stale checkpoint", func() error { _, err := fresh().BeginAbsorb(ctx, chain, cur(3, 0), cur(3, 9)); return err }()},
		{"put refs without the lease", fresh().PutRefs(ctx, chain, cur(3, 9), []metastore.Ref{ref(sid(3), 0, 9)})},
	} {
		if !errors.Is(w.err, metastore.ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", w.what, w.err)
		}
	}
}

// TestHeadLayout2Item: a switched head's item: HeadLayout 2, the numbers
// under the L2 names, every layout-1 name a string, and under 1 KB at
// the longest star id, so that a write of it costs one write request
// unit, as a layout-1 head's does (DynamoDB bills writes by 1 KB of the
// item).
func TestHeadLayout2Item(t *testing.T) {
	long := metastore.ChainID{Star: strings.Repeat("s", metastore.MaxStarLen), Class: metastore.Standard}
	max := ^uint64(0)
	h := metastore.Head{Epoch: max}
	for _, k := range headCursorKinds {
		h = metastore.SetCursor(h, k, metastore.Cursor{Epoch: max, Slot: max})
	}
	h.Absorbing = metastore.Cursor{Epoch: max, Slot: max}
	m := headAttrsIn(2, long, h)
	if n := itemSize(m); n > 1024 {
		t.Errorf("layout-2 head of the longest star id and largest cursors: %d bytes, want at most 1024", n)
	} else {
		t.Logf("layout-2 head at most %d bytes (layout 1: %d)", n, itemSize(headAttrs(long, h)))
	}
	if v, ok := m[attrHeadLayout].(*types.AttributeValueMemberN); !ok || v.Value != "2" {
		t.Errorf("HeadLayout = %v", m[attrHeadLayout])
	}
	for _, n := range layout1HeadNames() {
		if _, ok := m[n].(*types.AttributeValueMemberS); !ok {
			t.Errorf("layout-1 name %s on a layout-2 head: %v, want a string", n, m[n])
		}
	}
	if got, layout, err := decodeHeadLayout(m); err != nil || layout != 2 || got != h {
		t.Errorf("decode: %+v, layout %d, %v", got, layout, err)
	}
}
