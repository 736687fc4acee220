package clientkey

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// xffCorpus is hostile X-Forwarded-For values, lines separated by \n.
var xffCorpus = []string{
	"",
	"203.0.113.9",
	"1.2.3.4, 203.0.113.9",
	"1.2.3.4,203.0.113.9\n10.0.0.1",
	"garbage, 203.0.113.9",
	"203.0.113.9, garbage",
	"203.0.113.9\r\nX-Forwarded-For: 6.6.6.6",
	"6.6.6.6\r\n, 203.0.113.9",
	"\"6.6.6.6, 203.0.113.9\"",
	"[2001:db8::1]:443, [::ffff:1.2.3.4], 2001:DB8::2",
	"fe80::1%eth0, 203.0.113.9",
	"203.0.113.9, fe80::1%eth0",
	"unknown, for=1.2.3.4;proto=https",
	",,,,,,,,",
	"\n\n\n\n",
	strings.Repeat("1,", 9999) + "3.3.3.3", // 10,000 elements
	strings.Repeat("a", 10000) + ", 203.0.113.9",
	"203.0.113.9, " + strings.Repeat("9", 10000),
	"203.0.113.9" + strings.Repeat(" ", 1000),
	strings.Repeat("\n", 5000),
	"1.2.3.4:80, 1.2.3.4:65536, [1.2.3.4]:1",
	"\x00\xff\xfe, ::, 0.0.0.0",
}

// refForwarded is forwardedKey written plainly, on every element, with the
// same bounds.
func refForwarded(lines []string, hops int) (string, bool) {
	var elems []string
	for _, l := range lines {
		elems = append(elems, strings.Split(l, ",")...)
	}
	seen := 0
	for i := len(elems) - 1; i >= 0 && len(elems)-i <= maxElements; i-- {
		if len(elems[i]) > maxElementBytes {
			return "", false
		}
		e := strings.Trim(elems[i], " \t")
		if e == "" {
			continue
		}
		a, ok := refElement(e)
		if !ok {
			return "", false
		}
		if seen++; seen == hops {
			return a.String(), true
		}
	}
	return "", false
}

// refElement is parseElement in terms of net/netip alone.
func refElement(e string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(e); err == nil {
		return a.Unmap(), a.Zone() == ""
	}
	if len(e) > 2 && e[0] == '[' && e[len(e)-1] == ']' {
		a, err := netip.ParseAddr(e[1 : len(e)-1])
		return a.Unmap(), err == nil && a.Is6() && a.Zone() == ""
	}
	ap, err := netip.ParseAddrPort(e)
	return ap.Addr().Unmap(), err == nil && ap.Addr().Zone() == "" && ap.Addr().Is6() == (e[0] == '[')
}

// trustedHops makes n addresses as trusted proxies would write them, from
// fuzzed bytes: the spellings vary (IPv4 or IPv6, a port, brackets,
// IPv4-mapped, long form), and the first one's canonical form is the key.
func trustedHops(b []byte, n int) (elems []string, key string) {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	for range n {
		f := next()
		var a netip.Addr
		if f&1 == 0 {
			a = netip.AddrFrom4([4]byte{next(), next(), next(), next()})
		} else {
			var x [16]byte
			for i := range x {
				x[i] = next()
			}
			a = netip.AddrFrom16(x)
		}
		elems = append(elems, spell(a, f>>1))
		if key == "" {
			key = a.Unmap().String()
		}
	}
	return elems, key
}

// spell writes a in one of the forms a proxy may use.
func spell(a netip.Addr, how byte) string {
	switch how % 5 {
	case 1:
		return netip.AddrPortFrom(a, uint16(how)*257).String()
	case 2:
		if a.Is4() {
			return "::ffff:" + a.String()
		}
		return "[" + a.String() + "]"
	case 3:
		return strings.ToUpper(a.StringExpanded())
	case 4:
		return "[" + netip.AddrFrom16(a.As16()).String() + "]:1"
	}
	return a.String()
}

// FuzzForwardedFor: for any header a client sends and any N,
//   - Key never panics, reads a bounded part of the header, and allocates
//     at most once (the canonical key);
//   - its key is refForwarded's: the Nth valid address from the right,
//     never an element left of it;
//   - once N trusted proxies have appended their addresses, in whatever
//     spelling and on the same line or new ones, the key is the first
//     trusted address, whatever the client sent.
func FuzzForwardedFor(f *testing.F) {
	for i, h := range xffCorpus {
		f.Add(h, []byte{byte(i), 203, 0, 113, byte(i), 1, 2, 3, 4, 5}, uint8(i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, client string, trusted []byte, hops, style uint8) {
		n := 1 + int(hops)%MaxHops
		var lines []string
		if client != "" {
			lines = strings.Split(client, "\n")
		}
		src := Source{kind: ForwardedFor, hops: n}
		checkForwarded(t, src, lines)

		elems, want := trustedHops(trusted, n)
		sep := ", "
		if style&2 != 0 {
			sep = ","
		}
		all := append([]string(nil), lines...)
		for i, e := range elems {
			switch {
			case len(all) == 0 || style&1 != 0 && i%2 == 0:
				all = append(all, e)
			default:
				all[len(all)-1] += sep + e
			}
		}
		if got, ok := checkForwarded(t, src, all); got != want || !ok {
			t.Errorf("client %s then trusted %q: Key = %q, %v, want %q, true", clip([]string{client}), elems, got, ok, want)
		}
	})
}

// checkForwarded checks Key on lines against refForwarded and the bounds,
// and returns the key.
func checkForwarded(t *testing.T, src Source, lines []string) (string, bool) {
	t.Helper()
	r := &http.Request{Header: http.Header{"X-Forwarded-For": lines}}
	var key string
	var ok bool
	allocs := testing.AllocsPerRun(1, func() { key, ok = src.Key(r) })
	want, wantOK := refForwarded(lines, src.hops)
	if key != want || ok != wantOK {
		t.Fatalf("X-Forwarded-For %s, forwardedFor:%d: Key = %q, %v, want %q, %v", clip(lines), src.hops, key, ok, want, wantOK)
	}
	if allocs > 1 {
		t.Errorf("X-Forwarded-For %s: %v allocations, want at most 1", clip(lines), allocs)
	}
	sc := xffScanner{lines: lines, li: len(lines)}
	sc.nth(src.hops)
	if limit := maxElements * (maxElementBytes + 1); sc.read > limit {
		t.Errorf("X-Forwarded-For %s: read %d bytes, want at most %d", clip(lines), sc.read, limit)
	}
	return key, ok
}

// FuzzParseSource: ParseSource never panics; a spec it accepts reads back
// from its String to the same Source, and a spec it refuses gets a message
// saying what to write.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{
		"header:X-Api-Key", "query:api_key", "cookie:sid", "clientIP", "forwardedFor:1", "forwardedFor:32",
		"", "header:", "header: X", "header:X\r\nY", "forwardedFor:0", "forwardedFor:33", "forwardedFor:-1",
		"forwardedFor:01", "forwardedFor:99999999999999999999", "clientip", "HEADER:x", "header:X-Forwarded-For",
		"query:a&b", "cookie:a=b", "clientIP:", ":", "::", "\xff", strings.Repeat("header:", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseSource(spec)
		if err != nil {
			if s != (Source{}) || !strings.Contains(err.Error(), "write") {
				t.Errorf("ParseSource(%q) = %v, %q; want the zero Source and a message saying what to write", spec, s, err)
			}
			return
		}
		again, err := ParseSource(s.String())
		if err != nil || again != s {
			t.Errorf("ParseSource(%q) = %v; ParseSource(%q) = %v, %v", spec, s, s.String(), again, err)
		}
		if s.kind < Header || s.kind > ForwardedFor || s.hops < 0 || s.hops > MaxHops || len(s.name) > maxNameBytes {
			t.Errorf("ParseSource(%q) = %+v, out of range", spec, s)
		}
	})
}

// clip is lines for a failure message, each cut to its last 200 bytes
// (the part Key reads) and at most the last 8 lines.
func clip(lines []string) string {
	var b strings.Builder
	if len(lines) > 8 {
		fmt.Fprintf(&b, "(%d lines, the last 8) ", len(lines))
		lines = lines[len(lines)-8:]
	}
	for _, l := range lines {
		if len(l) > 200 {
			fmt.Fprintf(&b, "[%d bytes ...]", len(l)-200)
			l = l[len(l)-200:]
		}
		fmt.Fprintf(&b, "%q ", l)
	}
	return b.String()
}
