package nodeagent

import (
	"fmt"
	"net"
	"strconv"
	"sync"
)

// IPPool hands out loopback addresses prefix.first … prefix.last as pod
// IPs. Linux routes all of 127.0.0.0/8 to the loopback interface, so each
// address can be listened on with no setup. Addresses are handed out round
// robin, so a pod's address is not reused right after it goes (a client
// still holding it then fails to connect instead of reaching another pod).
type IPPool struct {
	prefix      string
	first, last int

	mu    sync.Mutex
	next  int
	inUse map[string]bool
}

// NewIPPool returns a pool of prefix.first … prefix.last, e.g.
// NewIPPool("127.0.0", 10, 250).
func NewIPPool(prefix string, first, last int) *IPPool {
	return &IPPool{prefix: prefix, first: first, last: last, next: first, inUse: map[string]bool{}}
}

// Allocate returns a free address on which every one of ports can be
// listened on now: other programs on the machine may hold some addresses.
func (p *IPPool) Allocate(ports []int32) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.last - p.first + 1
	for range n {
		ip := p.prefix + "." + strconv.Itoa(p.next)
		p.next++
		if p.next > p.last {
			p.next = p.first
		}
		if p.inUse[ip] || !portsFree(ip, ports) {
			continue
		}
		p.inUse[ip] = true
		return ip, nil
	}
	return "", fmt.Errorf("no free pod IP in %s.%d-%d", p.prefix, p.first, p.last)
}

// Release returns ip to the pool.
func (p *IPPool) Release(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, ip)
}

func portsFree(ip string, ports []int32) bool {
	for _, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
