//go:build !linux

package server

import "net"

// unsentBytes is not known on this platform: only the write timeout
// detects a client that stopped reading.
func unsentBytes(net.Conn) (int, bool) { return 0, false }

// peerWindow is not known on this platform: the stall timeout does not
// apply, the write timeout does.
func peerWindow(net.Conn) (edge uint64, pending int, ok bool) { return 0, 0, false }
