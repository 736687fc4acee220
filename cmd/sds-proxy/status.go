package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sds-proxy/sds-proxy/config"
)

// defaultAdmin is where `sds-proxy status` and `validate -diff` look for the
// admin port when not told: the default admin address, on loopback, as
// from inside the pod (kubectl exec).
const defaultAdmin = "127.0.0.1:9901"

// maxAdminBody bounds what the commands read of an admin port's answer:
// /status of 1,000 points with their series and events stays well under it.
const maxAdminBody = 64 << 20

// status prints the state of a running proxy's points, read from its
// admin port's GET /status: a table (-o table, the default), or the
// document itself (-o json, indented). It returns errUsage for a wrong
// command line, and an error naming the address and the cause when the
// admin port cannot be reached, answers other than 200, or answers
// something that is not a /status document.
func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags, err := parseStatusFlags(args, stderr)
	if err != nil || flags.base == "" {
		return err // -h asked for the usage: base is unset
	}
	body, _, err := fetchAdmin(ctx, flags.base, "/status", flags.timeout)
	if err != nil {
		return err
	}
	var doc statusDocument
	if err := decodeStatus(body, &doc); err != nil {
		return fmt.Errorf("admin port at %s: GET /status: %w", flags.base, err)
	}
	if flags.json {
		var out bytes.Buffer
		if err := json.Indent(&out, body, "", "  "); err != nil {
			return fmt.Errorf("admin port at %s: GET /status: %w", flags.base, err)
		}
		out.WriteByte('\n')
		_, err := stdout.Write(out.Bytes())
		return err
	}
	return writeStatusTable(stdout, &doc)
}

// statusFlags are status's command line.
type statusFlags struct {
	base    string        // the admin port's base URL (adminURL)
	json    bool          // -o json
	timeout time.Duration // positive
}

// parseStatusFlags parses status's command line. A wrong one is errUsage,
// after the reason and the usage went to stderr; -h prints the usage and
// returns zero flags and no error. The admin port is -admin when given,
// else the admin address of the -config file (configAdmin), else
// defaultAdmin; a -config file that does not say is an error (exit 1).
func parseStatusFlags(args []string, stderr io.Writer) (statusFlags, error) {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("admin", defaultAdmin, "admin port: host:port or http://host:port (wins over -config)")
	configPath := fs.String("config", "", "the proxy's config file: its admin address is the admin port (wildcard hosts as 127.0.0.1)")
	output := fs.String("o", "table", "output: table or json")
	timeout := fs.Duration("timeout", 5*time.Second, "give up on the admin port after this long")
	fs.Usage = func() { printUsage(fs) }
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return statusFlags{}, nil
	case err != nil:
		return statusFlags{}, errUsage // the flag package printed why
	}
	adminGiven := false
	fs.Visit(func(f *flag.Flag) { adminGiven = adminGiven || f.Name == "admin" })
	if *configPath != "" && !adminGiven {
		a, err := configAdmin(*configPath)
		if err != nil {
			return statusFlags{}, err
		}
		*addr = a
	}
	base, problem := adminURL(*addr)
	switch {
	case fs.NArg() > 0:
		problem = fmt.Errorf("unexpected arguments %q", fs.Args())
	case *output != "table" && *output != "json":
		problem = fmt.Errorf("-o %q: want table or json", *output)
	case *timeout <= 0:
		problem = fmt.Errorf("-timeout %v: want a positive duration", *timeout)
	}
	if problem != nil {
		fmt.Fprintln(stderr, "sds-proxy status:", problem)
		fs.Usage()
		return statusFlags{}, errUsage
	}
	return statusFlags{base: base, json: *output == "json", timeout: *timeout}, nil
}

// maxStatusConfig bounds what status reads of a -config file, in bytes:
// config.ParseText refuses a file over 1 MiB, and the bound keeps a wrong
// path (a device, a log) from being read whole.
const maxStatusConfig = 4 << 20

// configAdmin returns the admin address of the config file at path, as
// the proxy would listen on it, with a wildcard host (0.0.0.0, ::, none)
// made 127.0.0.1: the address status reaches from beside the proxy. The
// file is parsed by config.ParseText, which reads none of the files it
// names; its upstream is not asked for, as run may take it from
// -upstream. A file that does not parse, or whose admin port is 0 (a free
// port chosen at start, which the file cannot tell), is an error that
// says to give -admin.
func configAdmin(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("-config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStatusConfig))
	if err != nil {
		return "", fmt.Errorf("-config: %w", err)
	}
	// A stand-in upstream: the file's own, or its absence, is not status's concern.
	file, err := config.ParseText(path, data, config.Options{Upstream: "http://127.0.0.1:1"})
	if err != nil {
		return "", fmt.Errorf("-config %s does not parse, so its admin address is unknown; give -admin ADDR:\n%w", path, err)
	}
	if _, port, err := net.SplitHostPort(file.Admin); err != nil || port == "0" {
		return "", fmt.Errorf("-config %s: admin %q has no fixed port to reach; give -admin ADDR", path, file.Admin)
	}
	return loopback(file.Admin), nil
}

// adminURL turns -admin into the admin port's base URL: a host:port gets
// http://, a URL (http or https) is taken as it is, without a trailing /.
func adminURL(addr string) (string, error) {
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

// fetchAdmin GETs path from the admin port at base, within timeout, and
// returns the body of a 200 answer and its header. Any other outcome is an
// error that names the address and the cause. It ignores HTTP_PROXY and
// the like: the admin port is reached directly.
func fetchAdmin(ctx context.Context, base, path string, timeout time.Duration) ([]byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("admin port at %s: %w", base, err)
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
		return nil, nil, fmt.Errorf("admin port at %s cannot be reached: GET %s: %w", base, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("admin port at %s: GET %s: reading the answer: %w", base, path, err)
	case len(body) > maxAdminBody:
		return nil, nil, fmt.Errorf("admin port at %s: GET %s: the answer is over %d bytes", base, path, maxAdminBody)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("admin port at %s: GET %s answered %s%s", base, path, resp.Status, firstLine(body))
	}
	return body, resp.Header, nil
}

// firstLine returns ": " and the first line of an error answer's body,
// at most 200 bytes of it, made safe to print (cell), or "" for an empty
// body.
func firstLine(body []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(body), []byte("\n"))
	if len(line) == 0 {
		return ""
	}
	if len(line) > 200 {
		line = append(line[:200:200], "..."...)
	}
	return ": " + cell(string(line))
}

// statusDocument is the part of the admin port's /status document (README,
// "Admin port") that the table shows.
type statusDocument struct {
	Now    time.Time `json:"now"`
	Config struct {
		Path       string    `json:"path"`
		Hash       string    `json:"hash"`
		LoadedAt   time.Time `json:"loadedAt"`
		LastReload *struct {
			At     time.Time `json:"at"`
			OK     bool      `json:"ok"`
			Error  string    `json:"error"`
			Change string    `json:"change"`
		} `json:"lastReload"`
	} `json:"config"`
	// Cluster is the Redis of the shared token buckets; nil without
	// cluster:.
	Cluster *struct {
		Up        bool      `json:"up"`
		Since     time.Time `json:"since"`
		LastError string    `json:"lastError"`
		Replicas  int64     `json:"replicas"`
	} `json:"cluster"`
	// Points is nil when the document has no "points": not a /status.
	Points []statusPoint `json:"points"`
}

type statusPoint struct {
	Name   string         `json:"name"`
	Mode   string         `json:"mode"`
	State  string         `json:"state"`
	Reason *statusReading `json:"reason"`
	Delay  *struct {
		Strategy  string    `json:"strategy"`
		Until     time.Time `json:"until"`
		NextProbe time.Time `json:"nextProbe"`
		Probing   bool      `json:"probing"`
	} `json:"delay"`
	Window struct {
		InFlight int64 `json:"inFlight"`
	} `json:"window"`
	Traffic *struct {
		RequestsPerSecond float64  `json:"requestsPerSecond"`
		ErrorPercent      *float64 `json:"errorPercent"`
		P50               *float64 `json:"p50"`
		P99               *float64 `json:"p99"`
	} `json:"traffic"`
	LastTrip *struct {
		Strategy  string    `json:"strategy"`
		At        time.Time `json:"at"`
		Count     int64     `json:"count"`
		Threshold int64     `json:"threshold"`
	} `json:"lastTrip"`
	// Recovery is the recovery ramp while it runs; nil otherwise.
	Recovery *struct {
		Share float64   `json:"share"`
		Until time.Time `json:"until"`
	} `json:"recovery"`
	// Adaptive is the adaptive concurrency limit; nil when the point has none.
	Adaptive *struct {
		Limit     int64 `json:"limit"`
		Measuring bool  `json:"measuring"`
	} `json:"adaptive"`
	// Forced is an operator's switch in force; nil when none.
	Forced *struct {
		Action string    `json:"action"`
		Reason string    `json:"reason"`
		Until  time.Time `json:"until"`
	} `json:"forced"`
	// Events is the point's event history; a trip's repeats are the
	// trips folded into it.
	Events []struct {
		At      time.Time `json:"at"`
		Kind    string    `json:"kind"`
		Repeats int       `json:"repeats"`
	} `json:"events"`
}

type statusReading struct {
	Strategy  string `json:"strategy"`
	Count     int64  `json:"count"`
	Threshold int64  `json:"threshold"`
}

// decodeStatus reads a /status document into doc: it must be one JSON
// object with "now" and "points".
func decodeStatus(body []byte, doc *statusDocument) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(doc); err != nil {
		return fmt.Errorf("the answer is not a /status document: %w", err)
	}
	if dec.More() {
		return errors.New("the answer is not a /status document: more than one JSON value")
	}
	if doc.Points == nil || doc.Now.IsZero() {
		return errors.New(`the answer is not a /status document: no "now" or no "points"`)
	}
	return nil
}

// writeStatusTable writes doc as a header line and a table of one row per
// point, in config order, ages and times counted from doc.Now; "-" marks
// what the document does not hold.
func writeStatusTable(w io.Writer, doc *statusDocument) error {
	var b bytes.Buffer
	b.WriteString(statusHeader(doc))
	if line := clusterLine(doc); line != "" {
		b.WriteString("\n" + line)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tMODE\tSTATE\tREASON\tRPS\tERR%\tP50\tP99\tINFLIGHT\tLAST TRIP")
	for i := range doc.Points {
		p := &doc.Points[i]
		rps, errPercent, p50, p99 := "-", "-", "-", "-"
		if t := p.Traffic; t != nil {
			rps = strconv.FormatFloat(t.RequestsPerSecond, 'f', 1, 64)
			if t.ErrorPercent != nil {
				errPercent = strconv.FormatFloat(*t.ErrorPercent, 'f', 1, 64)
			}
			p50, p99 = latency(t.P50), latency(t.P99)
		}
		lastTrip := "-"
		if t := p.LastTrip; t != nil {
			lastTrip = fmt.Sprintf("%s %d/%d %s ago", t.Strategy, t.Count, t.Threshold, age(doc.Now, t.At))
			lastTrip += tripCount(doc.Now, p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", cell(p.Name), cell(p.Mode), state(p), reason(doc.Now, p),
			rps, errPercent, p50, p99, p.Window.InFlight, lastTrip)
	}
	if len(doc.Points) == 0 {
		fmt.Fprintln(tw, "(no points)")
	}
	tw.Flush()
	_, err := w.Write(b.Bytes())
	return err
}

// tripCount is what the LAST TRIP cell adds when p's event history holds
// more than one trip, repeats included: ", N trips in D", D from the first
// of them to now; "" otherwise.
func tripCount(now time.Time, p *statusPoint) string {
	n, first := 0, now
	for _, e := range p.Events {
		if e.Kind != "trip" {
			continue
		}
		n += 1 + e.Repeats
		if e.At.Before(first) {
			first = e.At
		}
	}
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(", %d trips in %s", n, age(now, first))
}

// statusHeader is the line above the table: the config in force and the
// last reload.
func statusHeader(doc *statusDocument) string {
	c := &doc.Config
	var b strings.Builder
	if c.Path == "" {
		b.WriteString("config: none (run from -upstream alone)")
	} else {
		hash := c.Hash
		if len(hash) > 12 {
			hash = hash[:12]
		}
		fmt.Fprintf(&b, "config: %s (sha256 %s)", cell(c.Path), hash)
		if !c.LoadedAt.IsZero() {
			fmt.Fprintf(&b, " loaded %s ago", age(doc.Now, c.LoadedAt))
		}
	}
	switch r := c.LastReload; {
	case r == nil:
	case r.OK && r.Change != "":
		fmt.Fprintf(&b, "; last reload ok %s ago: %s", age(doc.Now, r.At), cell(r.Change))
	case r.OK:
		fmt.Fprintf(&b, "; last reload ok %s ago", age(doc.Now, r.At))
	default:
		line, _, _ := strings.Cut(r.Error, "\n")
		fmt.Fprintf(&b, "; last reload REJECTED %s ago: %s", age(doc.Now, r.At), cell(line))
	}
	return b.String()
}

// clusterLine is the line about the shared buckets' Redis under the
// header, or "" without cluster:.
func clusterLine(doc *statusDocument) string {
	c := doc.Cluster
	switch {
	case c == nil:
		return ""
	case c.Up:
		return fmt.Sprintf("redis: up for %s: the points share their clusterTokenBucket", age(doc.Now, c.Since))
	case c.Since.IsZero():
		return fmt.Sprintf("redis: no answer yet: each point counts on its share (tokensPerSecond / %d)", c.Replicas)
	}
	line, _, _ := strings.Cut(c.LastError, "\n")
	return fmt.Sprintf("redis: DOWN for %s: each point counts on its share (tokensPerSecond / %d): %s", age(doc.Now, c.Since), c.Replicas, cell(line))
}

// reason is the REASON cell: inside a delay, its strategy, end and next
// probe; else the strategy that would trip with its count against its
// threshold; else "-".
func reason(now time.Time, p *statusPoint) string {
	if f := p.Forced; f != nil {
		return fmt.Sprintf("switch ends in %s: %s (then %s)", until(now, f.Until), short(cell(f.Reason), 60), limiterReason(now, p))
	}
	return limiterReason(now, p)
}

// state is the STATE cell: "forced:ACTION" under an operator's switch,
// else the point's state.
func state(p *statusPoint) string {
	if f := p.Forced; f != nil {
		return "forced:" + cell(f.Action)
	}
	return cell(p.State)
}

// short cuts s to at most n characters, marking the cut with "...".
func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}

// limiterReason is reason without a switch: what the point's limiter says.
func limiterReason(now time.Time, p *statusPoint) string {
	if d := p.Delay; d != nil {
		s := fmt.Sprintf("%s delay, ends in %s", cell(d.Strategy), until(now, d.Until))
		switch {
		case d.Probing:
			s += ", probing"
		case !d.NextProbe.IsZero():
			s += ", probe in " + until(now, d.NextProbe)
		}
		return s
	}
	if r := p.Reason; r != nil {
		return fmt.Sprintf("%s %d/%d", cell(r.Strategy), r.Count, r.Threshold)
	}
	if p.Forced != nil {
		return cell(p.State)
	}
	if r := p.Recovery; r != nil {
		return fmt.Sprintf("admits %d%%, all in %s", int(r.Share*100), until(now, r.Until))
	}
	if a := p.Adaptive; a != nil {
		if a.Measuring {
			return fmt.Sprintf("adaptive limit %d (measuring)", a.Limit)
		}
		return fmt.Sprintf("adaptive limit %d", a.Limit)
	}
	return "-"
}

// age is how long before now t was, to the second ("3m12s"); "0s" for a
// t after now (clocks apart).
func age(now, t time.Time) string {
	return max(now.Sub(t), 0).Round(time.Second).String()
}

// until is how long after now t is, to the tenth of a second below 10s
// ("2.5s") and to the second above ("28s"); "0s" once t has passed.
func until(now, t time.Time) string {
	d := max(t.Sub(now), 0)
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// latency formats a latency in seconds for the table: "850µs", "12.3ms",
// "1.25s"; "-" for none.
func latency(seconds *float64) string {
	if seconds == nil {
		return "-"
	}
	d := time.Duration(*seconds * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(*seconds*1000, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(*seconds, 'f', 2, 64) + "s"
}

// cell makes a string from the document safe for one table cell: no tab,
// newline or other control character (a hostile or broken admin port
// cannot break the table or write escape sequences to the terminal), "-"
// when empty.
func cell(s string) string {
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
