package admin

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/sds-proxy/sds-proxy/proxy"
)

// Switches are the operators' switches of the request path, which the
// admin port sets, clears and shows. *proxy.Handler implements it.
type Switches interface {
	// Force sets point's switch (proxy.Handler.Force).
	Force(point string, action proxy.ForceAction, ttl time.Duration, reason string) (proxy.Force, error)
	// Unforce ends point's switch and returns it, ending now; ok is
	// false when it had none.
	Unforce(point string) (f proxy.Force, ok bool)
	// Forces returns the switches in force at now, in config order.
	Forces(now time.Time) []proxy.Force
}

// MaxForceBody bounds the body of POST /points/{name}/force, in bytes.
const MaxForceBody = 4 << 10

// forceRequest is the body of POST /points/{name}/force.
type forceRequest struct {
	Action string `json:"action"`
	TTL    string `json:"ttl"`
	Reason string `json:"reason"`
}

func forced(f proxy.Force) *Switch {
	return &Switch{Point: f.Point, Action: f.Action.String(), Reason: f.Reason, Since: statusTime(f.Since), Until: statusTime(f.Until)}
}

// force serves /points/{name}/force: POST sets the point's switch, DELETE
// clears it. See New for the contract.
func (a *server) force(w http.ResponseWriter, r *http.Request) {
	token := a.token()
	if a.opts.Switches == nil || len(token) == 0 {
		http.NotFound(w, r) // the endpoint does not exist without a token
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodDelete {
		w.Header().Set("Allow", "POST, DELETE")
		plainText(w, http.StatusMethodNotAllowed, "method not allowed: POST sets the switch, DELETE clears it\n")
		return
	}
	if !authorized(r.Header.Get("Authorization"), token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sds-proxy admin"`)
		plainText(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <the token in adminTokenFile>\n")
		return
	}
	name := r.PathValue("name")
	if r.Method == http.MethodDelete {
		f, ok := a.opts.Switches.Unforce(name)
		if !ok {
			a.noSwitch(w, name)
			return
		}
		writeJSON(w, http.StatusOK, forced(f))
		return
	}
	req, problem, status := decodeForce(w, r)
	if problem != "" {
		plainText(w, status, problem+"\n")
		return
	}
	action, ok := proxy.ParseForceAction(req.Action)
	if !ok {
		plainText(w, http.StatusBadRequest, fmt.Sprintf("action: %q is not an action; want \"degrade\" or \"pass\"\n", req.Action))
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil {
		plainText(w, http.StatusBadRequest, fmt.Sprintf("ttl: %q is not a duration such as \"10m\" (at most %s)\n", req.TTL, proxy.MaxForceTTL))
		return
	}
	f, err := a.opts.Switches.Force(name, action, ttl, req.Reason)
	switch {
	case errors.Is(err, proxy.ErrUnknownPoint):
		plainText(w, http.StatusNotFound, fmt.Sprintf("point %q: %v\n", name, err))
		return
	case err != nil:
		plainText(w, http.StatusBadRequest, strings.ReplaceAll(err.Error(), "\n", "; ")+"\n")
		return
	}
	writeJSON(w, http.StatusOK, forced(f))
}

// noSwitch answers a DELETE on a point with no switch: 404, saying
// whether the point exists.
func (a *server) noSwitch(w http.ResponseWriter, name string) {
	for sn := range a.opts.Points.Snapshots(a.opts.Now()) {
		if sn.Name == name {
			plainText(w, http.StatusNotFound, fmt.Sprintf("point %q has no switch to clear\n", name))
			return
		}
	}
	plainText(w, http.StatusNotFound, fmt.Sprintf("point %q: %v\n", name, proxy.ErrUnknownPoint))
}

// decodeForce reads a POST's body strictly: application/json, at most
// MaxForceBody bytes, one object with known fields, each present. It
// returns the problem and its status, or "".
func decodeForce(w http.ResponseWriter, r *http.Request) (req forceRequest, problem string, status int) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return req, `Content-Type: want application/json, with a body such as {"action": "degrade", "ttl": "10m", "reason": "..."}`, http.StatusUnsupportedMediaType
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxForceBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return req, fmt.Sprintf("the body is larger than %d bytes", MaxForceBody), http.StatusRequestEntityTooLarge
	case err != nil:
		return req, "reading the body: " + err.Error(), http.StatusBadRequest
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return req, `the body is not a JSON object such as {"action": "degrade", "ttl": "10m", "reason": "..."}: ` + err.Error(), http.StatusBadRequest
	}
	if err := dec.Decode(&req); err != nil {
		return req, "the body: " + err.Error(), http.StatusBadRequest
	}
	for _, k := range []string{"action", "ttl", "reason"} {
		if _, ok := fields[k]; !ok {
			return req, fmt.Sprintf("%s: missing; the body needs action, ttl and reason", k), http.StatusBadRequest
		}
	}
	return req, "", 0
}

// authorized reports whether header is "Bearer <token>". The comparison
// is of the two values' SHA-256 sums, in constant time, so that neither
// the token's bytes nor its length show in the time taken.
func authorized(header string, token []byte) bool {
	scheme, given, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	a, b := sha256.Sum256([]byte(strings.TrimSpace(given))), sha256.Sum256(token)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// token returns the bearer token of the write endpoints, nil when there
// is none.
func (a *server) token() []byte {
	if a.opts.Token == nil {
		return nil
	}
	return a.opts.Token()
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // cannot happen: v holds no unsupported values
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// statusForces returns the switches in force at now by point name; nil
// without Switches.
func (a *server) statusForces(now time.Time) map[string]*Switch {
	if a.opts.Switches == nil {
		return nil
	}
	fs := a.opts.Switches.Forces(now)
	if len(fs) == 0 {
		return nil
	}
	m := make(map[string]*Switch, len(fs))
	for _, f := range fs {
		j := forced(f)
		j.Point = ""
		m[f.Point] = j
	}
	return m
}
