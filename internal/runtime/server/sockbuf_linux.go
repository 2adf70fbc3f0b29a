package server

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unsentBytes is the connection's send queue: bytes written to the socket
// that the peer has not acknowledged (SIOCOUTQ).
func unsentBytes(c net.Conn) (int, bool) {
	raw, ok := rawConn(c)
	if !ok {
		return 0, false
	}
	var n int
	var ierr error
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}

// peerWindow reads the right edge of the peer's receive window, in bytes
// of the stream (bytes it acknowledged plus the window it last
// advertised), and how many bytes written to the socket it has not
// acknowledged yet (TCP_INFO, SIOCOUTQ). A receiver never moves the edge
// back, and moves it forward only as it makes room: while its application
// reads nothing and its buffer no longer grows, the edge stays put.
func peerWindow(c net.Conn) (edge uint64, pending int, ok bool) {
	raw, ok := rawConn(c)
	if !ok {
		return 0, 0, false
	}
	var ti *unix.TCPInfo
	var ierr, qerr error
	err := raw.Control(func(fd uintptr) {
		ti, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		pending, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	})
	if err != nil || ierr != nil || qerr != nil {
		return 0, 0, false
	}
	return ti.Bytes_acked + uint64(ti.Snd_wnd), pending, true
}

func rawConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	return raw, err == nil
}
