package netfault

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves lines back on 127.0.0.1 until the test ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, bool) {
	t.Helper()
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	line, err := r.ReadString('\n')
	if err != nil {
		return "", false
	}
	return line[:len(line)-1], true
}

func TestHoldResponses(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldR := bufio.NewReader(old)
	if got, ok := roundTrip(t, old, oldR, "a", time.Second); !ok || got != "a" {
		t.Fatalf("before hold: %q %v", got, ok)
	}
	p.HoldResponses()
	if _, ok := roundTrip(t, old, oldR, "b", 200*time.Millisecond); ok {
		t.Fatal("a held connection delivered a response")
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, ok := roundTrip(t, fresh, bufio.NewReader(fresh), "c", time.Second); !ok || got != "c" {
		t.Fatalf("a connection opened after the hold: %q %v", got, ok)
	}
	p.ReleaseAll()
	old.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := oldR.ReadString('\n'); err != nil || line != "b\n" {
		t.Fatalf("after release: %q %v", line, err)
	}
	p.CutAll()
	old.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := oldR.ReadString('\n'); err == nil {
		t.Fatal("a cut connection still works")
	}
}

func TestHideClientCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	gotEOF := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 16)
		for {
			if _, err := c.Read(buf); err != nil {
				close(gotEOF)
				return
			}
			c.Write([]byte("still here\n")) // dropped by the proxy
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.HideClientCloses()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello\n"))
	c.Close()
	select {
	case <-gotEOF:
		t.Fatal("the server saw the client go although the proxy hides closes")
	case <-time.After(300 * time.Millisecond):
	}
	p.CutAll()
	select {
	case <-gotEOF:
	case <-time.After(2 * time.Second):
		t.Fatal("CutAll did not end the half-open connection")
	}
}

func TestLatency(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	if got, ok := roundTrip(t, c, r, "a", 2*time.Second); !ok || got != "a" {
		t.Fatalf("with latency: %q %v", got, ok)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("a round trip took %v with 100ms each way", d)
	}
	p.SetLatency(0)
	// The quickest of five: a latency left behind would add 200 ms to
	// every one, a loaded machine delays only some.
	quickest := time.Hour
	for range 5 {
		start = time.Now()
		if got, ok := roundTrip(t, c, r, "b", time.Second); !ok || got != "b" {
			t.Fatalf("without latency: %q %v", got, ok)
		}
		quickest = min(quickest, time.Since(start))
	}
	if quickest > 100*time.Millisecond {
		t.Fatalf("the quickest of five round trips took %v without latency", quickest)
	}
}

func TestPartitionAndHeal(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldR := bufio.NewReader(old)
	roundTrip(t, old, oldR, "a", time.Second)
	p.Partition()
	if _, ok := roundTrip(t, old, oldR, "b", 200*time.Millisecond); ok {
		t.Fatal("an answer crossed the partition")
	}
	fresh, err := net.Dial("tcp", p.Addr()) // the kernel accepts; nothing gets through
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	freshR := bufio.NewReader(fresh)
	if _, ok := roundTrip(t, fresh, freshR, "c", 200*time.Millisecond); ok {
		t.Fatal("a new connection got through the partition")
	}
	p.Heal()
	old.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := oldR.ReadString('\n'); err != nil || line != "b\n" {
		t.Fatalf("after heal, the old connection: %q %v", line, err)
	}
	fresh.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := freshR.ReadString('\n'); err != nil || line != "c\n" {
		t.Fatalf("after heal, the new connection: %q %v", line, err)
	}
}

func TestHalfOpenAll(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverSawEOF := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						serverSawEOF <- struct{}{}
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip(t, c, r, "a", time.Second)
	p.HalfOpenAll()
	select {
	case <-serverSawEOF:
	case <-time.After(2 * time.Second):
		t.Fatal("the server side was not closed")
	}
	if _, err := c.Write([]byte("b\n")); err != nil {
		t.Fatalf("the client side was closed: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the half-open client got %v, want nothing at all (a timeout)", err)
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, ok := roundTrip(t, fresh, bufio.NewReader(fresh), "c", time.Second); !ok || got != "c" {
		t.Fatalf("a new connection after HalfOpenAll: %q %v", got, ok)
	}
}
