// Package bolt is an embedded metastore.Store in one bbolt file, for
// `strand dev` and fast tests. It passes the conformance suite in
// metastore/metastoretest.
//
// # Layout
//
// The file holds one bbolt bucket, "items", that mirrors the DynamoDB
// single-table layout of package metastore: an item's key is its partition
// key, a NUL byte, and its sort key, built with the key helpers of package
// metastore:
//
//	STREAM#<name>\x00META            metastore.Stream
//	SID#<id>\x00REF#<20-digit seq>   metastore.Ref
//	CHAIN#<star>#<class>\x00HEAD     metastore.Head
//	CHAIN#<star>#<class>\x00EPOCH#<20-digit epoch>   metastore.Epoch
//	TOKEN#<sha256-hex>\x00META       metastore.Token
//
// Values are the JSON encoding of the metastore types (Go field names as
// keys). Stream names hold no control characters, so byte order of the keys
// is name order, and the zero-padded numbers make it seq order. A bucket
// "format" holds the key "version" = "1"; Open refuses any other version.
// This is a development store: the format may change with a new version
// number, never silently.
//
// # Atomicity and durability
//
// Every method runs in one bbolt transaction: reads in View, every write
// (and every compare-and-set with its read) in one Update, which bbolt
// serialises and fsyncs before returning. So CreateStream, SwapRefs,
// AdvanceCursor, MintEpoch and UpdateEpoch are atomic, and a nil error
// means the change is on disk.
//
// One process opens the file at a time (bbolt takes a file lock); Open gives
// up after a second when another process holds it.
package bolt
