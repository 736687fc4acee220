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
// change through ConnState. While a handler runs, its connection counts as
// active.
func Example() {
	lim := connlimit.New(connlimit.Options{Max: 1024})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st := lim.Stats()
			fmt.Fprintf(w, "open %d of %d (active %d), soft limit %d", st.Open(), st.Max, st.Active, connlimit.SoftLimit(st.Max))
		}),
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
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(body))
	// Output: open 1 of 1024 (active 1), soft limit 768
}
