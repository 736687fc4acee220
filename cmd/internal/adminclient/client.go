// Package adminclient is sds-proxy's client of a running proxy's admin
// port: the status command (Status) prints GET /status, the force command
// (Force) sets and clears the operators' switches, and validate -diff
// reads GET /config through Get. It decodes /status into proxy/admin's
// Status, the document's one definition, and tolerates the fields it does
// not know, so that it reads an older or newer proxy's document.
package adminclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultAdmin is where the commands look for the admin port when not
// told: the default admin address, on loopback, as from inside the pod
// (kubectl exec).
const DefaultAdmin = "127.0.0.1:9901"

// maxAdminBody bounds what Get reads of an admin port's answer, in bytes:
// /status of 1,000 points with their series and events stays well under
// it.
const maxAdminBody = 64 << 20

// maxSwitchBody bounds what Force reads of the force endpoints' answer, in
// bytes: a switch is one small JSON object.
const maxSwitchBody = 1 << 20

// URL turns an -admin flag into the admin port's base URL: a host:port
// gets http://, a URL (http or https) is taken as it is, without a
// trailing /. Anything else (another scheme, a query, no host) is an
// error naming the flag.
func URL(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("-admin %q: %w", addr, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("-admin %q: want host:port or http://host:port", addr)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Get GETs path from the admin port at base (URL's), within timeout, and
// returns the body of a 200 answer, at most 64 MiB, and its header. Any
// other outcome is an error that names the address and the cause.
func Get(ctx context.Context, base, path string, timeout time.Duration) ([]byte, http.Header, error) {
	return roundTrip(ctx, request{base: base, method: http.MethodGet, path: path, limit: maxAdminBody}, timeout)
}

// request is one request to the admin port.
type request struct {
	base, method, path string
	// token is the bearer token, and body the JSON body; none when nil.
	token, body []byte
	// limit is the most bytes of the answer read: a longer one is an
	// error.
	limit int
	// hint, when not nil, explains a status other than 200: its text is
	// appended to the error.
	hint func(status int, answer []byte) string
}

// roundTrip sends r within timeout and returns the body and header of a
// 200 answer. Any other outcome is an error naming the address, the
// request, and the answer's status and first line. It ignores HTTP_PROXY
// and the like: the admin port is reached directly.
func roundTrip(ctx context.Context, r request, timeout time.Duration) ([]byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, r.base+r.path, bytes.NewReader(r.body))
	if err != nil {
		return nil, nil, fmt.Errorf("admin port at %s: %w", r.base, err)
	}
	if r.token != nil {
		req.Header.Set("Authorization", "Bearer "+string(r.token))
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is in the message already
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v", timeout)
		}
		return nil, nil, fmt.Errorf("admin port at %s cannot be reached: %s %s: %w", r.base, r.method, r.path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, int64(r.limit)+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("admin port at %s: %s %s: reading the answer: %w", r.base, r.method, r.path, err)
	case len(answer) > r.limit:
		return nil, nil, fmt.Errorf("admin port at %s: %s %s: the answer is over %d bytes", r.base, r.method, r.path, r.limit)
	case resp.StatusCode != http.StatusOK:
		hint := ""
		if r.hint != nil {
			hint = r.hint(resp.StatusCode, answer)
		}
		return nil, nil, fmt.Errorf("admin port at %s: %s %s answered %s%s%s", r.base, r.method, r.path, resp.Status, firstLine(answer), hint)
	}
	return answer, resp.Header, nil
}

// firstLine returns ": " and the first line of an error answer's body,
// at most 200 bytes of it, made safe to print (Cell), or "" for an empty
// body.
func firstLine(body []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(body), []byte("\n"))
	if len(line) == 0 {
		return ""
	}
	if len(line) > 200 {
		line = append(line[:200:200], "..."...)
	}
	return ": " + Cell(string(line))
}

// Cell makes a string from the admin port safe for one table cell or one
// line of output: no tab, newline or other control character (a hostile
// or broken admin port cannot break the table or write escape sequences
// to the terminal), "-" when empty.
func Cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
