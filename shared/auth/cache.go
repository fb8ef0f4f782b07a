package auth

import (
	"container/list"
	"time"
)

// lru is a map bounded to max entries that evicts the least recently used.
// Not safe for concurrent use (the Checker's lock guards it).
type lru[V any] struct {
	max   int
	order *list.List // front: most recent; values are *lruEntry[V]
	items map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) put(key string, v V) {
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry[V]).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, val: v})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*lruEntry[V]).key)
	}
}

func (c *lru[V]) remove(key string) {
	if e, ok := c.items[key]; ok {
		c.order.Remove(e)
		delete(c.items, key)
	}
}

// removeIf removes every entry whose value matches.
func (c *lru[V]) removeIf(match func(V) bool) {
	for e := c.order.Front(); e != nil; {
		next := e.Next()
		if en := e.Value.(*lruEntry[V]); match(en.val) {
			c.order.Remove(e)
			delete(c.items, en.key)
		}
		e = next
	}
}

func (c *lru[V]) len() int { return c.order.Len() }

// Rate is a token bucket: Burst lookups at once, refilled at PerSecond.
type Rate struct {
	PerSecond float64
	Burst     int
}

// bucket is a token bucket's state.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill brings b to now under r.
func (b *bucket) refill(r Rate, now time.Time) {
	if b.last.IsZero() {
		b.tokens, b.last = float64(r.Burst), now
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(r.Burst), b.tokens+d.Seconds()*r.PerSecond)
		b.last = now
	}
}
