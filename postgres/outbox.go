package postgres

import (
	"sync"
	"time"
)

// outbox runs the NOTIFYs a store sends once the statements they announce
// have committed (a claim's keys' next starts, a completion's freed slots,
// the trailing NOTIFY of enqueues), each in a goroutine of its own, and
// lets Store.Close wait for them, and for the claims, completions and
// failures in flight that may hand one over (enter), so that a write that
// commits while the store closes still wakes the other processes.
type outbox struct {
	mu      sync.Mutex
	closing bool           // Close began: no call enters, a send runs only while something is busy
	closed  bool           // Close stopped waiting: no send runs
	busy    int            // sends running and calls entered
	idle    chan struct{}  // closed when busy drops to 0 while closing
	sends   sync.WaitGroup // the send goroutines (waitSends)
}

// enter counts a call that may hand over sends until the function it
// returns is called. A call that comes once Close began is not counted:
// the store must not be used then, and its wake-ups may be lost.
func (o *outbox) enter() (leave func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return func() {}
	}
	o.busy++
	return o.leave
}

func (o *outbox) leave() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.busy--
	if o.busy == 0 && o.idle != nil {
		close(o.idle)
		o.idle = nil
	}
}

// run runs send in a goroutine of its own: before Close, and while Close
// waits for the calls and sends in flight (one of which hands it over).
func (o *outbox) run(send func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.closing && o.busy == 0 {
		return
	}
	o.busy++
	o.sends.Add(1)
	go func() {
		defer o.sends.Done()
		defer o.leave()
		send()
	}()
}

// beginClose lets no more calls enter, and counts Close as busy until
// flushed is called: the sends Close hands over itself (the trailing
// NOTIFY, the due times gathered) then run even with nothing else in
// flight, and a call that hands one over meanwhile sees closingNow.
func (o *outbox) beginClose() (flushed func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closing = true
	o.busy++
	return o.leave
}

// closingNow reports whether Close began: a call's wake-up must then be
// handed over before the call ends, not left to a timer.
func (o *outbox) closingNow() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closing
}

// close lets no more calls enter and waits up to wait for the calls and
// sends in flight; it reports whether they all ended. After it, no send
// starts.
func (o *outbox) close(wait time.Duration) bool {
	o.mu.Lock()
	o.closing = true
	if o.busy == 0 {
		o.closed = true
		o.mu.Unlock()
		return true
	}
	if o.idle == nil {
		o.idle = make(chan struct{})
	}
	idle := o.idle
	o.mu.Unlock()
	ended := true
	select {
	case <-idle:
	case <-time.After(wait):
		ended = false
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	return ended
}

// waitSends waits for the send goroutines to end, once close returned
// (none starts after it): Store.Close calls it after cancelling their
// context, so it waits for no call stuck elsewhere.
func (o *outbox) waitSends() { o.sends.Wait() }

// closeSendWait bounds how long Store.Close waits for the wake-ups still
// being sent, and the calls in flight that may send one, before it
// cancels the sends: a database that does not answer must not hold a
// stopping process for the sends' own timeouts.
const closeSendWait = time.Second
