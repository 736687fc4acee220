package clientkey_test

import (
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/route/clientkey"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		spec string
		kind clientkey.Kind
		name string
		hops int
		str  string
	}{
		{"header:X-Api-Key", clientkey.Header, "X-Api-Key", 0, "header:X-Api-Key"},
		{"header:x-api-key", clientkey.Header, "X-Api-Key", 0, "header:X-Api-Key"},
		{"header:Authorization", clientkey.Header, "Authorization", 0, "header:Authorization"},
		{"header:!#$%&'*+-.^_`|~", clientkey.Header, "!#$%&'*+-.^_`|~", 0, "header:!#$%&'*+-.^_`|~"},
		{"query:api_key", clientkey.Query, "api_key", 0, "query:api_key"},
		{"query:Api.Key[]", clientkey.Query, "Api.Key[]", 0, "query:Api.Key[]"},
		{"cookie:session", clientkey.Cookie, "session", 0, "cookie:session"},
		{"cookie:Session", clientkey.Cookie, "Session", 0, "cookie:Session"},
		{"clientIP", clientkey.ClientIP, "", 0, "clientIP"},
		{"forwardedFor:1", clientkey.ForwardedFor, "", 1, "forwardedFor:1"},
		{"forwardedFor:32", clientkey.ForwardedFor, "", 32, "forwardedFor:32"},
		{"header:" + strings.Repeat("a", 256), clientkey.Header, "A" + strings.Repeat("a", 255), 0, "header:A" + strings.Repeat("a", 255)},
	} {
		s, err := clientkey.ParseSource(tc.spec)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", tc.spec, err)
			continue
		}
		if s.Kind() != tc.kind || s.Name() != tc.name || s.Hops() != tc.hops || s.String() != tc.str {
			t.Errorf("ParseSource(%q) = %v %q %d %q, want %v %q %d %q", tc.spec, s.Kind(), s.Name(), s.Hops(), s.String(), tc.kind, tc.name, tc.hops, tc.str)
		}
		if again, err := clientkey.ParseSource(s.String()); err != nil || again != s {
			t.Errorf("ParseSource(%q) = %v, %v, want %v", s.String(), again, err, s)
		}
	}
}

func TestParseSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want string // in the message: what to write instead
	}{
		{"", "write header:NAME, query:NAME, cookie:NAME, clientIP or forwardedFor:N"},
		{"ip", "write header:NAME, query:NAME, cookie:NAME, clientIP or forwardedFor:N"},
		{"path:/x", "is not a key"},
		{"clientip", "write clientIP (the kind is case-sensitive)"},
		{"Header:X-Api-Key", "write header:X-Api-Key (the kind is case-sensitive)"},
		{"forwardedfor:2", "write forwardedFor:2"},
		{"clientIP:1", "clientIP takes no argument"},
		{"header", "write header:NAME, such as header:X-Api-Key"},
		{"header:", "header needs a name"},
		{"query:", "write query:NAME, such as query:api_key"},
		{"cookie", "write cookie:NAME, such as cookie:session"},
		{"header: X-Api-Key", "contains a space"},
		{"header:X-Api-Key ", "contains a space"},
		{" clientIP", "contains a space"},
		{"header:X-Api\r\nKey", "contains a space"},
		{"header:X-Api\x00Key", "contains a space"},
		{"header:X-Ápi", "outside printable ASCII"},
		{"header:X(Api)", "is not a header name"},
		{"header:X:Api", "is not a header name"},
		{"header:" + strings.Repeat("a", 257), "write at most 256"},
		{"header:X-Forwarded-For", "write forwardedFor:N"},
		{"header:forwarded", "write forwardedFor:N"},
		{"header:X-Real-IP", "write forwardedFor:N"},
		{"header:Cookie", "write cookie:NAME"},
		{"header:host", "Host names the service"},
		{"cookie:a=b", "is not a cookie name"},
		{"cookie:a;b", "is not a cookie name"},
		{"query:a&b", "cannot contain"},
		{"query:a=b", "cannot contain"},
		{"query:a%20b", "cannot contain"},
		{"query:a+b", "cannot contain"},
		{"forwardedFor", "write forwardedFor:1 for one (1 to 32)"},
		{"forwardedFor:", "needs the number of trusted proxies"},
		{"forwardedFor:0", "trusts no proxy; write clientIP"},
		{"forwardedFor:00", "trusts no proxy"},
		{"forwardedFor:33", "at most 32 trusted proxies"},
		{"forwardedFor:99999999999999999999999", "at most 32 trusted proxies"},
		{"forwardedFor:-1", "a whole number from 1 to 32"},
		{"forwardedFor:+1", "a whole number from 1 to 32"},
		{"forwardedFor:1.5", "a whole number from 1 to 32"},
		{"forwardedFor:x", "a whole number from 1 to 32"},
		{"forwardedFor:01", "write forwardedFor:1, without the leading zero"},
		{"forwardedFor:1:2", "a whole number"},
	} {
		s, err := clientkey.ParseSource(tc.spec)
		if err == nil {
			t.Errorf("ParseSource(%q) = %v, want an error", tc.spec, s)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSource(%q): got %q, want it to contain %q", tc.spec, err, tc.want)
		}
		if s != (clientkey.Source{}) {
			t.Errorf("ParseSource(%q) = %v with its error, want the zero Source", tc.spec, s)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[clientkey.Kind]string{0: "Kind(0)", clientkey.Header: "header", clientkey.ForwardedFor: "forwardedFor", 6: "Kind(6)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
