//go:build !linux

package server

import "net"

// unsentBytes is not known on this platform: only the write timeout
// detects a client that stopped reading.
func unsentBytes(net.Conn) (int, bool) { return 0, false }
