// Package netfault is a TCP proxy for tests that does to connections what
// networks do: it can hold back what a server sends (so a test loses a
// response the server already committed to), add latency, cut
// connections, partition client and server for a while, and leave
// connections half-open on either side, deterministically. It listens on
// 127.0.0.1 only.
package netfault

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"
)

// Proxy forwards every connection it accepts on 127.0.0.1 to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[*link]struct{}
	halfOpen bool          // set by HideClientCloses
	latency  time.Duration // added to every chunk, both ways
	open     chan struct{} // closed while not partitioned
	quit     chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	mu             sync.Mutex
	held           bool
	release        chan struct{} // closed when held ends
	deaf           bool          // half-open: the server side is gone, the client hears nothing
	pumps          int           // copying goroutines still running
}

// Start listens on 127.0.0.1 at a free port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, conns: map[*link]struct{}{}, open: open, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartURL starts a proxy to the host of the database URL rawURL and
// returns it with rawURL pointed at the proxy instead.
func StartURL(rawURL string) (*Proxy, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("netfault: %w", err)
	}
	p, err := Start(u.Host)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			// During a partition a new connection gets no further than
			// the proxy: the client waits, as for a SYN that is dropped.
			if !p.waitOpen(c) {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.serve(c, s)
		}()
	}
}

// waitOpen waits while the proxy is partitioned; false if the proxy
// closed meanwhile.
func (p *Proxy) waitOpen(c net.Conn) bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.quit:
		c.Close()
		return false
	}
}

func (p *Proxy) serve(c, s net.Conn) {
	l := &link{client: c, server: s, release: make(chan struct{}), pumps: 2}
	p.mu.Lock()
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		p.clientToServer(l)
		p.mu.Lock()
		hide := p.halfOpen
		p.mu.Unlock()
		if hide {
			// The server never learns the client left: its side
			// stays open, and what it sends is read and dropped.
			c.Close()
			l.unhold()
		} else {
			l.close()
		}
		p.pumpDone(l)
	}()
	go func() {
		defer p.wg.Done()
		p.serverToClient(l)
		if !l.isDeaf() {
			l.close()
		}
		p.pumpDone(l)
	}()
}

// pumpDone forgets l once both its copying goroutines are done.
func (p *Proxy) pumpDone(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.pumps--
	if l.pumps == 0 {
		delete(p.conns, l)
	}
}

// delay applies the latency and waits out a partition before a chunk is
// passed on.
func (p *Proxy) delay() {
	p.mu.Lock()
	d, open := p.latency, p.open
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	<-open
}

// clientToServer copies the client's bytes to the server until either
// side closes; on a half-open link they are read and dropped.
func (p *Proxy) clientToServer(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			p.delay()
			if !l.isDeaf() {
				if _, werr := l.server.Write(buf[:n]); werr != nil && !l.isDeaf() {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) isDeaf() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deaf
}

// serverToClient copies the server's bytes to the client, pausing while
// the link is held: what the server sends meanwhile waits in the sockets.
func (p *Proxy) serverToClient(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			p.delay()
			l.mu.Lock()
			wait := l.release
			held := l.held
			l.mu.Unlock()
			if held {
				<-wait
			}
			if _, werr := l.client.Write(buf[:n]); werr != nil {
				// The client is gone: keep draining the server side until
				// it closes (it is closed too, unless half-open).
				continue
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) close() {
	l.client.Close()
	l.server.Close()
	l.unhold()
}

func (l *link) unhold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		l.held = false
		close(l.release)
		l.release = make(chan struct{})
	}
}

// HoldResponses holds back, from now on, what the server sends on every
// connection open now; connections opened later flow freely. A held
// connection stays held until it closes or ReleaseAll is called.
func (p *Proxy) HoldResponses() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.mu.Lock()
		l.held = true
		l.mu.Unlock()
	}
}

// ReleaseAll lets every held connection flow again.
func (p *Proxy) ReleaseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.unhold()
	}
}

// HideClientCloses makes the proxy, from now on, keep a connection's server
// side open when its client closes, reading and dropping what the server
// sends, as a network that lost the client's goodbye would: the server
// goes on with what it was doing as if the client were still there. CutAll
// or Close ends those connections.
func (p *Proxy) HideClientCloses() {
	p.mu.Lock()
	p.halfOpen = true
	p.mu.Unlock()
}

// SetLatency delays every chunk of data, both ways, by d from now on (0
// for none). A request and its response each wait d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Partition stops all traffic, both ways, without closing anything, as a
// network that drops every packet would: open connections hang, and new
// ones get no further than the proxy (the client's connect does not
// complete its start-up). Heal lets everything flow again, what waited
// included, as TCP retransmission would.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Heal ends a partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// HalfOpenAll leaves every connection open now half-open, as a server
// host that vanished without a reset (or a middlebox that forgot the
// connection) would: the server side is closed (the server sees the
// client leave and rolls back what was in flight), while the client's
// side stays open and silent: what it sends is dropped and nothing ever
// comes back, until the client gives up on it. New connections work.
func (p *Proxy) HalfOpenAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.mu.Lock()
		l.deaf = true
		l.mu.Unlock()
		l.server.Close()
		l.unhold()
	}
}

// Conns is how many connections the proxy forwards now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// CutAll closes every open connection, both ways.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.close()
	}
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	p.mu.Unlock()
	p.Heal()
	p.CutAll()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
