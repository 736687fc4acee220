package proxy

import (
	"net/http"
	"reflect"
)

// h2ExpectsContinue reports whether r is an HTTP/2 request whose client
// sent Expect: 100-continue and waits for a 100 before it sends its body.
//
// Over HTTP/1.1 the header reaches the handler and goes to the upstream
// as any other, and the server sends 100 when the body is first read: the
// upstream's transport reads it only once the upstream asked for it. Over
// HTTP/2, net/http's server removes the header and keeps the expectation
// in its body (a 100 is sent on the first read), so the upstream would be
// sent the request without it, its transport would read the body at once,
// and the client would be sent 100 and upload a body the upstream may
// refuse unread. This reads that mark, an unexported field of the
// server's body, so that forward can give the upstream the header back.
// Where the mark is not found (a body not the server's, or another Go
// version: TestH2ExpectMarkFound fails then), it reports false, and the
// body goes as through a bare ReverseProxy.
func h2ExpectsContinue(r *http.Request) bool {
	if r.ProtoMajor != 2 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || r.Header.Get("Expect") != "" {
		return false
	}
	v := reflect.ValueOf(r.Body)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	mark := v.Elem().FieldByName("needsContinue")
	return mark.IsValid() && mark.Kind() == reflect.Bool && mark.Bool()
}
