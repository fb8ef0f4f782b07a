package dynamo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Attribute names. They are part of the stored format (see doc.go): do not
// change them.
const (
	attrPK = "PK"
	attrSK = "SK"
	// attrWID is the write id of the conditional transaction that last
	// wrote the item, on one item per transaction (markWrite); decoding
	// ignores it.
	attrWID = "WID"

	// Stream (STREAM#<name>/META and its listing item STREAMS/<name>).
	attrName        = "Name"
	attrID          = "ID"
	attrClass       = "Class"
	attrStar        = "Star"
	attrCreatedMs   = "CreatedMs"
	attrRetentionMs = "RetentionMs"
	attrState       = "State"
	// attrFloor is absent when the floor is 0.
	attrFloor = "Floor"
	attrFrom  = "From" // the star before the last move; absent when none
	// attrTsMode and attrTsUncapped (a stream's Timestamping) are absent
	// when zero.
	attrTsMode     = "TsMode"
	attrTsUncapped = "TsUncapped"

	// Ref (SID#<id>/REF#<first-seq>).
	attrStreamID  = "StreamID"
	attrFirstSeq  = "FirstSeq"
	attrLastSeq   = "LastSeq"
	attrFirstTsMs = "FirstTsMs"
	attrLastTsMs  = "LastTsMs"
	attrBytes     = "Bytes"
	attrLocations = "Locations"
	attrProducers = "Producers"
	attrCarried   = "Carried"
	attrCommands  = "Commands"
	attrSum       = "Sum"
	// Location map keys.
	attrSettled = "Settled"
	attrKey     = "Key"
	attrOffset  = "Offset"
	attrLength  = "Length"
	attrLocSeq  = "FirstSeq"

	// Head (CHAIN#<star>#<class>/HEAD); the cursors are <Kind>Epoch and
	// <Kind>Slot (cursorAttrs), the absorb lease target AbsorbingEpoch and
	// AbsorbingSlot (0/0: no pass).
	attrEpoch          = "Epoch"
	attrAbsorbingEpoch = "AbsorbingEpoch"
	attrAbsorbingSlot  = "AbsorbingSlot"

	// Epoch (CHAIN#<star>#<class>/EPOCH#<epoch>); also attrEpoch, attrState.
	attrK       = "K"
	attrW       = "W"
	attrBuckets = "Buckets"
	attrWindow  = "Window"
	attrNonce   = "Nonce"
	attrCut     = "Cut"

	// Token (TOKEN#<hash>/META).
	attrHash   = "Hash"
	attrPrefix = "Prefix"
	attrOps    = "Ops"
	// attrDescription is absent when the description is empty.
	attrDescription = "Description"
	// attrExpiresMs and attrRevokedMs are absent when 0.
	attrExpiresMs = "ExpiresMs"
	attrRevokedMs = "RevokedMs"
	// attrParent is absent for a root token.
	attrParent = "Parent"
	// attrStartsTenant (BOOL), attrMaxStreams and attrAppendBytesPerSec
	// (N) are absent when false or 0 (ADR 0060).
	attrStartsTenant      = "StartsTenant"
	attrMaxStreams        = "MaxStreams"
	attrAppendBytesPerSec = "AppendBytesPerSec"
)

// ListPK is the partition key of the stream listing items: one item per
// stream, SK = the stream's name, written and deleted in the same
// transaction as the stream's META item, so ListStreams is a Query.
const ListPK = "STREAMS"

// TokenListPK is the partition key of the token listing items: one item per
// token, SK = its hash, holding a copy of the grant, written and deleted in
// the same transaction as the TOKEN item, so ListTokens is a Query.
const TokenListPK = "TOKENS"

// cursorAttrs names the epoch and slot attributes of a head's cursor.
func cursorAttrs(k metastore.CursorKind) (epoch, slot string) {
	n := k.String() // checkpoint, settled, trimmed
	n = string(n[0]-'a'+'A') + n[1:]
	return n + "Epoch", n + "Slot"
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nu(v uint64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(v, 10)}
}
func ni(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func strList(v []string) types.AttributeValue {
	l := make([]types.AttributeValue, len(v))
	for i, x := range v {
		l[i] = s(x)
	}
	return &types.AttributeValueMemberL{Value: l}
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: s(pk), attrSK: s(sk)}
}

// item is a stored item being decoded; the first error sticks.
type item struct {
	m   map[string]types.AttributeValue
	err error
}

func (it *item) fail(name, want string) {
	if it.err == nil {
		pk, _ := it.m[attrPK].(*types.AttributeValueMemberS)
		sk, _ := it.m[attrSK].(*types.AttributeValueMemberS)
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

func (it *item) str(name string) string {
	v, ok := it.m[name].(*types.AttributeValueMemberS)
	if !ok {
		it.fail(name, "a string")
		return ""
	}
	return v.Value
}

func (it *item) u64(name string) uint64 {
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

func (it *item) i64(name string) int64 {
	v, ok := it.m[name].(*types.AttributeValueMemberN)
	if !ok {
		it.fail(name, "a number")
		return 0
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		it.fail(name, "a 64-bit integer")
	}
	return n
}

func (it *item) small(name string) int {
	n := it.i64(name)
	if n < -1<<31 || n > 1<<31-1 {
		it.fail(name, "a 32-bit integer")
	}
	return int(n)
}

func (it *item) u8(name string) uint8 {
	n := it.u64(name)
	if n > 255 {
		it.fail(name, "a byte")
	}
	return uint8(n)
}

func (it *item) list(name string) []types.AttributeValue {
	v, ok := it.m[name].(*types.AttributeValueMemberL)
	if !ok {
		it.fail(name, "a list")
		return nil
	}
	return v.Value
}

func (it *item) strs(name string) []string {
	l := it.list(name)
	if len(l) == 0 {
		return nil
	}
	out := make([]string, len(l))
	for i, x := range l {
		v, ok := x.(*types.AttributeValueMemberS)
		if !ok {
			it.fail(name, "a list of strings")
			return nil
		}
		out[i] = v.Value
	}
	return out
}

// Streams.

func streamAttrs(pk, sk string, st metastore.Stream) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrPK:          s(pk),
		attrSK:          s(sk),
		attrName:        s(st.Name),
		attrID:          s(st.ID),
		attrClass:       nu(uint64(st.Class)),
		attrStar:        s(st.Star),
		attrCreatedMs:   ni(st.CreatedMs),
		attrRetentionMs: ni(st.RetentionMs),
		attrState:       nu(uint64(st.State)),
	}
	if st.Floor > 0 {
		m[attrFloor] = nu(st.Floor)
	}
	if st.From != "" {
		m[attrFrom] = s(st.From)
	}
	if st.Timestamping.Mode != 0 {
		m[attrTsMode] = nu(uint64(st.Timestamping.Mode))
	}
	if st.Timestamping.Uncapped {
		m[attrTsUncapped] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return m
}

func decodeStream(m map[string]types.AttributeValue) (metastore.Stream, error) {
	it := &item{m: m}
	st := metastore.Stream{
		Name:        it.str(attrName),
		ID:          it.str(attrID),
		Class:       metastore.Class(it.u8(attrClass)),
		Star:        it.str(attrStar),
		CreatedMs:   it.i64(attrCreatedMs),
		RetentionMs: it.i64(attrRetentionMs),
		State:       metastore.StreamState(it.u8(attrState)),
	}
	if _, ok := m[attrFloor]; ok { // absent when 0
		st.Floor = it.u64(attrFloor)
	}
	if _, ok := m[attrFrom]; ok { // absent when never moved
		st.From = it.str(attrFrom)
	}
	if _, ok := m[attrTsMode]; ok { // absent when 0
		st.Timestamping.Mode = metastore.TimestampMode(it.u8(attrTsMode))
	}
	if v, ok := m[attrTsUncapped]; ok { // absent when false
		b, isBool := v.(*types.AttributeValueMemberBOOL)
		if !isBool {
			it.fail(attrTsUncapped, "a Boolean")
		} else {
			st.Timestamping.Uncapped = b.Value
		}
	}
	return st, it.err
}

// Refs.

// refSum is the SHA-256 of a canonical encoding of every field of r. The
// Sum attribute lets SwapRefs require, in one condition, that a stored ref is
// still exactly as the caller gave it.
func refSum(r metastore.Ref) string {
	h := sha256.New()
	fmt.Fprintf(h, "ref/1|%q|%d|%d|%d|%d|%d|%d", r.StreamID, r.FirstSeq, r.LastSeq, r.FirstTsMs, r.LastTsMs, r.Bytes, len(r.Locations))
	for _, l := range r.Locations {
		fmt.Fprintf(h, "|%t|%q|%d|%d|%d", l.Settled, l.Key, l.Offset, l.Length, l.FirstSeq)
	}
	if len(r.Producers) > 0 { // absent for refs without marks: their sums are unchanged
		fmt.Fprintf(h, "|producers|%x", metastore.EncodeProducerMarks(r.Producers))
	}
	if len(r.Carried) > 0 { // absent for refs without a carried table: their sums are unchanged
		fmt.Fprintf(h, "|carried|%d|%x", r.CarriedBelow, metastore.EncodeProducerMarks(r.Carried))
	}
	if r.Commands != nil { // absent for refs without command state: their sums are unchanged
		fmt.Fprintf(h, "|commands|%x", format.AppendCommands(nil, *r.Commands))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func refAttrs(r metastore.Ref) map[string]types.AttributeValue {
	locs := make([]types.AttributeValue, len(r.Locations))
	for i, l := range r.Locations {
		locs[i] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			attrSettled: &types.AttributeValueMemberBOOL{Value: l.Settled},
			attrKey:     s(l.Key),
			attrOffset:  ni(l.Offset),
			attrLength:  ni(l.Length),
			attrLocSeq:  nu(l.FirstSeq),
		}}
	}
	m := map[string]types.AttributeValue{
		attrPK:        s(metastore.RefPK(r.StreamID)),
		attrSK:        s(metastore.RefSK(r.FirstSeq)),
		attrStreamID:  s(r.StreamID),
		attrFirstSeq:  nu(r.FirstSeq),
		attrLastSeq:   nu(r.LastSeq),
		attrFirstTsMs: ni(r.FirstTsMs),
		attrLastTsMs:  ni(r.LastTsMs),
		attrBytes:     ni(r.Bytes),
		attrLocations: &types.AttributeValueMemberL{Value: locs},
		attrSum:       s(refSum(r)),
	}
	if len(r.Producers) > 0 {
		m[attrProducers] = &types.AttributeValueMemberB{Value: metastore.EncodeProducerMarks(r.Producers)}
	}
	if len(r.Carried) > 0 {
		v := binary.BigEndian.AppendUint64(nil, r.CarriedBelow)
		m[attrCarried] = &types.AttributeValueMemberB{Value: append(v, metastore.EncodeProducerMarks(r.Carried)...)}
	}
	if r.Commands != nil {
		m[attrCommands] = &types.AttributeValueMemberB{Value: format.AppendCommands(nil, *r.Commands)}
	}
	return m
}

func decodeRef(m map[string]types.AttributeValue) (metastore.Ref, error) {
	it := &item{m: m}
	r := metastore.Ref{
		StreamID:  it.str(attrStreamID),
		FirstSeq:  it.u64(attrFirstSeq),
		LastSeq:   it.u64(attrLastSeq),
		FirstTsMs: it.i64(attrFirstTsMs),
		LastTsMs:  it.i64(attrLastTsMs),
		Bytes:     it.i64(attrBytes),
	}
	for _, x := range it.list(attrLocations) {
		lm, ok := x.(*types.AttributeValueMemberM)
		if !ok {
			it.fail(attrLocations, "a list of maps")
			break
		}
		li := &item{m: lm.Value}
		settled, ok := lm.Value[attrSettled].(*types.AttributeValueMemberBOOL)
		if !ok {
			li.fail(attrLocations+"."+attrSettled, "a boolean")
		}
		l := metastore.Location{Key: li.str(attrKey), Offset: li.i64(attrOffset), Length: li.i64(attrLength)}
		if _, ok := lm.Value[attrLocSeq]; ok {
			l.FirstSeq = li.u64(attrLocSeq)
		}
		if settled != nil {
			l.Settled = settled.Value
		}
		if li.err != nil {
			it.fail(attrLocations, "locations of {Settled, Key, Offset, Length}")
			break
		}
		r.Locations = append(r.Locations, l)
	}
	if v, ok := m[attrProducers]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			it.fail(attrProducers, "binary producer marks")
		} else if ps, err := metastore.DecodeProducerMarks(b.Value); err != nil {
			it.fail(attrProducers, err.Error())
		} else {
			r.Producers = ps
		}
	}
	if v, ok := m[attrCarried]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			it.fail(attrCarried, "binary carried marks")
		} else if len(b.Value) < 8 {
			it.fail(attrCarried, "carried tail and marks")
		} else if ps, err := metastore.DecodeProducerMarks(b.Value[8:]); err != nil || len(ps) == 0 {
			it.fail(attrCarried, fmt.Sprintf("carried marks: %v", err))
		} else {
			r.CarriedBelow, r.Carried = binary.BigEndian.Uint64(b.Value[:8]), ps
		}
	}
	if v, ok := m[attrCommands]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			it.fail(attrCommands, "binary command state")
		} else if c, err := format.DecodeCommands(b.Value); err != nil {
			it.fail(attrCommands, err.Error())
		} else {
			r.Commands = &c
		}
	}
	return r, it.err
}

// Chains.

// Head layouts (see doc.go, "The head's layouts"). Layout 1 is the head
// every build before the fence wrote: the epoch, the cursors and the
// lease as numbers under attrEpoch, cursorAttrs and attrAbsorbing*.
// Layout 2 is the head of a switched chain (Indexed set): the same
// numbers under the layout-1 names prefixed with layout2Prefix, the
// attribute attrHeadLayout = 2, and every layout-1 name holding the
// string fencedValue, so that an earlier build's decoder (which requires
// a number at attrEpoch) fails and none of its conditions (a layout-1
// name equal to a number, or absent) holds.
const (
	attrHeadLayout = "HeadLayout"
	layout2Prefix  = "L2"
	fencedValue    = "fenced"
)

// headCursorKinds are the head's cursor kinds, in attribute order.
var headCursorKinds = []metastore.CursorKind{metastore.Checkpoint, metastore.Settled, metastore.Trimmed, metastore.Flushed, metastore.Merged, metastore.Indexed}

// headName is the layout's name of the head attribute that layout 1
// calls l1.
func headName(layout uint8, l1 string) string {
	if layout == 2 {
		return layout2Prefix + l1
	}
	return l1
}

// headCursorNames names the epoch and slot attributes of cursor kind k in
// the layout.
func headCursorNames(layout uint8, k metastore.CursorKind) (epoch, slot string) {
	e, sl := cursorAttrs(k)
	return headName(layout, e), headName(layout, sl)
}

// layout1HeadNames are the layout-1 names of every head attribute but the
// keys: what a layout-2 head fences.
func layout1HeadNames() []string {
	names := []string{attrEpoch, attrAbsorbingEpoch, attrAbsorbingSlot}
	for _, k := range headCursorKinds {
		e, sl := cursorAttrs(k)
		names = append(names, e, sl)
	}
	return names
}

// headAttrs is the head item of chain c in layout 1 (the layout of a
// chain whose Indexed cursor is not set).
func headAttrs(c metastore.ChainID, h metastore.Head) map[string]types.AttributeValue {
	return headAttrsIn(1, c, h)
}

// headAttrsIn is the head item of chain c in the given layout (1 or 2).
func headAttrsIn(layout uint8, c metastore.ChainID, h metastore.Head) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrPK:                      s(metastore.ChainPK(c)),
		attrSK:                      s(metastore.HeadSK),
		headName(layout, attrEpoch): nu(h.Epoch),
	}
	for _, k := range headCursorKinds {
		e, sl := headCursorNames(layout, k)
		cur := h.Cursor(k)
		m[e], m[sl] = nu(cur.Epoch), nu(cur.Slot)
	}
	m[headName(layout, attrAbsorbingEpoch)], m[headName(layout, attrAbsorbingSlot)] = nu(h.Absorbing.Epoch), nu(h.Absorbing.Slot)
	if layout == 2 {
		m[attrHeadLayout] = nu(2)
		for _, n := range layout1HeadNames() {
			m[n] = s(fencedValue)
		}
	}
	return m
}

func decodeHead(m map[string]types.AttributeValue) (metastore.Head, error) {
	h, _, err := decodeHeadLayout(m)
	return h, err
}

// decodeHeadLayout decodes a head item of either layout and says which.
func decodeHeadLayout(m map[string]types.AttributeValue) (metastore.Head, uint8, error) {
	it := &item{m: m}
	if _, ok := m[attrHeadLayout]; ok {
		if v := it.u64(attrHeadLayout); it.err == nil && v != 2 {
			it.fail(attrHeadLayout, "2 (layout 2; a later layout needs a later build)")
		}
		if it.err != nil {
			return metastore.Head{}, 0, it.err
		}
		// Layout 2: every attribute is required.
		h := metastore.Head{Epoch: it.u64(headName(2, attrEpoch))}
		for _, k := range headCursorKinds {
			e, sl := headCursorNames(2, k)
			h = metastore.SetCursor(h, k, metastore.Cursor{Epoch: it.u64(e), Slot: it.u64(sl)})
		}
		h.Absorbing = metastore.Cursor{Epoch: it.u64(headName(2, attrAbsorbingEpoch)), Slot: it.u64(headName(2, attrAbsorbingSlot))}
		if it.err != nil {
			return metastore.Head{}, 0, it.err
		}
		return h, 2, nil
	}
	h := metastore.Head{Epoch: it.u64(attrEpoch)}
	for _, k := range []metastore.CursorKind{metastore.Checkpoint, metastore.Settled, metastore.Trimmed} {
		e, sl := cursorAttrs(k)
		h = metastore.SetCursor(h, k, metastore.Cursor{Epoch: it.u64(e), Slot: it.u64(sl)})
	}
	// Flushed, Merged and Indexed came later: a head stored before them
	// has none (0/0; Indexed 0/0: no pass indexed).
	for _, k := range []metastore.CursorKind{metastore.Flushed, metastore.Merged, metastore.Indexed} {
		if e, sl := cursorAttrs(k); m[e] != nil {
			h = metastore.SetCursor(h, k, metastore.Cursor{Epoch: it.u64(e), Slot: it.u64(sl)})
		}
	}
	h.Absorbing = metastore.Cursor{Epoch: it.u64(attrAbsorbingEpoch), Slot: it.u64(attrAbsorbingSlot)}
	if it.err != nil {
		return metastore.Head{}, 0, it.err
	}
	return h, 1, nil
}

func epochAttrs(c metastore.ChainID, e metastore.Epoch) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:      s(metastore.ChainPK(c)),
		attrSK:      s(metastore.EpochSK(e.Epoch)),
		attrEpoch:   nu(e.Epoch),
		attrState:   nu(uint64(e.State)),
		attrK:       ni(int64(e.K)),
		attrW:       ni(int64(e.W)),
		attrBuckets: strList(e.Buckets),
		attrWindow:  ni(int64(e.Window)),
		attrNonce:   &types.AttributeValueMemberB{Value: e.Nonce[:]},
		attrCut:     nu(e.Cut),
	}
}

func decodeEpoch(m map[string]types.AttributeValue) (metastore.Epoch, error) {
	it := &item{m: m}
	e := metastore.Epoch{
		Epoch:   it.u64(attrEpoch),
		State:   metastore.EpochState(it.u8(attrState)),
		K:       it.small(attrK),
		W:       it.small(attrW),
		Buckets: it.strs(attrBuckets),
		Window:  it.small(attrWindow),
		Cut:     it.u64(attrCut),
	}
	nonce, ok := m[attrNonce].(*types.AttributeValueMemberB)
	if !ok || len(nonce.Value) != len(e.Nonce) {
		it.fail(attrNonce, "16 bytes")
	} else {
		copy(e.Nonce[:], nonce.Value)
	}
	return e, it.err
}

// Tokens.

// tokenAttrs is a token item at (pk, sk): the TOKEN item or its listing
// item.
func tokenAttrs(pk, sk string, t metastore.Token) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrPK:     s(pk),
		attrSK:     s(sk),
		attrHash:   s(t.Hash),
		attrPrefix: s(t.Prefix),
		attrOps:    strList(t.Ops),
	}
	if t.Description != "" {
		m[attrDescription] = s(t.Description)
	}
	if t.ExpiresMs != 0 {
		m[attrExpiresMs] = ni(t.ExpiresMs)
	}
	if t.RevokedMs != 0 {
		m[attrRevokedMs] = ni(t.RevokedMs)
	}
	if t.Parent != "" {
		m[attrParent] = s(t.Parent)
	}
	if t.StartsTenant {
		m[attrStartsTenant] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if t.MaxStreams != 0 {
		m[attrMaxStreams] = ni(t.MaxStreams)
	}
	if t.AppendBytesPerSec != 0 {
		m[attrAppendBytesPerSec] = ni(t.AppendBytesPerSec)
	}
	return m
}

func decodeToken(m map[string]types.AttributeValue) (metastore.Token, error) {
	it := &item{m: m}
	t := metastore.Token{Hash: it.str(attrHash), Prefix: it.str(attrPrefix), Ops: it.strs(attrOps)}
	if _, ok := m[attrDescription]; ok { // absent when empty
		t.Description = it.str(attrDescription)
	}
	if _, ok := m[attrExpiresMs]; ok { // absent when 0
		t.ExpiresMs = it.i64(attrExpiresMs)
	}
	if _, ok := m[attrRevokedMs]; ok {
		t.RevokedMs = it.i64(attrRevokedMs)
	}
	if _, ok := m[attrParent]; ok {
		t.Parent = it.str(attrParent)
	}
	if v, ok := m[attrStartsTenant]; ok { // absent when false, like the quotas when 0
		b, isBool := v.(*types.AttributeValueMemberBOOL)
		if !isBool {
			it.fail(attrStartsTenant, "a Boolean")
		} else {
			t.StartsTenant = b.Value
		}
	}
	if _, ok := m[attrMaxStreams]; ok {
		t.MaxStreams = it.i64(attrMaxStreams)
	}
	if _, ok := m[attrAppendBytesPerSec]; ok {
		t.AppendBytesPerSec = it.i64(attrAppendBytesPerSec)
	}
	return t, it.err
}
