package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The command index (design 014, "The command index"): a sidecar object
// of a version 2 run or merged run, at CommandIndexKey(the run's key),
// that locates each stream's command entry in the run's command table,
// so that a per-stream lookup reads its stream's command state by range
// (a block of the index, then the entry) instead of the whole table.
// The run's own format is unchanged: builds that do not know the sidecar
// read the run as before, and ignore the sidecar (its key is no run's).
// It is a pure function of the run's bytes (AppendCommandIndex), bound to
// them by the run's CRC and size: a reader checks the binding once per
// run (the run's last 4 bytes, read from the size the index records) and
// every block's CRC, so an index of another run (a copy's plan that lost
// the run's PutIfAbsent) or a corrupt one is refused, never believed.
//
//	0      4    magic "STRX"
//	4      2    format version (1)
//	6      1    kind: 5 command index
//	7      1    reserved, 0
//	8      8    the run's epoch        \
//	16     8    the run's first slot    | as in the run's header
//	24     8    the run's end slot      |
//	32     4    the run's stream count N|
//	36     4    its segment count       |
//	40     4    its mark count         /
//	44     4    the run's CRC-32C (its last 4 bytes)
//	48     8    the run's size in bytes
//	56     4    reserved, 0
//	60     4    CRC-32C of bytes 0..59
//	64     ...  ceil(N/1024) blocks; block b covers stream table entries
//	            [1024b, min(1024(b+1), N)), n of them:
//	              0 8 offset, from the run's command table (its count
//	                  included: the first entry is at 4), of the first
//	                  command entry of a stream at or after 1024b
//	              8 n per stream, the size of its command entry (0: none;
//	                  else 24 to 60: 24 and its token's length)
//	            8+n 4 CRC-32C of the run's CRC, b (4 bytes), and bytes
//	                  0..8+n-1 of the block
//
// A stream's entry is at the run's CommandsAt + the block's offset + the
// sizes of its block's streams before it; it begins with the stream's
// stream table index (ParseCommandEntry checks it).

// Command index layout. Frozen: part of command index version 1.
const (
	CommandIndexVersion = 1
	// CommandIndexBlock is the stream table entries a block covers.
	CommandIndexBlock = 1024
	// CommandIndexHeaderSize is the header's size.
	CommandIndexHeaderSize = cmdxHeaderSize
	cmdxHeaderSize         = 64
	cmdxBlockFixed         = 8 + 4
	maxCommandEntry        = commandsFixed + MaxSealTokenBytes
	commandIndexSuffix     = ".cmdx"
	// MaxCommandEntryBytes bounds a command table entry: the table of a
	// run of N streams is at most 4 + N times this.
	MaxCommandEntryBytes = maxCommandEntry
)

var cmdxMagic = [4]byte{'S', 'T', 'R', 'X'}

// CommandIndexKey is the key of the command index of the run (or merged
// run) at runKey: runKey + ".cmdx". No run, pack or pass key ends so:
// listings of runs skip it (their keys end in a number).
func CommandIndexKey(runKey string) string { return runKey + commandIndexSuffix }

// CommandIndexHeader is a command index's header: the run it indexes.
type CommandIndexHeader struct {
	Run     PassHeader // the run's header (Version: 2)
	RunCRC  uint32     // the run's CRC-32C, its last 4 bytes
	RunSize int64      // the run's size
}

// TableBytes is the size of the run's command table (its count included).
func (h CommandIndexHeader) TableBytes() int64 { return h.RunSize - 4 - h.Run.CommandsAt() }

// Blocks is the index's block count.
func (h CommandIndexHeader) Blocks() uint32 {
	return uint32((uint64(h.Run.Streams) + CommandIndexBlock - 1) / CommandIndexBlock)
}

// BlockAt is where block b of the index of a run whose header is run is,
// and its size: a function of the run's header alone.
func CommandIndexBlockAt(run PassHeader, b uint32) (off, n int64) {
	first := uint64(b) * CommandIndexBlock
	n = int64(min(uint64(run.Streams)-min(first, uint64(run.Streams)), CommandIndexBlock))
	return cmdxHeaderSize + int64(b)*(cmdxBlockFixed+CommandIndexBlock), cmdxBlockFixed + n
}

// CommandIndexSize is the size of the command index of a run whose header
// is run.
func CommandIndexSize(run PassHeader) int64 {
	blocks := (int64(run.Streams) + CommandIndexBlock - 1) / CommandIndexBlock
	return cmdxHeaderSize + blocks*cmdxBlockFixed + int64(run.Streams)
}

// AppendCommandIndex appends the command index of the run (or merged run,
// or pass index) object run to b. run must be a whole, valid version 2
// object (its CRC and command table are checked); a version 1 object has
// no command table and no index: an error matching ErrVersion.
func AppendCommandIndex(b []byte, run []byte) ([]byte, error) {
	h, err := ParsePassHeader(run)
	if err != nil {
		return b, fmt.Errorf("command index: %w", err)
	}
	if h.Version != PassIndexVersionCommands {
		return b, fmt.Errorf("command index of a version %d pass index: %w", h.Version, ErrVersion)
	}
	if int64(len(run)) < h.FixedSize() {
		return b, fmt.Errorf("command index: run of %d bytes, its tables %d: %w", len(run), h.FixedSize(), ErrTruncated)
	}
	body := run[:len(run)-4]
	runCRC := binary.BigEndian.Uint32(run[len(run)-4:])
	if got := CRC(body); got != runCRC {
		return b, fmt.Errorf("command index: run crc %08x, stored %08x: %w", got, runCRC, ErrCRC)
	}
	table := body[h.CommandsAt():]
	if _, err := parseCommandTable(table, int(h.Streams)); err != nil {
		return b, fmt.Errorf("command index: run: %w", err)
	}
	sizes := make([]byte, h.Streams)
	for q := table[4:]; len(q) > 0; {
		size := commandsFixed + int(q[12])
		sizes[binary.BigEndian.Uint32(q[0:4])] = byte(size)
		q = q[size:]
	}
	start := len(b)
	b = append(b, cmdxMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, CommandIndexVersion)
	b = append(b, byte(KindCommandIndex), 0)
	b = append(b, run[8:44]...) // epoch, slots and counts, as the run's header
	b = binary.BigEndian.AppendUint32(b, runCRC)
	b = binary.BigEndian.AppendUint64(b, uint64(len(run)))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, CRC(b[start:]))
	off := uint64(4)
	for blk := uint32(0); uint64(blk)*CommandIndexBlock < uint64(h.Streams); blk++ {
		first := uint64(blk) * CommandIndexBlock
		part := sizes[first:min(first+CommandIndexBlock, uint64(len(sizes)))]
		at := len(b)
		b = binary.BigEndian.AppendUint64(b, off)
		b = append(b, part...)
		b = binary.BigEndian.AppendUint32(b, blockCRC(runCRC, blk, b[at:]))
		for _, s := range part {
			off += uint64(s)
		}
	}
	return b, nil
}

// blockCRC is a block's CRC: of the run's CRC, the block number and the
// block's bytes before its CRC.
func blockCRC(runCRC, blk uint32, body []byte) uint32 {
	var pre [8]byte
	binary.BigEndian.PutUint32(pre[0:4], runCRC)
	binary.BigEndian.PutUint32(pre[4:8], blk)
	return crc32.Update(crc32.Checksum(pre[:], castagnoli), castagnoli, body)
}

// ParseCommandIndexHeader decodes a command index's header from the start
// of b (at least 64 bytes; the rest is not read): magic, version, kind,
// reserved fields, the header's CRC, and a run it can index (version 2,
// a non-empty slot range, at least one stream, a size that holds its
// tables, a command table count and one entry).
func ParseCommandIndexHeader(b []byte) (CommandIndexHeader, error) {
	if len(b) < cmdxHeaderSize {
		return CommandIndexHeader{}, fmt.Errorf("command index header: %d bytes: %w", len(b), ErrTruncated)
	}
	if [4]byte(b[0:4]) != cmdxMagic {
		return CommandIndexHeader{}, fmt.Errorf("command index header: magic %q: %w", b[0:4], ErrMagic)
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != CommandIndexVersion {
		return CommandIndexHeader{}, fmt.Errorf("command index header: version %d: %w", v, ErrVersion)
	}
	if k := Kind(b[6]); k != KindCommandIndex || b[7] != 0 {
		return CommandIndexHeader{}, fmt.Errorf("command index header: kind %d, reserved %d: %w", k, b[7], ErrKind)
	}
	if got, want := CRC(b[:60]), binary.BigEndian.Uint32(b[60:64]); got != want {
		return CommandIndexHeader{}, fmt.Errorf("command index header: crc %08x, stored %08x: %w", got, want, ErrCRC)
	}
	if r := binary.BigEndian.Uint32(b[56:60]); r != 0 {
		return CommandIndexHeader{}, fmt.Errorf("command index header: reserved %d: %w", r, ErrMalformed)
	}
	h := CommandIndexHeader{
		Run: PassHeader{
			Version:   PassIndexVersionCommands,
			Epoch:     binary.BigEndian.Uint64(b[8:16]),
			FirstSlot: binary.BigEndian.Uint64(b[16:24]),
			EndSlot:   binary.BigEndian.Uint64(b[24:32]),
			Streams:   binary.BigEndian.Uint32(b[32:36]),
			Segments:  binary.BigEndian.Uint32(b[36:40]),
			Marks:     binary.BigEndian.Uint32(b[40:44]),
		},
		RunCRC:  binary.BigEndian.Uint32(b[44:48]),
		RunSize: int64(binary.BigEndian.Uint64(b[48:56])),
	}
	if h.Run.EndSlot <= h.Run.FirstSlot || h.Run.Streams == 0 || h.RunSize < 0 || h.TableBytes() < 4+commandsFixed {
		return CommandIndexHeader{}, fmt.Errorf("command index header: run slots %d-%d, %d streams, %d bytes (tables %d): %w",
			h.Run.FirstSlot, h.Run.EndSlot, h.Run.Streams, h.RunSize, h.Run.FixedSize(), ErrMalformed)
	}
	return h, nil
}

// Of reports whether the index whose header is h was made of a run with
// header run: the same header fields but the digest, which the index does
// not hold (the run's CRC, which CheckCommandIndexRun checks, binds it).
func (h CommandIndexHeader) Of(run PassHeader) bool {
	run.Digest = 0
	return h.Run == run
}

// CheckCommandIndexRun checks that the index whose header is h indexes
// the run whose header is run and whose bytes from h.RunSize-4 to its
// end are tail: the same header fields, and tail exactly the 4 bytes of
// the CRC h records (a run of another size gives another tail length).
func CheckCommandIndexRun(h CommandIndexHeader, run PassHeader, tail []byte) error {
	if !h.Of(run) {
		return fmt.Errorf("command index of run %+v, not of %+v: %w", h.Run, run, ErrMalformed)
	}
	if len(tail) != 4 || binary.BigEndian.Uint32(tail) != h.RunCRC {
		return fmt.Errorf("command index of a run of %d bytes with crc %08x: the run's tail from %d is %x: %w", h.RunSize, h.RunCRC, h.RunSize-4, tail, ErrCRC)
	}
	return nil
}

// CommandBlock is one decoded block of a command index.
type CommandBlock struct {
	First uint32 // its first stream table index
	Base  int64  // the offset of its first entry in the command table
	Sizes []byte // per stream from First, its entry's size (0: none)
}

// ParseCommandIndexBlock decodes block blk of the index whose header is
// h from b (exactly the block: CommandIndexBlockAt): its CRC, and every
// size and offset inside the run's command table.
func ParseCommandIndexBlock(h CommandIndexHeader, blk uint32, b []byte) (CommandBlock, error) {
	if blk >= h.Blocks() {
		return CommandBlock{}, fmt.Errorf("command index block %d of %d: %w", blk, h.Blocks(), ErrBounds)
	}
	if _, n := CommandIndexBlockAt(h.Run, blk); int64(len(b)) != n {
		return CommandBlock{}, fmt.Errorf("command index block %d: %d bytes, want %d: %w", blk, len(b), n, ErrTruncated)
	}
	body := b[:len(b)-4]
	if got, want := blockCRC(h.RunCRC, blk, body), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return CommandBlock{}, fmt.Errorf("command index block %d: crc %08x, stored %08x: %w", blk, got, want, ErrCRC)
	}
	cb := CommandBlock{First: blk * CommandIndexBlock, Base: int64(binary.BigEndian.Uint64(body[0:8])), Sizes: body[8:]}
	end := uint64(binary.BigEndian.Uint64(body[0:8]))
	if end < 4 {
		return CommandBlock{}, fmt.Errorf("command index block %d: entries at %d: %w", blk, end, ErrBounds)
	}
	for i, s := range cb.Sizes {
		if s != 0 && (s < commandsFixed || int(s) > maxCommandEntry) {
			return CommandBlock{}, fmt.Errorf("command index block %d: stream %d: entry of %d bytes: %w", blk, cb.First+uint32(i), s, ErrMalformed)
		}
		end += uint64(s)
	}
	if end > uint64(h.TableBytes()) {
		return CommandBlock{}, fmt.Errorf("command index block %d: entries end at %d, the table at %d: %w", blk, end, h.TableBytes(), ErrBounds)
	}
	return cb, nil
}

// Entry locates stream table entry i's command entry in the run whose
// header is run (ok false: the stream has no command state, or i is not
// in the block).
func (cb CommandBlock) Entry(run PassHeader, i uint32) (off, size int64, ok bool) {
	if i < cb.First || uint64(i-cb.First) >= uint64(len(cb.Sizes)) || cb.Sizes[i-cb.First] == 0 {
		return 0, 0, false
	}
	off = run.CommandsAt() + cb.Base
	for _, s := range cb.Sizes[:i-cb.First] {
		off += int64(s)
	}
	return off, int64(cb.Sizes[i-cb.First]), true
}

// ParseCommandEntry decodes one command table entry of the run whose
// header is run, read by range (CommandBlock.Entry): exactly one entry,
// of stream table entry idx.
func ParseCommandEntry(run PassHeader, idx uint32, b []byte) (StreamCommands, error) {
	if len(b) < commandsFixed {
		return StreamCommands{}, fmt.Errorf("command entry of stream %d: %d bytes: %w", idx, len(b), ErrTruncated)
	}
	if size := commandsFixed + int(b[12]); len(b) != size {
		return StreamCommands{}, fmt.Errorf("command entry of stream %d: %d bytes, its token says %d: %w", idx, len(b), size, ErrMalformed)
	}
	if e := binary.BigEndian.Uint32(b[0:4]); e != idx || idx >= run.Streams {
		return StreamCommands{}, fmt.Errorf("command entry of stream %d (of %d) is stream %d's: %w", idx, run.Streams, e, ErrMalformed)
	}
	c, err := DecodeCommands(b[4:])
	if err != nil {
		return StreamCommands{}, fmt.Errorf("command entry of stream %d: %w", idx, err)
	}
	return c, nil
}
