package clientkey_test

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

// keyCase is one request and the key a Source must find in it.
type keyCase struct {
	name   string
	header http.Header // the request's headers, names in canonical form
	query  string      // the raw query
	remote string      // RemoteAddr; "192.0.2.1:1234" when empty
	key    string
	ok     bool
}

func (tc keyCase) request() *http.Request {
	r := httptest.NewRequest("GET", "http://svc.example/api", nil)
	r.URL.RawQuery = tc.query
	if tc.header != nil {
		r.Header = tc.header
	}
	if tc.remote != "" {
		r.RemoteAddr = tc.remote
	}
	return r
}

func runKeyCases(t *testing.T, spec string, cases []keyCase) {
	t.Helper()
	src, err := clientkey.ParseSource(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		key, ok := src.Key(tc.request())
		if key != tc.key || ok != tc.ok {
			t.Errorf("%s: %s: Key = %q, %v, want %q, %v", spec, tc.name, key, ok, tc.key, tc.ok)
		}
		if len(key) > clientkey.MaxKeyBytes {
			t.Errorf("%s: %s: key of %d bytes, want at most %d", spec, tc.name, len(key), clientkey.MaxKeyBytes)
		}
	}
}

// long is the key standing for a raw key longer than MaxKeyBytes.
func long(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return "\x00perkey:sha256:" + string(sum[:])
}

func TestHeaderKey(t *testing.T) {
	big := strings.Repeat("k", 300)
	runKeyCases(t, "header:X-Api-Key", []keyCase{
		{name: "absent", key: "", ok: false},
		{name: "one", header: http.Header{"X-Api-Key": {"abc"}}, key: "abc", ok: true},
		{name: "case kept", header: http.Header{"X-Api-Key": {"AbC"}}, key: "AbC", ok: true},
		{name: "other header", header: http.Header{"X-Api-Keys": {"abc"}}, key: "", ok: false},
		{name: "empty", header: http.Header{"X-Api-Key": {""}}, key: "", ok: false},
		{name: "only spaces", header: http.Header{"X-Api-Key": {" \t "}}, key: "", ok: false},
		{name: "spaces trimmed", header: http.Header{"X-Api-Key": {" \tabc \t"}}, key: "abc", ok: true},
		{name: "inner spaces kept", header: http.Header{"X-Api-Key": {"a b"}}, key: "a b", ok: true},
		{name: "comma is part of the key", header: http.Header{"X-Api-Key": {"abc, def"}}, key: "abc, def", ok: true},
		{name: "two equal lines", header: http.Header{"X-Api-Key": {"abc", " abc"}}, key: "abc", ok: true},
		{name: "two lines differ", header: http.Header{"X-Api-Key": {"abc", "def"}}, key: clientkey.Conflicting, ok: true},
		{name: "empty then key", header: http.Header{"X-Api-Key": {"", "abc"}}, key: clientkey.Conflicting, ok: true},
		{name: "key then empty", header: http.Header{"X-Api-Key": {"abc", ""}}, key: clientkey.Conflicting, ok: true},
		{name: "64 equal lines", header: http.Header{"X-Api-Key": repeat("abc", 64)}, key: "abc", ok: true},
		{name: "65 equal lines", header: http.Header{"X-Api-Key": repeat("abc", 65)}, key: clientkey.Conflicting, ok: true},
		{name: "CR LF smuggled", header: http.Header{"X-Api-Key": {"abc\r\nX-Api-Key: def"}}, key: "abc\r\nX-Api-Key: def", ok: true},
		{name: "NUL", header: http.Header{"X-Api-Key": {"a\x00b"}}, key: "a\x00b", ok: true},
		{name: "256 bytes kept", header: http.Header{"X-Api-Key": {big[:256]}}, key: big[:256], ok: true},
		{name: "257 bytes hashed", header: http.Header{"X-Api-Key": {big[:257]}}, key: long(big[:257]), ok: true},
		{name: "long keys differ at the end", header: http.Header{"X-Api-Key": {big + "x"}}, key: long(big + "x"), ok: true},
		{name: "1 MiB", header: http.Header{"X-Api-Key": {strings.Repeat("z", 1<<20)}}, key: long(strings.Repeat("z", 1<<20)), ok: true},
	})
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestQueryKey(t *testing.T) {
	runKeyCases(t, "query:api_key", []keyCase{
		{name: "absent", query: "", key: "", ok: false},
		{name: "one", query: "api_key=abc", key: "abc", ok: true},
		{name: "among others", query: "a=1&api_key=abc&b=2", key: "abc", ok: true},
		{name: "no value", query: "api_key", key: "", ok: false},
		{name: "empty value", query: "api_key=", key: "", ok: false},
		{name: "escaped value", query: "api_key=a%2Bb+c", key: "a+b c", ok: true},
		{name: "escaped name", query: "api%5Fkey=abc", key: "abc", ok: true},
		{name: "name case matters", query: "API_KEY=abc", key: "", ok: false},
		{name: "bad escape skipped", query: "api_key=%zz&api_key=abc", key: "abc", ok: true},
		{name: "semicolon pair skipped", query: "api_key=abc;x=1", key: "", ok: false},
		{name: "semicolon pair skipped, other kept", query: "api_key=abc;x=1&api_key=def", key: "def", ok: true},
		{name: "repeated equal", query: "api_key=abc&api_key=abc", key: "abc", ok: true},
		{name: "repeated equal once unescaped", query: "api_key=abc&api_key=%61bc", key: "abc", ok: true},
		{name: "repeated differ", query: "api_key=abc&api_key=def", key: clientkey.Conflicting, ok: true},
		{name: "repeated, one empty", query: "api_key=abc&api_key", key: clientkey.Conflicting, ok: true},
		{name: "value with =", query: "api_key=a=b", key: "a=b", ok: true},
		{name: "NUL and CR LF escaped", query: "api_key=a%00%0D%0Ab", key: "a\x00\r\nb", ok: true},
		{name: "empty pairs", query: "&&api_key=abc&&", key: "abc", ok: true},
		{name: "10,000 parameters", query: strings.Repeat("x=1&", 9999) + "api_key=abc", key: "abc", ok: true},
		{name: "10,001 parameters", query: strings.Repeat("x=1&", 10000) + "api_key=abc", key: "", ok: false},
	})
}

func TestCookieKey(t *testing.T) {
	c := func(lines ...string) http.Header { return http.Header{"Cookie": lines} }
	runKeyCases(t, "cookie:sid", []keyCase{
		{name: "absent", key: "", ok: false},
		{name: "one", header: c("sid=abc"), key: "abc", ok: true},
		{name: "among others", header: c("a=1; sid=abc; b=2"), key: "abc", ok: true},
		{name: "no spaces", header: c("a=1;sid=abc;b=2"), key: "abc", ok: true},
		{name: "quoted", header: c(`sid="abc"`), key: "abc", ok: true},
		{name: "name case matters", header: c("SID=abc"), key: "", ok: false},
		{name: "prefix of a name", header: c("sidx=abc"), key: "", ok: false},
		{name: "empty", header: c("sid="), key: "", ok: false},
		{name: "no =", header: c("sid"), key: "", ok: false},
		{name: "invalid value skipped", header: c(`sid=a\b; sid=abc`), key: "abc", ok: true},
		{name: "second line", header: c("a=1", "sid=abc"), key: "abc", ok: true},
		{name: "repeated equal", header: c("sid=abc; sid=abc"), key: "abc", ok: true},
		{name: "repeated differ", header: c("sid=abc; sid=def"), key: clientkey.Conflicting, ok: true},
		{name: "repeated across lines", header: c("sid=abc", "sid=def"), key: clientkey.Conflicting, ok: true},
		{name: "3,000 cookies", header: c(strings.Repeat("x=1; ", 2999) + "sid=abc"), key: "abc", ok: true},
		{name: "3,001 cookies", header: c(strings.Repeat("x=1; ", 3000) + "sid=abc"), key: "", ok: false},
	})
}

func TestClientIPKey(t *testing.T) {
	runKeyCases(t, "clientIP", []keyCase{
		{name: "IPv4", remote: "192.0.2.1:1234", key: "192.0.2.1", ok: true},
		{name: "IPv6", remote: "[2001:db8::1]:1234", key: "2001:db8::1", ok: true},
		{name: "IPv6 spelled long", remote: "[2001:DB8:0:0::1]:1234", key: "2001:db8::1", ok: true},
		{name: "IPv4-mapped", remote: "[::ffff:192.0.2.1]:1234", key: "192.0.2.1", ok: true},
		{name: "zone kept", remote: "[fe80::1%eth0]:1234", key: "fe80::1%eth0", ok: true},
		{name: "bare address", remote: "192.0.2.1", key: "192.0.2.1", ok: true},
		{name: "unix socket", remote: "@", key: "", ok: false},
		{name: "port out of range", remote: "192.0.2.1:99999", key: "", ok: false},
		{name: "host name", remote: "localhost:80", key: "", ok: false},
		{name: "leading zeros", remote: "192.0.02.1:80", key: "", ok: false},
		{name: "XFF ignored", header: http.Header{"X-Forwarded-For": {"203.0.113.9"}}, remote: "192.0.2.1:1", key: "192.0.2.1", ok: true},
	})
}

func TestForwardedForKey(t *testing.T) {
	x := func(lines ...string) http.Header { return http.Header{"X-Forwarded-For": lines} }
	runKeyCases(t, "forwardedFor:1", []keyCase{
		{name: "absent", key: "", ok: false},
		{name: "one", header: x("203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "rightmost", header: x("198.51.100.1, 203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "garbage on the left", header: x("<script>, ::: , 203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "rightmost garbage", header: x("203.0.113.9, nope"), key: "", ok: false},
		{name: "rightmost unknown", header: x("203.0.113.9, unknown"), key: "", ok: false},
		{name: "rightmost empty ignored", header: x("203.0.113.9, "), key: "203.0.113.9", ok: true},
		{name: "last line wins", header: x("198.51.100.1", "203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "empty last line ignored", header: x("203.0.113.9", ""), key: "203.0.113.9", ok: true},
		{name: "IPv6", header: x("2001:db8::1"), key: "2001:db8::1", ok: true},
		{name: "IPv6 non-canonical", header: x("2001:0DB8::0:1"), key: "2001:db8::1", ok: true},
		{name: "IPv6 brackets", header: x("[2001:db8::1]"), key: "2001:db8::1", ok: true},
		{name: "IPv6 brackets and port", header: x("[2001:db8::1]:443"), key: "2001:db8::1", ok: true},
		{name: "IPv4 and port", header: x("203.0.113.9:443"), key: "203.0.113.9", ok: true},
		{name: "IPv4-mapped", header: x("::ffff:203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "IPv4-mapped in brackets", header: x("[::ffff:203.0.113.9]:1"), key: "203.0.113.9", ok: true},
		{name: "IPv4 in brackets", header: x("[203.0.113.9]"), key: "", ok: false},
		{name: "IPv4 in brackets and port", header: x("[203.0.113.9]:1"), key: "", ok: false},
		{name: "zone", header: x("fe80::1%eth0"), key: "", ok: false},
		{name: "zone in brackets", header: x("[fe80::1%eth0]:80"), key: "", ok: false},
		{name: "port out of range", header: x("203.0.113.9:65536"), key: "", ok: false},
		{name: "empty port", header: x("203.0.113.9:"), key: "", ok: false},
		{name: "leading zeros", header: x("203.0.113.09"), key: "", ok: false},
		{name: "quoted", header: x(`"203.0.113.9"`), key: "", ok: false},
		{name: "Forwarded syntax", header: x("for=203.0.113.9"), key: "", ok: false},
		{name: "tabs trimmed", header: x("\t203.0.113.9\t"), key: "203.0.113.9", ok: true},
		{name: "CR LF inside", header: x("203.0.113.9\r\n"), key: "", ok: false},
		{name: "Forwarded header ignored", header: http.Header{"Forwarded": {"for=203.0.113.9"}}, key: "", ok: false},
		{name: "10,000 elements", header: x(strings.Repeat("1.1.1.1, ", 9999) + "203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "1 MiB element on the left", header: x(strings.Repeat("a", 1<<20) + ", 203.0.113.9"), key: "203.0.113.9", ok: true},
		{name: "1 MiB rightmost element", header: x("203.0.113.9, " + strings.Repeat("1", 1<<20)), key: "", ok: false},
		{name: "spaces beyond the bound", header: x("203.0.113.9" + strings.Repeat(" ", 60)), key: "", ok: false},
	})
	runKeyCases(t, "forwardedFor:2", []keyCase{
		{name: "too few", header: x("203.0.113.9"), key: "", ok: false},
		{name: "two", header: x("203.0.113.9, 10.0.0.1"), key: "203.0.113.9", ok: true},
		{name: "client's claim on the left", header: x("1.2.3.4, 203.0.113.9, 10.0.0.1"), key: "203.0.113.9", ok: true},
		{name: "across lines", header: x("1.2.3.4, 203.0.113.9", "10.0.0.1"), key: "203.0.113.9", ok: true},
		{name: "a line each", header: x("1.2.3.4", "203.0.113.9", "10.0.0.1"), key: "203.0.113.9", ok: true},
		{name: "garbage at 1", header: x("203.0.113.9, garbage"), key: "", ok: false},
		{name: "garbage at 2", header: x("garbage, 10.0.0.1"), key: "", ok: false},
		{name: "garbage at 3 ignored", header: x("garbage, 203.0.113.9, 10.0.0.1"), key: "203.0.113.9", ok: true},
		{name: "empties ignored", header: x("203.0.113.9,, ,10.0.0.1"), key: "203.0.113.9", ok: true},
		{name: "too many empties", header: x("203.0.113.9" + strings.Repeat(",", 100) + "10.0.0.1"), key: "", ok: false},
		{name: "too many empty lines", header: x(append([]string{"203.0.113.9"}, append(repeat("", 100), "10.0.0.1")...)...), key: "", ok: false},
	})
	elems := make([]string, 32)
	for i := range elems {
		elems[i] = netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}).String()
	}
	runKeyCases(t, "forwardedFor:32", []keyCase{
		{name: "32", header: x(strings.Join(elems, ", ")), key: "10.0.0.0", ok: true},
		{name: "31", header: x(strings.Join(elems[1:], ", ")), key: "", ok: false},
		{name: "32 lines", header: x(elems...), key: "10.0.0.0", ok: true},
	})
}

// TestZeroSource: a Source that was never parsed finds no key.
func TestZeroSource(t *testing.T) {
	r := httptest.NewRequest("GET", "/?a=1", nil)
	if key, ok := (clientkey.Source{}).Key(r); ok || key != "" {
		t.Errorf("zero Source: Key = %q, %v, want \"\", false", key, ok)
	}
}

// TestQueryAgreesWithNetURL: queryKey reads what url.ParseQuery reads.
func TestQueryAgreesWithNetURL(t *testing.T) {
	src, _ := clientkey.ParseSource("query:k")
	for _, q := range []string{
		"k=1", "k=1&k=2", "k=%41", "k=%4", "k=a+b", "k;=1", "k=1;", "%6B=x", "%6b=x&k=x", "k", "k=", "=k", "k==", "k=%00", "k=1&k=%zz",
	} {
		checkQuery(t, src, q)
	}
}

func checkQuery(t *testing.T, src clientkey.Source, q string) {
	t.Helper()
	vals, _ := url.ParseQuery(q)
	want, wantOK := fold(vals["k"])
	key, ok := src.Key(&http.Request{URL: &url.URL{RawQuery: q}})
	if key != want || ok != wantOK {
		t.Errorf("query %q: Key = %q, %v; url.ParseQuery gives %q, so want %q, %v", q, key, ok, vals["k"], want, wantOK)
	}
}

// fold is the repeated-value rule written plainly: no value or only
// empty ones, none; one distinct value, it; several, Conflicting.
func fold(vals []string) (string, bool) {
	if len(vals) > 64 {
		return clientkey.Conflicting, true
	}
	for _, v := range vals {
		if v != vals[0] {
			return clientkey.Conflicting, true
		}
	}
	if len(vals) == 0 || vals[0] == "" {
		return "", false
	}
	if len(vals[0]) > clientkey.MaxKeyBytes {
		return long(vals[0]), true
	}
	return vals[0], true
}

// TestCookieAgreesWithNetHTTP: cookieKey reads what Request.Cookies reads.
func TestCookieAgreesWithNetHTTP(t *testing.T) {
	src, _ := clientkey.ParseSource("cookie:k")
	for _, lines := range [][]string{
		{"k=1"}, {"k=1; k=2"}, {`k="1"`}, {`k="1`}, {`k=""`}, {"k=a b"}, {"k=a,b"}, {" k = 1 "}, {"k=1;;k=1"}, {"k=\x7f"}, {"k=é"},
		{"k=1", "k=1"}, {"\tk=1\r\n"}, {"k"}, {"=k"}, {"k=1=2"},
	} {
		checkCookie(t, src, lines)
	}
}

func checkCookie(t *testing.T, src clientkey.Source, lines []string) {
	t.Helper()
	r := &http.Request{Header: http.Header{"Cookie": lines}}
	var vals []string
	for _, c := range r.Cookies() {
		if c.Name == "k" {
			vals = append(vals, c.Value)
		}
	}
	want, wantOK := fold(vals)
	key, ok := src.Key(r)
	if key != want || ok != wantOK {
		t.Errorf("cookies %q: Key = %q, %v; Request.Cookies gives %q, so want %q, %v", lines, key, ok, vals, want, wantOK)
	}
}

// TestClientIPAgreesWithNetip: the key of every peer address is netip's
// canonical, unmapped form of it.
func TestClientIPAgreesWithNetip(t *testing.T) {
	src, _ := clientkey.ParseSource("clientIP")
	for _, remote := range []string{
		"0.0.0.0:0", "255.255.255.255:65535", "[::]:1", "[::1]:1", "[::ffff:0:0]:1", "[::ffff:1.2.3.4]:1", "[64:ff9b::1.2.3.4]:1",
		"[fe80::1%25eth0]:1", "[FE80::A%en0]:1", "[1:2:3:4:5:6:7:8]:1", "[0:0:0:0:0:0:0:1]:9",
	} {
		ap, err := netip.ParseAddrPort(remote)
		if err != nil {
			t.Fatalf("%s: %v", remote, err)
		}
		key, ok := src.Key(&http.Request{RemoteAddr: remote})
		if want := ap.Addr().Unmap().String(); key != want || !ok {
			t.Errorf("RemoteAddr %q: Key = %q, %v, want %q, true", remote, key, ok, want)
		}
	}
}

// FuzzQuery: for any raw query, Key reads what url.ParseQuery reads.
func FuzzQuery(f *testing.F) {
	for _, q := range []string{"k=1", "k=1&k=2", "k=%zz&k=1", "k;x=1", "%6B=1", "k=a+b", "k=%00%0d%0a", "k=" + strings.Repeat("v", 300)} {
		f.Add(q)
	}
	src, _ := clientkey.ParseSource("query:k")
	f.Fuzz(func(t *testing.T, q string) { checkQuery(t, src, q) })
}

// FuzzCookie: for any Cookie lines (separated by \n), Key reads what
// Request.Cookies reads.
func FuzzCookie(f *testing.F) {
	for _, c := range []string{"k=1", "k=1; k=2", `k="1"`, "a=1;k=2\nk=2", "k=\x00", " k = 1 ", "k=" + strings.Repeat("v", 300)} {
		f.Add(c)
	}
	src, _ := clientkey.ParseSource("cookie:k")
	f.Fuzz(func(t *testing.T, c string) { checkCookie(t, src, strings.Split(c, "\n")) })
}

// FuzzClientIP: for any RemoteAddr, the key is net/netip's canonical,
// unmapped form of the address, or none when netip reads none.
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"192.0.2.1:1", "[::ffff:1.2.3.4]:1", "[fe80::1%eth0]:1", "1.2.3.4", "::1", "@", "", "[::1]:99999", "x:1"} {
		f.Add(s)
	}
	src, _ := clientkey.ParseSource("clientIP")
	f.Fuzz(func(t *testing.T, remote string) {
		var want string
		if ap, err := netip.ParseAddrPort(remote); err == nil {
			want = ap.Addr().Unmap().String()
		} else if a, err := netip.ParseAddr(remote); err == nil {
			want = a.Unmap().String()
		}
		if len(want) > clientkey.MaxKeyBytes {
			want = long(want)
		}
		key, ok := src.Key(&http.Request{RemoteAddr: remote})
		if key != want || ok != (want != "") {
			t.Errorf("RemoteAddr %q: Key = %q, %v, want %q", remote, key, ok, want)
		}
	})
}
