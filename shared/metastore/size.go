package metastore

import (
	"errors"
	"fmt"
	"iter"
)

// ErrTooLarge: an item, a transaction or a key is over one of DynamoDB's
// size limits (see Limits in the package documentation). Every
// implementation refuses such a write with it, before writing anything, so
// that no test passes with a write DynamoDB would refuse. It is not
// retryable: the same write is refused again.
var ErrTooLarge = errors.New("metastore: over a DynamoDB size limit")

// DynamoDB's documented limits (Amazon DynamoDB Developer Guide,
// "Constraints in Amazon DynamoDB" and "DynamoDB item sizes and formats";
// API reference, TransactWriteItems and Query). Sizes are binary: 1 KB is
// 1024 bytes.
const (
	// MaxItemBytes: an item, attribute names and values, is at most 400 KB.
	MaxItemBytes = 400 * 1024
	// MaxTxItems: a TransactWriteItems call holds at most 100 actions.
	MaxTxItems = 100
	// MaxTxBytes: the aggregate size of the items in one transaction is at
	// most 4 MB.
	MaxTxBytes = 4 * 1024 * 1024
	// MaxQueryBytes: one Query call returns at most 1 MB of items.
	MaxQueryBytes = 1024 * 1024
	// MaxPKBytes and MaxSKBytes: a partition key value is at most 2048
	// bytes, a sort key value at most 1024.
	MaxPKBytes = 2048
	MaxSKBytes = 1024
)

// Strand's own bounds, well inside DynamoDB's.
const (
	// MaxRefBytes bounds one ref item (RefSize): absorb splits a stream's
	// run of segments into several refs to stay under it, so an item is far
	// from 400 KB and a page of refs stays small.
	MaxRefBytes = 64 * 1024
	// MaxTxRefBytes bounds the refs of one PutRefs transaction (sum of
	// RefSize): under MaxTxBytes with a margin for the head's condition
	// check.
	MaxTxRefBytes = MaxTxBytes - 64*1024
	// MaxStarLen bounds a star id, in bytes, so that a chain's partition
	// key stays far under MaxPKBytes.
	MaxStarLen = 256
)

// Upper bounds of DynamoDB's size accounting ("DynamoDB item sizes and
// formats"): a string is its UTF-8 bytes, a number at most 1 byte per two
// significant digits plus 1 (21 digits at most here: 12 bytes; counted as
// 21), a Boolean 1 byte, a list or map 3 bytes plus 1 per element; every
// attribute also counts its name. The estimates below are at least what
// DynamoDB counts for the items metastore/dynamo writes (its tests check
// that), so a write they accept is one DynamoDB accepts.
const (
	numBytes = 21
	// refFixedBytes: PK "SID#"+id less the id, SK "REF#"+20 digits,
	// StreamID less the id, 5 numbers, the 64-hex Sum, the Locations list
	// overhead and every attribute name, rounded up.
	refFixedBytes = 4 + 24 + 5*numBytes + 64 + 3 + 64 + 128
	// locFixedBytes: one list element (1), the map (3), 5 entries (1
	// each), the names Settled, Key, Offset, Length, FirstSeq, a Boolean
	// and 3 numbers, rounded up.
	locFixedBytes = 1 + 3 + 5 + 7 + 3 + 6 + 6 + 8 + 1 + 3*numBytes + 16
)

// LocationSize is an upper bound of one location's share of a ref item.
func LocationSize(l Location) int { return locFixedBytes + len(l.Key) }

// RefSize is an upper bound of the DynamoDB size of r's item, producer
// marks included (what a transaction's aggregate counts).
func RefSize(r Ref) int { return refLocSize(r) + marksSize(r) + carriedSize(r) + commandsSize(r) }

// carriedSize is the carried table's share of a ref item: one binary
// attribute, at most MaxRefProducerMarks marks, so 40 KiB at most.
func carriedSize(r Ref) int {
	if len(r.Carried) == 0 {
		return 0
	}
	return len("Carried") + 8 + len(r.Carried)*ProducerMarkSize
}

// commandsSize is the command state's share of a ref item: one binary
// attribute, at most 8+1+format.MaxSealTokenBytes bytes.
func commandsSize(r Ref) int {
	if r.Commands == nil {
		return 0
	}
	return len("Commands") + 9 + len(r.Commands.FenceToken)
}

// refLocSize is RefSize without the producer marks: what MaxRefBytes
// bounds (absorb splits a stream's run of segments by it).
func refLocSize(r Ref) int {
	n := refFixedBytes + 2*len(r.StreamID)
	for _, l := range r.Locations {
		n += LocationSize(l)
	}
	return n
}

// marksSize is the producer marks' share of a ref item: one binary
// attribute (its name and ProducerMarkSize bytes a mark), at most
// MaxRefProducerMarks marks, so 40 KiB at most.
func marksSize(r Ref) int {
	if len(r.Producers) == 0 {
		return 0
	}
	return len("Producers") + len(r.Producers)*ProducerMarkSize
}

// CheckRefSize refuses with ErrTooLarge a ref whose locations are over
// MaxRefBytes. Its producer marks and carried table are bounded apart
// (validateMarks: at most MaxRefProducerMarks each, ErrInvalid), so an
// item is at most MaxRefBytes + 80 KiB, far under MaxItemBytes.
func CheckRefSize(r Ref) error {
	if n := refLocSize(r); n > MaxRefBytes {
		return fmt.Errorf("%w: ref %s@%d: %d locations, %d bytes as an item, over %d (split it)",
			ErrTooLarge, r.StreamID, r.FirstSeq, len(r.Locations), n, MaxRefBytes)
	}
	return nil
}

// RefChunks splits a PutRefs batch into the transactions DynamoDB takes:
// at most MaxPutRefsPerTx refs and MaxTxRefBytes (sum of RefSize) each, in
// order. Every ref must pass CheckRefSize.
func RefChunks(refs []Ref) iter.Seq[[]Ref] {
	return func(yield func([]Ref) bool) {
		start, bytes := 0, 0
		for i, r := range refs {
			n := RefSize(r)
			if i > start && (i-start == MaxPutRefsPerTx || bytes+n > MaxTxRefBytes) {
				if !yield(refs[start:i]) {
					return
				}
				start, bytes = i, 0
			}
			bytes += n
		}
		if start < len(refs) {
			yield(refs[start:])
		}
	}
}

// itemStrings is an upper bound of an item holding these strings and
// fields other numbers, Booleans and names (fixed): the strings' bytes
// plus fixed.
func itemStrings(fixed int, strs ...string) int {
	n := fixed
	for _, s := range strs {
		n += len(s) + 1 // +1: a list element, when it is one
	}
	return n
}

// checkItem refuses an item over MaxItemBytes.
func checkItem(what string, n int) error {
	if n > MaxItemBytes {
		return fmt.Errorf("%w: %s: %d bytes as an item, over %d", ErrTooLarge, what, n, MaxItemBytes)
	}
	return nil
}

// fixed share of a stream, token or epoch item: keys' fixed parts,
// attribute names, numbers and list overheads, rounded up.
const otherFixedBytes = 512

// EpochSize is an upper bound of the DynamoDB size of e's item on chain c.
func EpochSize(c ChainID, e Epoch) int {
	return itemStrings(otherFixedBytes+16+len(ChainPK(c)), e.Buckets...)
}

// TokenSize is an upper bound of the DynamoDB size of t's item (and of its
// listing item).
func TokenSize(t Token) int {
	return itemStrings(otherFixedBytes+2*len(t.Hash)+len("Parent")+len(t.Parent)+len(t.Prefix)+len(t.Description)+2*(numBytes+len("ExpiresMs"))+
		len("StartsTenant")+1+2*(numBytes+len("AppendBytesPerSec")), t.Ops...)
}

// QueryPage cuts refs read in key order by one Query to the page DynamoDB
// returns: at most limit refs, and it stops after the ref with which the
// refs read reach MaxQueryBytes (by RefSize, an upper bound of DynamoDB's
// count, so a page is never longer than DynamoDB's). DynamoDB stops a
// Query "if the processed dataset size exceeds 1 MB before DynamoDB
// reaches this limit" and returns what it read with a LastEvaluatedKey
// (API reference, Query, Limit); the ref that crosses is returned, so a
// page is never empty while refs remain. Every implementation cuts
// QueryRefs' forward read with it, so a page may be short of limit while
// more refs follow (see QueryRefs in the package documentation).
func QueryPage(refs []Ref, limit int) []Ref {
	refs = refs[:min(len(refs), max(limit, 0))]
	n := 0
	for i, r := range refs {
		n += RefSize(r)
		if n >= MaxQueryBytes {
			return refs[:i+1]
		}
	}
	return refs
}
