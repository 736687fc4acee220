package upstream

import (
	"net/http"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy/h1/h1test"
)

// wire serves /api/wire/...: it takes the connection over from the HTTP
// server and answers this request, and every later one on the connection,
// with h1test.Respond and the fault its fault parameter names, until the
// client goes away or the fault ends the connection. An unknown fault is
// answered 400 and the connection stays the server's.
func wire(w http.ResponseWriter, r *http.Request) {
	f, ok := h1test.Lookup(r.URL.Query().Get("fault"))
	if !ok {
		http.Error(w, "unknown fault "+r.URL.Query().Get("fault"), http.StatusBadRequest)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot take over the connection: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Time{}) // the server's timeouts no longer apply
	if h1test.Respond(c, brw.Reader, r, f) {
		h1test.Serve(c, brw.Reader, f)
	}
}
