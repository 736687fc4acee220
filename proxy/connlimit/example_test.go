package connlimit_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/connlimit"
)

// A server whose connections are bounded: the Limiter wraps the raw
// listener (a tls.NewListener would go around it) and hears every state
// change through ConnState.
func Example() {
	lim := connlimit.New(connlimit.Options{Max: 1024})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ConnState:   lim.ConnState,
		IdleTimeout: 2 * time.Minute,
	}
	go srv.Serve(lim.Listener(ln))
	defer srv.Close()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// The client keeps the connection; the server marks it idle just
	// after the answer is sent.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); lim.Stats().Idle == 0 && time.Now().Before(deadline); {
		<-tick.C
	}
	st := lim.Stats()
	fmt.Printf("open %d of %d (idle %d), soft limit %d\n", st.Open(), st.Max, st.Idle, connlimit.SoftLimit(st.Max))
	// Output: open 1 of 1024 (idle 1), soft limit 768
}
