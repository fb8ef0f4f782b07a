package dynamo

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// fuzzNames are the attribute names an item may hold (and one unknown).
var fuzzNames = []string{attrPK, attrSK, attrName, attrID, attrClass, attrStar, attrCreatedMs, attrRetentionMs, attrState,
	attrStreamID, attrFirstSeq, attrLastSeq, attrFirstTsMs, attrLastTsMs, attrBytes, attrLocations, attrSum,
	attrEpoch, attrAbsorbingEpoch, attrAbsorbingSlot, "CheckpointEpoch", "CheckpointSlot", "SettledEpoch", "SettledSlot",
	"TrimmedEpoch", "TrimmedSlot", attrK, attrW, attrBuckets, attrWindow, attrNonce, attrCut, attrHash, attrPrefix, attrOps,
	attrDescription, "Unknown",
	// Layout 2 of the head (after the others: the seeds below name
	// attributes by index).
	attrHeadLayout, "L2Epoch", "L2AbsorbingEpoch", "L2AbsorbingSlot", "L2CheckpointEpoch", "L2CheckpointSlot",
	"L2SettledEpoch", "L2SettledSlot", "L2TrimmedEpoch", "L2TrimmedSlot", "L2FlushedEpoch", "L2FlushedSlot", "L2MergedEpoch", "L2MergedSlot",
	"L2IndexedEpoch", "L2IndexedSlot",
	// A ref's binary attributes (after the others, as above).
	attrProducers, attrCarried, attrCommands}

// fuzzValue makes an attribute value of kind k from v.
func fuzzValue(k byte, v string) types.AttributeValue {
	switch k % 7 {
	case 0:
		return &types.AttributeValueMemberS{Value: v}
	case 1:
		return &types.AttributeValueMemberN{Value: v}
	case 2:
		return &types.AttributeValueMemberB{Value: []byte(v)}
	case 3:
		return &types.AttributeValueMemberBOOL{Value: len(v)%2 == 1}
	case 4:
		var l []types.AttributeValue
		for _, p := range strings.Split(v, ",") {
			l = append(l, &types.AttributeValueMemberS{Value: p})
		}
		return &types.AttributeValueMemberL{Value: l}
	case 5: // a list of locations, some of whose fields are numbers
		var l []types.AttributeValue
		for _, p := range strings.Split(v, ";") {
			f := strings.Split(p, ",")
			m := map[string]types.AttributeValue{}
			for i, name := range []string{attrSettled, attrKey, attrOffset, attrLength, attrLocSeq} {
				if i < len(f) {
					m[name] = fuzzValue(byte(i*3+len(f[i]))%4, f[i]) // scalars only
				}
			}
			l = append(l, &types.AttributeValueMemberM{Value: m})
		}
		return &types.AttributeValueMemberL{Value: l}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}

// fuzzItem decodes data as a sequence of (name index, kind, length, value)
// into an item.
func fuzzItem(data []byte) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{}
	for len(data) >= 3 {
		name, kind, n := fuzzNames[int(data[0])%len(fuzzNames)], data[1], int(data[2])
		data = data[3:]
		n = min(n, len(data))
		m[name] = fuzzValue(kind, string(data[:n]))
		data = data[n:]
	}
	return m
}

// FuzzDecodeItem: every decoder takes any item without panicking, and
// what one decodes survives encoding and decoding again unchanged.
func FuzzDecodeItem(f *testing.F) {
	enc := func(m map[string]types.AttributeValue) []byte {
		var out []byte
		for i, name := range fuzzNames {
			switch v := m[name].(type) {
			case *types.AttributeValueMemberS:
				out = append(out, byte(i), 0, byte(len(v.Value)))
				out = append(out, v.Value...)
			case *types.AttributeValueMemberN:
				out = append(out, byte(i), 1, byte(len(v.Value)))
				out = append(out, v.Value...)
			}
		}
		return out
	}
	f.Add(enc(streamAttrs("STREAM#a", "META", metastore.Stream{Name: "a", ID: strings.Repeat("0", 32), Star: "star-0", CreatedMs: 5})))
	f.Add(enc(tokenAttrs("TOKEN#h", "META", metastore.Token{Hash: "h", Prefix: "p/"})))
	f.Add(enc(headAttrs(metastore.ChainID{Star: "s"}, metastore.Head{Epoch: 3})))
	f.Add(enc(headAttrsIn(2, metastore.ChainID{Star: "s"}, metastore.Head{Epoch: 3, Indexed: metastore.Cursor{Epoch: 3, Slot: 1}})))
	f.Add(enc(leaseAttrs(metastore.Lease{Star: "star-0", Holder: "t", Addr: "10.0.0.1:4780", Version: 7, TTLMs: 3000})))
	f.Add([]byte{byte(15), 5, 13, 't', ',', 'k', ',', '1', '0', ',', '2', '0', ',', '7', ';', 'x'})
	carried := append(make([]byte, 7, 48), 9) // acknowledged tail 9, then the marks
	carried = append(carried, metastore.EncodeProducerMarks([]metastore.ProducerMark{{Producer: [16]byte{1}, BatchSeq: 2, FirstSeq: 3, LastSeq: 4}})...)
	f.Add(append([]byte{byte(slices.Index(fuzzNames, attrCarried)), 2, byte(len(carried))}, carried...))
	f.Add([]byte{byte(30), 2, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := fuzzItem(data)
		if st, err := decodeStream(m); err == nil {
			if again, err := decodeStream(streamAttrs("p", "s", st)); err != nil || !reflect.DeepEqual(again, st) {
				t.Fatalf("stream %+v: again %+v, %v", st, again, err)
			}
		}
		if r, err := decodeRef(m); err == nil {
			if again, err := decodeRef(refAttrs(r)); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("ref %+v: again %+v, %v", r, again, err)
			}
		}
		if h, err := decodeHead(m); err == nil {
			for _, layout := range []uint8{1, 2} {
				again, got, err := decodeHeadLayout(headAttrsIn(layout, metastore.ChainID{Star: "s"}, h))
				if err != nil || got != layout || !reflect.DeepEqual(again, h) {
					t.Fatalf("head %+v in layout %d: again %+v (layout %d), %v", h, layout, again, got, err)
				}
			}
		}
		if e, err := decodeEpoch(m); err == nil {
			if again, err := decodeEpoch(epochAttrs(metastore.ChainID{Star: "s"}, e)); err != nil || !reflect.DeepEqual(again, e) {
				t.Fatalf("epoch %+v: again %+v, %v", e, again, err)
			}
		}
		if l, err := decodeLease(m); err == nil {
			if again, err := decodeLease(leaseAttrs(l)); err != nil || again != l {
				t.Fatalf("lease %+v: again %+v, %v", l, again, err)
			}
		}
		if tk, err := decodeToken(m); err == nil {
			if again, err := decodeToken(tokenAttrs("p", "s", tk)); err != nil || !reflect.DeepEqual(again, tk) {
				t.Fatalf("token %+v: again %+v, %v", tk, again, err)
			}
		}
	})
}
