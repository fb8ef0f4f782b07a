package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Wire constants. Frozen: part of the format.
const (
	EnvelopeSize = 60
	Version      = 1
	// VersionBatches is the flight format whose footer also carries the
	// batch table (each producer batch's producer id and batch seq). A
	// flight without producer batches is written as Version, byte for byte.
	VersionBatches = 2
	// VersionCommands is the flight format whose footer carries, after the
	// batch table (which may then be empty), the command table: the
	// command state (fencing token, trim point) of each segment's stream.
	// Only flights with a stream that has command state use it.
	VersionCommands = 3
	// VersionCarried is the flight format whose footer carries, after the
	// batch and command tables (either may then be empty), the carried
	// table: the dedupe tables of acknowledged batches the star carries
	// for some of its streams (ADR 0062; carried.go). Only flights with a
	// carried table use it.
	VersionCarried = 4
	magic          = "STRN"
)

// Kind is an envelope's kind.
type Kind uint8

const (
	KindFlight  Kind = 1
	KindPoison  Kind = 2
	KindSettled Kind = 3 // settled objects only; never in an envelope
	// KindPassIndex: pass index objects only (design 014); never in an
	// envelope.
	KindPassIndex Kind = 4
	// KindCommandIndex: a run's command index (cmdindex.go) only; never
	// in an envelope.
	KindCommandIndex Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindFlight:
		return "flight"
	case KindPoison:
		return "poison"
	case KindSettled:
		return "settled"
	case KindPassIndex:
		return "pass index"
	case KindCommandIndex:
		return "command index"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC-32C of b.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Nonce identifies one writer incarnation. A writer draws it from its
// (seeded) randomness when it starts an epoch.
type Nonce [16]byte

// Envelope is the fixed 60-byte header of every slot object.
type Envelope struct {
	Kind      Kind
	Epoch     uint64
	Slot      uint64
	Nonce     Nonce
	Size      uint64 // whole object, envelope included
	FooterOff uint32
	FooterLen uint32
	// Version is VersionBatches for a flight whose footer carries a batch
	// table; 0 means version 1 (every poison, and flights without producer
	// batches).
	Version uint16
}

// Poison returns the envelope a fencer writes to kill a slot.
func Poison(epoch, slot uint64, nonce Nonce) Envelope {
	return Envelope{Kind: KindPoison, Epoch: epoch, Slot: slot, Nonce: nonce, Size: EnvelopeSize}
}

// Put writes e into b[0:60]. b must be at least EnvelopeSize long.
func (e Envelope) Put(b []byte) {
	_ = b[EnvelopeSize-1]
	copy(b[0:4], magic)
	v := uint16(Version)
	if e.Version != 0 {
		v = e.Version
	}
	binary.BigEndian.PutUint16(b[4:6], v)
	b[6] = byte(e.Kind)
	b[7] = 0
	binary.BigEndian.PutUint64(b[8:16], e.Epoch)
	binary.BigEndian.PutUint64(b[16:24], e.Slot)
	copy(b[24:40], e.Nonce[:])
	binary.BigEndian.PutUint64(b[40:48], e.Size)
	binary.BigEndian.PutUint32(b[48:52], e.FooterOff)
	binary.BigEndian.PutUint32(b[52:56], e.FooterLen)
	binary.BigEndian.PutUint32(b[56:60], CRC(b[0:56]))
}

// Bytes returns the 60 encoded bytes of e.
func (e Envelope) Bytes() []byte {
	b := make([]byte, EnvelopeSize)
	e.Put(b)
	return b
}

// ParseEnvelope decodes and checks the envelope at the start of b. It is
// what classifies a slot from one bounded read of 60 bytes: it checks magic,
// version, CRC, kind and that the sizes are self-consistent, but not that the
// rest of the object is present.
func ParseEnvelope(b []byte) (Envelope, error) {
	if len(b) < EnvelopeSize {
		return Envelope{}, fmt.Errorf("envelope: %d of %d bytes: %w", len(b), EnvelopeSize, ErrTruncated)
	}
	if string(b[0:4]) != magic {
		return Envelope{}, fmt.Errorf("envelope: magic %q: %w", b[0:4], ErrMagic)
	}
	v := binary.BigEndian.Uint16(b[4:6])
	if v < Version || v > VersionCarried {
		return Envelope{}, fmt.Errorf("envelope: version %d (this build reads %d to %d): %w", v, Version, VersionCarried, ErrVersion)
	}
	if got, want := CRC(b[0:56]), binary.BigEndian.Uint32(b[56:60]); got != want {
		return Envelope{}, fmt.Errorf("envelope: crc %08x, stored %08x: %w", got, want, ErrCRC)
	}
	e := Envelope{
		Kind:      Kind(b[6]),
		Epoch:     binary.BigEndian.Uint64(b[8:16]),
		Slot:      binary.BigEndian.Uint64(b[16:24]),
		Size:      binary.BigEndian.Uint64(b[40:48]),
		FooterOff: binary.BigEndian.Uint32(b[48:52]),
		FooterLen: binary.BigEndian.Uint32(b[52:56]),
	}
	copy(e.Nonce[:], b[24:40])
	if v != Version {
		e.Version = v
	}
	if b[7] != 0 {
		return Envelope{}, fmt.Errorf("envelope: reserved byte %d: %w", b[7], ErrMalformed)
	}
	switch e.Kind {
	case KindPoison:
		if e.Version != 0 {
			return Envelope{}, fmt.Errorf("envelope: poison of version %d: %w", v, ErrVersion)
		}
		if e.Size != EnvelopeSize || e.FooterOff != 0 || e.FooterLen != 0 {
			return Envelope{}, fmt.Errorf("envelope: poison with size %d footer %d/%d: %w", e.Size, e.FooterOff, e.FooterLen, ErrMalformed)
		}
	case KindFlight:
		end := uint64(e.FooterOff) + uint64(e.FooterLen)
		bad := e.FooterLen < footerMinLen || (e.FooterLen-footerMinLen)%footerEntrySize != 0
		switch e.Version {
		case VersionBatches:
			bad = e.FooterLen < footerMinLen+4
		case VersionCommands:
			bad = e.FooterLen < footerMinLen+4+4+commandsFixed
		case VersionCarried:
			bad = e.FooterLen < footerMinLen+4+4+4+carriedEntryFixed+carriedMarkSize
		}
		if e.FooterOff < EnvelopeSize || bad || end != e.Size {
			return Envelope{}, fmt.Errorf("envelope: footer %d+%d in object of %d bytes: %w", e.FooterOff, e.FooterLen, e.Size, ErrBounds)
		}
	default:
		return Envelope{}, fmt.Errorf("envelope: kind %d: %w", b[6], ErrKind)
	}
	return e, nil
}
