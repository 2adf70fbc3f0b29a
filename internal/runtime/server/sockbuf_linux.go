package server

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unsentBytes is the connection's send queue: bytes written to the socket
// that the peer has not acknowledged (SIOCOUTQ).
func unsentBytes(c net.Conn) (int, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ierr error
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
