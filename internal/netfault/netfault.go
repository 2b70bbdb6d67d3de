// Package netfault is a TCP proxy for tests that can hold back what a
// server sends, so a test can lose a response the server has already
// committed to, or cut connections, deterministically.
package netfault

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards every connection it accepts on 127.0.0.1 to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[*link]struct{}
	halfOpen bool // set by HideClientCloses
	wg       sync.WaitGroup
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	mu             sync.Mutex
	held           bool
	release        chan struct{} // closed when held ends
}

// Start listens on 127.0.0.1 at a free port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
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
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s, release: make(chan struct{})}
		p.mu.Lock()
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(s, c)
			p.mu.Lock()
			hide := p.halfOpen
			p.mu.Unlock()
			if hide {
				// The server never learns the client left: its side
				// stays open, and what it sends is read and dropped.
				c.Close()
				l.unhold()
				return
			}
			l.close()
		}()
		go func() {
			defer p.wg.Done()
			l.serverToClient()
			l.close()
			p.mu.Lock()
			delete(p.conns, l)
			p.mu.Unlock()
		}()
	}
}

// serverToClient copies the server's bytes to the client, pausing while
// the link is held: what the server sends meanwhile waits in the sockets.
func (l *link) serverToClient() {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
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
	p.CutAll()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
