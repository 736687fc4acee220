package clientkey

import (
	"cmp"
	"errors"
	"net/netip"
	"strings"
)

// The bounds of what forwardedKey reads of X-Forwarded-For, from the
// right: at most maxElements elements (empty ones included), each at most
// maxElementBytes long with the spaces around it. The longest address an
// element may hold, "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535",
// is 53 bytes; an element longer than maxElementBytes is not an address.
const (
	maxElements     = 2 * MaxHops
	maxElementBytes = 64
)

// peerKey is the key of the TCP peer, from Request.RemoteAddr ("ip:port",
// "[ip6%zone]:port", or a bare address): the address in canonical form,
// without the port, IPv4-mapped IPv6 unmapped, with its zone (fe80::1 on
// two interfaces is two hosts).
func peerKey(remote string) (string, bool) {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		host := remote[:strings.LastIndexByte(remote, ':')]
		if len(host) > 1 && host[0] == '[' {
			host = host[1 : len(host)-1]
		}
		return canonical(ap.Addr(), host), true
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return canonical(a, remote), true
	}
	return "", false
}

// canonical is a's canonical text, unmapped; raw itself when raw is
// already that text, so that the common case allocates nothing.
func canonical(a netip.Addr, raw string) string {
	var buf [64]byte
	b := a.Unmap().AppendTo(buf[:0])
	if string(b) == raw {
		return raw
	}
	return string(b)
}

// forwardedKey is the key of X-Forwarded-For for hops trusted proxies:
// the hops-th address from the right of the header's elements, every line
// of it in order, or ok=false when an element from the rightmost to that
// one is not an address, when there are fewer than hops addresses, or when
// a bound is reached before it.
func forwardedKey(lines []string, hops int) (string, bool) {
	sc := xffScanner{lines: lines, li: len(lines)}
	return sc.nth(hops)
}

// nth is the key of the hops-th address from the right (forwardedKey).
func (sc *xffScanner) nth(hops int) (string, bool) {
	for n := 0; ; {
		elem, ok := sc.prev()
		if !ok {
			return "", false
		}
		if elem == "" {
			continue // an empty list element, which RFC 9110 §5.6.1 ignores
		}
		a, ok := parseElement(elem)
		if !ok {
			return "", false
		}
		if n++; n == hops {
			return canonical(a, elem), true
		}
	}
}

// xffScanner walks the comma-separated elements of header lines from the
// right, within the bounds maxElements and maxElementBytes.
type xffScanner struct {
	lines  []string
	li     int    // index of the line being read; len(lines) before the first
	rest   string // what is left of it, to the left of the elements read
	inLine bool   // whether rest belongs to line li
	looked int    // elements returned so far
	read   int    // bytes examined so far, for tests of the bounds
}

// prev is the next element to the left, spaces and tabs around it
// removed, or ok=false when there is none or a bound is reached.
func (sc *xffScanner) prev() (elem string, ok bool) {
	if !sc.inLine {
		if sc.li--; sc.li < 0 {
			return "", false
		}
		sc.rest, sc.inLine = sc.lines[sc.li], true
	}
	if sc.looked++; sc.looked > maxElements {
		return "", false
	}
	window := sc.rest
	if len(window) > maxElementBytes+1 {
		window = window[len(window)-maxElementBytes-1:]
	}
	sc.read += len(window)
	i := strings.LastIndexByte(window, ',')
	if i < 0 {
		if len(sc.rest) > maxElementBytes {
			return "", false
		}
		elem, sc.rest, sc.inLine = sc.rest, "", false
		return trimOWS(elem), true
	}
	i += len(sc.rest) - len(window)
	elem, sc.rest = sc.rest[i+1:], sc.rest[:i]
	return trimOWS(elem), true
}

// parseElement reads one element of X-Forwarded-For as an address: an IP
// address as net/netip.ParseAddr reads it, or with a port in the forms
// some proxies write, "[ip6]:port", "[ip6]" and "ip4:port" (the port is
// dropped: a client's source ports are not clients). Zones are refused: a
// proxy forwards addresses, not interfaces of its own. The shape of e
// chooses the one parser to try, and bytes no address has are refused
// before any, so that garbage costs no allocation.
func parseElement(e string) (netip.Addr, bool) {
	if len(e) == 0 || len(e) > maxElementBytes {
		return netip.Addr{}, false
	}
	for i := 0; i < len(e); i++ {
		if !addrByte[e[i]] {
			return netip.Addr{}, false
		}
	}
	var a netip.Addr
	var err error
	switch {
	case e[0] == '[' && e[len(e)-1] == ']':
		a, err = netip.ParseAddr(e[1 : len(e)-1])
		err = cmp.Or(err, refuse(a.Is4()))
	case e[0] == '[' || strings.Count(e, ":") == 1:
		a, err = parseHostPort(e)
	default:
		a, err = netip.ParseAddr(e)
	}
	return a.Unmap(), err == nil
}

// parseHostPort reads "[ip6]:port" or "ip4:port" as netip.ParseAddrPort
// does, and refuses brackets around IPv4 and IPv6 without them; it reads
// the port itself, so that a bad one costs no allocation.
func parseHostPort(e string) (netip.Addr, error) {
	i := strings.LastIndexByte(e, ':')
	if i < 0 {
		return netip.Addr{}, errRefused
	}
	host, port := e[:i], e[i+1:]
	bracketed := len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']'
	if bracketed {
		host = host[1 : len(host)-1]
	}
	if !validPort(port) || bracketed != strings.Contains(host, ":") {
		return netip.Addr{}, errRefused
	}
	a, err := netip.ParseAddr(host)
	return a, cmp.Or(err, refuse(a.Is6() != bracketed))
}

// validPort reports whether p is a port as strconv.ParseUint(p, 10, 16)
// reads it: decimal digits, 65535 at most.
func validPort(p string) bool {
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		if n = n*10 + int(p[i]-'0'); n > 65535 {
			return false
		}
	}
	return p != ""
}

// errRefused is parseElement's error for an address in a form it refuses.
var errRefused = errors.New("clientkey: refused form")

func refuse(b bool) error {
	if b {
		return errRefused
	}
	return nil
}

// addrByte is the bytes an element of X-Forwarded-For that parseElement
// accepts may hold: hex digits, dots, colons and brackets.
var addrByte = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEF.:[]" {
		t[c] = true
	}
	return t
}()
