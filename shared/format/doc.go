// Package format is strand's on-object byte format: the 60-byte slot
// envelope, records, per-stream segments, the transit bundle (a flight) with
// its footer, the settled object, and the pass index. docs/format.md is the same
// specification in prose; the golden vectors in testdata/ pin it.
//
// These layouts and constants are part of the wire format: objects written
// by one release are read by every later one. Do not change them; add a new
// format version instead. All integers are big-endian. CRCs are CRC-32C
// (Castagnoli).
//
// # Envelope (every slot object begins with it; exactly 60 bytes)
//
//	offset size field
//	0      4    magic "STRN"
//	4      2    format version (1; 2 for a flight with a batch table;
//	            3 with a command table; 4 with a carried table)
//	6      1    kind: 1 flight, 2 poison
//	7      1    reserved, 0
//	8      8    epoch
//	16     8    slot sequence
//	24     16   writer nonce
//	40     8    object size in bytes, envelope included
//	48     4    footer offset (object-absolute)
//	52     4    footer length
//	56     4    CRC-32C of bytes 0..55
//
// A poison is an envelope alone: size 60, footer offset 0 and length 0.
//
// # Record
//
//	0      4    length L of what follows (8 + 2 + headers + body)
//	4      8    timestamp, milliseconds since the Unix epoch (int64)
//	12     2    header count H
//	            H times: 2 name length n, n bytes name, 4 value length v, v bytes value
//	...         body: the remaining bytes of the record
//
// # Segment (one stream's records of one flight, self-checking)
//
//	0      16   stream id
//	16     8    first seq
//	24     4    record count
//	28     4    records length R
//	32     R    records, contiguous seqs from first seq, in arrival order
//	32+R   4    CRC-32C of bytes 0..32+R-1
//
// # Flight (transit bundle)
//
//	0      60   envelope, kind flight
//	60     ...  segments, one per stream, back to back
//	F      ...  footer (F = envelope footer offset)
//
// Footer:
//
//	0      4    entry count N
//	4      56*N entries, in segment order:
//	              0  16 stream id
//	             16   8 first seq
//	             24   4 record count
//	             28   4 segment offset (object-absolute)
//	             32   4 segment length (header, records and CRC)
//	             36   4 segment CRC (equal to the segment's own trailing CRC)
//	             40   8 first record timestamp (ms)
//	             48   8 last record timestamp (ms)
//	4+56N  4    CRC-32C of the footer's bytes before it
//
// Version 2 (VersionBatches) is a flight whose footer also carries the
// batch table, between the entries and the CRC; it is written only when
// some batch of the flight has a producer id (a flight without one is
// version 1, byte for byte, so it costs nothing):
//
//	4+56N  4    batch count B (at least 1)
//	8+56N  40*B batches, in (segment, seq) order, not overlapping:
//	              0  4 footer entry (segment) index
//	              4 16 producer id (not all zero)
//	             20  8 batch sequence
//	             28  8 first seq
//	             36  4 record count (at least 1; inside the segment's seqs)
//	8+56N+40B 4 CRC-32C of the footer's bytes before it
//
// Only producer batches are listed. Poisons and settled objects stay at
// version 1.
//
// Version 3 (VersionCommands) is a flight in which some stream has command
// state (a fencing token or a trim point: commands.go). Its footer holds
// the batch table as in version 2 (count B may be 0), then the command
// table, then the CRC:
//
//	4    entry count C (at least 1)
//	...  C entries, in strictly increasing segment order:
//	       0  4 footer entry (segment) index
//	       4  8 trim point (0: none)
//	      12  1 token length T (at most MaxFenceTokenBytes; a seal
//	            token, ADR 0065, at most MaxSealTokenBytes)
//	      13  T fencing token
//	    13+T  1 has-config (1: a config command set the config)
//	    14+T 10 config: flags (bit 0 uncapped), timestamp mode,
//	            retention ms (8); all zero without has-config
//
// Each entry is its stream's command state after the segment's last record.
// A command record is an ordinary record with exactly one header, whose
// name is empty and whose value names the command (CommandFence,
// CommandTrim, CommandConfig).
//
// Version 4 (VersionCarried) is a flight in which the star carries some
// stream's dedupe table (ADR 0062, carried.go). Its footer holds the batch
// table as in version 2 (B may be 0), the command table as in version 3
// (C may be 0), then the carried table, then the CRC:
//
//	4    entry count K (at least 1, at most N)
//	...  K entries, in strictly increasing segment order:
//	       0  4 footer entry (segment) index
//	       4  4 mark count M (1 to MaxCarriedMarks)
//	       8  8 below: the stream's acknowledged tail when the table was
//	            taken, at most the segment's first seq
//	      16 40*M marks: producer id 16 (not all zero), batch sequence 8,
//	            first seq 8, last seq 8; in seq order, not overlapping,
//	            each below `below`, at most MaxCarriedPerProducer of one
//	            producer
//
// Each entry is the producers' acknowledged batches the star remembered
// when it cut the flight (never a batch in flight).
//
// The footer ends the object: footer offset + footer length = object size.
// A ref stores a segment's object-absolute offset and length, so reading a
// stream's part of a flight is one ranged GET.
//
// # Settled object (one stream's contiguous records, in the settled bucket)
//
//	0      4    magic "STRS"
//	4      2    format version (1)
//	6      1    kind: 3 settled
//	7      1    reserved, 0
//	8      16   stream id
//	24     8    first seq
//	32     8    last seq
//	40     8    first record timestamp (ms)
//	48     8    last record timestamp (ms)
//	56     4    segment length
//	60     4    CRC-32C of bytes 0..59
//	64     ...  one segment holding first seq..last seq
//
// # Pass index (one absorb pass's per-stream index, in the settled bucket)
//
// At PassIndexKey: index/<star>/<class>/<epoch>/<first-slot> (design 014).
// Version 1 (no stream has command state), version 2 (with a command
// table; written exactly when a stream of the pass has command state) and
// version 3 (with a carried table after the command table, which may then
// be empty; written exactly when a stream has a carried table, ADR 0062):
//
//	0      4    magic "STRI"
//	4      2    format version (1, 2 or 3)
//	6      1    kind: 4 pass index
//	7      1    reserved, 0
//	8      8    epoch
//	16     8    first slot of the pass
//	24     8    end slot (exclusive)
//	32     4    stream count N
//	36     4    segment count S
//	40     4    mark count M
//	44     4    plan digest (a run's, a merged run's: in its packs'
//	            keys, PackKey; 0 in a pass index and a run before them)
//	48     72*N streams, in ascending stream id order:
//	              0 16 stream id
//	             16  8 first seq
//	             24  8 last seq
//	             32  8 first record timestamp (ms)
//	             40  8 last record timestamp (ms)
//	             48  8 record bytes
//	             56  4 index of its first segment (segments are in stream order)
//	             60  4 its segment count (0 only for a marker)
//	             64  4 index of its first mark
//	             68  4 its mark count
//	...    32*S segments, per stream in seq order:
//	              0  8 slot
//	              8  8 first seq
//	             16  4 record count (at least 1)
//	             20  4 segment offset in the slot's flight
//	             24  4 segment length
//	             28  4 segment CRC
//	...    40*M producer marks, per stream in seq order:
//	              0 16 producer id (not all zero)
//	             16  8 batch sequence
//	             24  8 first seq
//	             32  8 last seq
//	...    version 2 only: the command table, as a version-3 flight's
//	       (count, at least 1; then per entry the index of its stream
//	       in the stream array, strictly increasing, and the stream's
//	       command state as of its last seq in the pass; version 3:
//	       the count may be 0)
//	...    version 3 only: the carried table, as a version-4 flight's
//	       (entries name streams by their index in the stream array; a
//	       stream's table is the newest of its segments' flights', each
//	       mark at or below its last seq; never on a marker)
//	end-4  4    CRC-32C of every byte before it
//
// A run index (design 014, level 1; RunIndexKey:
// index/<star>/<class>/runs/<epoch>/<first-slot>) has this layout too:
// its segments' slot field names a pack (PackKey, pack n of the run is
// first slot + n, a pack being segments copied back to back, each with
// its CRC), and it may hold markers: a stream with no segment, no bytes,
// no marks and no command state, first seq <= last seq, saying that those
// seqs were flushed behind a ref.
//
// A merged run (design 014, level 2; MergedRunKey:
// index/<star>/<class>/merged/<epoch>/<first-slot>, packs at
// MergedPackKey) has this layout too. Per stream it holds its last marker
// of the runs it merged, if any, then at most one packed entry with one
// segment (the entries' records re-encoded as one segment): a stream may
// appear twice in a row, a marker then a packed entry with later seqs,
// the one exception to the ascending stream id order (FindAll).
//
// A stream's segments have contiguous seqs from its first to its last seq,
// in non-decreasing slot order inside [first slot, end slot); its marks lie
// inside its seqs, in order, not overlapping. A version-1 object's size is
// exactly what the counts say; a version-2 object's command table fills
// what is left before the CRC.
//
// Ranged reads (passrange.go; design 014, "Lookups past the window
// budget"): a reader that needs one stream's entries reads the pieces by
// range instead of the whole object, and decodes each with its own
// decoder: ParsePassHeader (the header: magic, version, kind, reserved
// fields, slot range; its counts locate every table: EntryAt, SegmentAt,
// MarkAt, CommandsAt), ParsePassEntries (a block of the stream table:
// inside the table, ids in order with the marker-then-packed exception,
// each entry's segments and marks inside their tables and continuing the
// previous entry's), ParsePassSegments, ParsePassMarks,
// ParsePassCommandTail (versions 2 and 3: the command table and the CRC
// after it; ParsePassTail also returns version 3's carried table), and
// AssemblePassStreams (the entries joined with their segments, marks,
// command state and, AssemblePassStreamsCarried, carried table, checked as ParsePassIndex checks a whole
// object's streams). The whole-object CRC is not checked on a ranged
// read: a flipped bit inside a piece that keeps every invariant goes
// undetected there (the segment CRC inside each record's location still
// guards the records themselves when they are read).
//
// # Command index (a version 2 run's sidecar, in the settled bucket)
//
// At CommandIndexKey(run key) = the run's key + ".cmdx" (design 014,
// "The command index"), beside a version 2 run or merged run whose
// command table is large: it locates each stream's command entry in the
// run's command table, which readers otherwise read whole (its entries
// vary in size). The run's own format is unchanged (earlier builds read
// it as before, and ignore the sidecar). A pure function of the run's
// bytes (AppendCommandIndex), bound to them:
//
//	0      4    magic "STRX"
//	4      2    format version (1)
//	6      1    kind: 5 command index
//	7      1    reserved, 0
//	8      36   the run's bytes 8..43: epoch, first slot, end slot,
//	            stream count N, segment count, mark count
//	44     4    the run's CRC-32C (its last 4 bytes)
//	48     8    the run's size
//	56     4    reserved, 0
//	60     4    CRC-32C of bytes 0..59
//	64     ...  ceil(N/1024) blocks; block b covers stream table entries
//	            [1024b, min(1024(b+1), N)), n of them
//	            (CommandIndexBlockAt: offset 64 + b*(12+1024)):
//	              0 8 offset in the run's command table (its count
//	                  included: the first entry is at 4) of the first
//	                  entry of a stream at or after 1024b
//	              8 n per stream, its command entry's size (0: none; else
//	                  24 + its token's length, at most 60)
//	            8+n 4 CRC-32C of the run's CRC (4 bytes), b (4 bytes) and
//	                  bytes 0..8+n-1 of the block
//
// Stream table entry i's command entry is at the run's CommandsAt + its
// block's offset + the sizes of the block's streams before it. A reader
// checks, once per run, the header (ParseCommandIndexHeader) against the
// run's header and the run's bytes from size-4 to its end
// (CheckCommandIndexRun: exactly the 4 CRC bytes), each block it reads
// (ParseCommandIndexBlock: its CRC, sizes and offsets inside the table),
// and the entry it reads from the run (ParseCommandEntry: one entry, of
// stream i). An index that fails the first two is another run's or
// corrupt: readers read the table whole instead.
//
// # Limits
//
// Limits count a record's metered size (MeteredSize: the body plus every
// header's name and value). A record is at most MaxRecordBytes (1 MiB)
// metered; a batch holds 1 to MaxBatchRecords records, at most
// MaxBatchMeteredBytes (1 MiB) metered and MaxBatchHeaders headers, so its
// encoding is at most MaxBatchBytes. Header names are at most 65535 bytes.
//
// Readers decode pass index versions 1 to 3, and command index version 1.
//
// Decoders never panic on any input; malformed input yields an error
// matching one of the sentinels (ErrTruncated, ErrMagic, ErrVersion,
// ErrKind, ErrCRC, ErrBounds, ErrMalformed).
package format
