// Package loopback finds free ports on 127.0.0.1 for tests and benchmarks.
package loopback

import "net"

// FreeAddr returns a 127.0.0.1 address whose port is free right now. The
// port may be taken again before the caller listens on it: callers that can
// retry on "address already in use" do. It panics if loopback cannot be
// listened on at all, which leaves nothing to test.
func FreeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
