package clientkey

import (
	"net/netip"
	"strings"
	"testing"
)

// TestForwardedForBounds: however long X-Forwarded-For is, Key reads at
// most maxElements elements of at most maxElementBytes+1 bytes each, from
// the right.
func TestForwardedForBounds(t *testing.T) {
	huge := strings.Repeat("a", 1<<20)
	for _, tc := range []struct {
		name  string
		lines []string
		hops  int
	}{
		{"10,000 elements", []string{strings.Repeat("1.1.1.1, ", 10000)}, MaxHops},
		{"10,000 empties", []string{"1.1.1.1" + strings.Repeat(",", 10000)}, 1},
		{"10,000 lines", strings.Split(strings.Repeat("1.1.1.1\n", 10000), "\n"), MaxHops},
		{"10,000 empty lines", make([]string, 10000), 1},
		{"1 MiB on the right", []string{"1.1.1.1, " + huge}, 1},
		{"1 MiB of spaces", []string{"1.1.1.1," + strings.Repeat(" ", 1<<20)}, 1},
		{"1 MiB on the left", []string{huge + ", 1.1.1.1"}, 1},
		{"1 MiB of commas", []string{strings.Repeat(",", 1<<20)}, MaxHops},
	} {
		sc := xffScanner{lines: tc.lines, li: len(tc.lines)}
		sc.nth(tc.hops)
		if limit := maxElements * (maxElementBytes + 1); sc.read > limit || sc.looked > maxElements+1 {
			t.Errorf("%s: read %d bytes and %d elements, want at most %d and %d", tc.name, sc.read, sc.looked, limit, maxElements+1)
		}
	}
}

// TestParseElementAgreesWithNetip: a bare element is an address exactly
// when net/netip.ParseAddr reads it without a zone, and then the same one;
// an element with a port is one when netip.ParseAddrPort reads it with
// brackets for IPv6 only.
func TestParseElementAgreesWithNetip(t *testing.T) {
	for _, e := range elementCorpus {
		checkElement(t, e)
	}
}

// elementCorpus is the seed of TestParseElementAgreesWithNetip and of
// FuzzParseElement.
var elementCorpus = []string{
	"", "1.2.3.4", "255.255.255.255", "256.1.1.1", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.4 ", " 1.2.3.4",
	"::", "::1", "::ffff:1.2.3.4", "::FFFF:1.2.3.4", "2001:db8::1", "2001:DB8::1", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9",
	"fe80::1%eth0", "fe80::1%", "[::1]", "[::1]:80", "[::1]:", "[::1]:65536", "[::1%lo]:80", "[1.2.3.4]", "[1.2.3.4]:80",
	"1.2.3.4:80", "1.2.3.4:0", "1.2.3.4:", "1.2.3.4:65535", "1.2.3.4:65536", "1.2.3.4:080", "::1:80", "[[::1]]", "[]", "[", "]",
	"[::ffff:1.2.3.4]:443", "1.2.3.4%eth0", "unknown", "_hidden", "for=1.2.3.4", "\"1.2.3.4\"", "1.2.3.4\r\n", "x:80",
	"[::1]x", "::1]", "[::1", "0x7f.1", "127.1", "1.2.3.4:8O", "1.2.3.4::80",
}

func checkElement(t *testing.T, e string) {
	t.Helper()
	got, ok := parseElement(e)
	var want netip.Addr
	wantOK := false
	if a, err := netip.ParseAddr(e); err == nil {
		want, wantOK = a.Unmap(), a.Zone() == ""
	} else if len(e) > 2 && e[0] == '[' && e[len(e)-1] == ']' {
		a, err := netip.ParseAddr(e[1 : len(e)-1])
		want, wantOK = a.Unmap(), err == nil && a.Is6() && a.Zone() == ""
	} else if ap, err := netip.ParseAddrPort(e); err == nil {
		want, wantOK = ap.Addr().Unmap(), ap.Addr().Zone() == "" && ap.Addr().Is6() == (e[0] == '[')
	}
	if len(e) > maxElementBytes {
		wantOK = false
	}
	if ok != wantOK || ok && got != want {
		t.Errorf("parseElement(%q) = %v, %v; netip says %v, %v", e, got, ok, want, wantOK)
	}
	if ok && (got.Is4In6() || got.Zone() != "") {
		t.Errorf("parseElement(%q) = %v, want it unmapped and without a zone", e, got)
	}
}

func FuzzParseElement(f *testing.F) {
	for _, e := range elementCorpus {
		f.Add(e)
	}
	f.Fuzz(checkElement)
}
