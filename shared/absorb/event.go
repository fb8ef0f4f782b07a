package absorb

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
)

// ErrEvent: a release event that does not parse or names no valid chain.
// Redelivering it cannot help; the handler reports it as a failed item so
// that it ends in the queue's dead-letter queue, loudly.
var ErrEvent = errors.New("absorb: malformed release event")

// Event is the body of a release event, the JSON message the star publishes
// (SQS FIFO, MessageGroupId = the chain, "star-0/express") after its
// released head moves:
//
//	{"star":"star-0","class":"express","epoch":3,"slot":120}
//
// Slot is the first slot of the epoch not yet released: every slot of the
// epoch below it is committed and acknowledged. Events are idempotent and
// coalesce: a later event supersedes an earlier one, so the star may drop,
// merge or repeat them, and the absorb may see them out of order. The star
// should publish at most one event per chain per publish interval (100 ms
// to 1 s) carrying its latest released head: the absorb runs one pass per
// batch of events, so the event rate bounds the metastore bill.
type Event struct {
	Star  string `json:"star"`
	Class string `json:"class"` // "standard" or "express"
	Epoch uint64 `json:"epoch"`
	Slot  uint64 `json:"slot"`
}

// NewEvent is the event for chain's released head.
func NewEvent(chain metastore.ChainID, released metastore.Cursor) Event {
	return Event{Star: chain.Star, Class: chain.Class.String(), Epoch: released.Epoch, Slot: released.Slot}
}

// Marshal is the event's JSON body.
func (e Event) Marshal() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("absorb: marshal event: %v", err)) // plain struct: cannot fail
	}
	return b
}

// GroupID is the SQS FIFO message group of the event's chain.
func (e Event) GroupID() string { return e.Star + "/" + e.Class }

// Chain is the event's chain.
func (e Event) Chain() (metastore.ChainID, error) {
	cl, err := metastore.ParseClass(e.Class)
	if err != nil {
		return metastore.ChainID{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	c := metastore.ChainID{Star: e.Star, Class: cl}
	if err := metastore.ValidateChain(c); err != nil {
		return metastore.ChainID{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	return c, nil
}

// Released is the event's released head.
func (e Event) Released() metastore.Cursor { return metastore.Cursor{Epoch: e.Epoch, Slot: e.Slot} }

// ParseEvent decodes and checks an event body. Unknown fields are refused
// (a typo must not pass as a zero head).
func ParseEvent(body []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: trailing data", ErrEvent)
	}
	if _, err := e.Chain(); err != nil {
		return Event{}, err
	}
	if e.Epoch == 0 {
		return Event{}, fmt.Errorf("%w: epoch 0 (epochs start at 1)", ErrEvent)
	}
	return e, nil
}
