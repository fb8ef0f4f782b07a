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
// "format" holds the key "version": "1", or "2" once a chain's Indexed
// cursor is set; Open refuses any other version. This is a development
// store: the format may change with a new version number, never silently.
//
// # Fencing earlier builds
//
// A bolt file is one process's (below), so builds never share one at the
// same time; but an earlier binary may open a file a later one wrote,
// and a build before the fence (design 014, "Switching a live chain")
// would take a switched chain's indexed passes for refs passes: its
// settle would find no refs there and move the settled cursor over them,
// and trim would delete their slots. So the AdvanceCursor that sets a
// chain's Indexed cursor also writes version "2", in the same
// transaction, and Open moves a version-1 file with such a chain (one
// switched by a build before the fence) to "2". Every build before the
// fence opens only "1" (Open is unchanged since the first version of
// this package) and stops with
//
//	metastore/bolt: open <path>: format version "2", want "1"
//
// while this build opens both, with no other difference (the items are
// the same in both). TestSwitchFencesEarlierBuilds runs that earlier
// check (a frozen copy) against a switched file.
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
// up after a second when another process holds it (ErrLocked), and
// OpenWhenFree waits until that process closes it or exits: the lock is the
// leadership of a strand dev data directory (docs/adr/0050).
package bolt
