// Package wake fans "jobs may be claimable" signals out to subscribers.
// Each subscriber has a one-slot channel and sends never block, so a burst
// of signals coalesces into one: a signal means "look again", not "one job".
package wake

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("wake: hub is closed")

// Hub is a set of subscribers. Use New; a Hub is safe for concurrent use.
type Hub struct {
	done chan struct{} // closed by Close

	mu     sync.Mutex
	subs   map[chan struct{}]struct{} // protected by mu
	closed bool                       // protected by mu
}

// New returns an open Hub.
func New() *Hub {
	return &Hub{done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
}

// Subscribe returns a channel that receives a value after each Broadcast
// (coalesced). The channel is closed when ctx ends or the Hub closes.
func (h *Hub) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.done:
		}
		h.remove(ch)
	}()
	return ch, nil
}

func (h *Hub) remove(ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

// Broadcast signals every subscriber without blocking.
func (h *Hub) Broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Close closes every subscriber's channel; later Subscribes fail.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
